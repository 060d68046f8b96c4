import Foundation
import NIOSSL
import PushCrypto

/// Certificates for a sandbox, written to a private directory so clients can be
/// pointed at them by path (`caFile`, client certificate and key files).
public struct SandboxTLS: Sendable {
    public let directory: URL
    public let caFile: String
    public let serverCertificate: IssuedCertificate
    public let caCertificatePEM: String
    /// A client certificate issued by the same CA, for mutual TLS.
    public let clientCertificateFile: String
    public let clientKeyFile: String

    /// - Parameter serverNames: the names and addresses the server certificate is valid for.
    public static func make(serverNames: [String] = ["localhost", "127.0.0.1"]) throws -> SandboxTLS {
        let authority = try CertificateAuthority()
        let server = try authority.issueServerCertificate(names: serverNames)
        let client = try authority.issueClientCertificate(commonName: "push-worker")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("push-sandbox-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        func write(_ name: String, _ contents: String) throws -> String {
            let url = directory.appendingPathComponent(name)
            try contents.write(to: url, atomically: true, encoding: .utf8)
            return url.path
        }
        return SandboxTLS(
            directory: directory,
            caFile: try write("ca.pem", authority.certificatePEM),
            serverCertificate: server,
            caCertificatePEM: authority.certificatePEM,
            clientCertificateFile: try write("client.pem", client.certificatePEM),
            clientKeyFile: try write("client-key.pem", client.privateKeyPEM))
    }

    /// Removes the certificate directory.
    public func remove() { try? FileManager.default.removeItem(at: directory) }
}

extension SandboxTLS {
    /// A server's TLS configuration with the sandbox's certificate, offering `applicationProtocols` in ALPN.
    public func serverConfiguration(applicationProtocols: [String]) throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(serverCertificate.certificatePEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(serverCertificate.privateKeyPEM.utf8), format: .pem)))
        configuration.applicationProtocols = applicationProtocols
        return configuration
    }
}
