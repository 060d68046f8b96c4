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
        let directory = try PrivateDirectory(prefix: "push-sandbox")
        let write = directory.write
        return SandboxTLS(
            directory: directory.url,
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
