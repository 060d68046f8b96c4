import Foundation
import PushCrypto

/// Certificates and keys for Redis over TLS in tests, as PEM files in a private directory (redis-server and
/// clients take them by path): a CA with a server certificate for the loopback names and `serverName`, a server
/// certificate valid for `serverName` only (a client that connects to 127.0.0.1 must be told to verify that
/// name, as with cluster nodes that announce IP addresses), a client certificate for mutual TLS, and an unrelated
/// CA with a client certificate of its own, which neither side may trust.
public struct RedisTLSMaterial: Sendable {
    /// The made-up name both server certificates are valid for; it resolves nowhere.
    public static let serverName = "redis.push.test"

    public let directory: URL
    public let caFile: String
    /// Valid for `localhost`, `127.0.0.1` and `serverName`.
    public let serverCertFile: String
    public let serverKeyFile: String
    /// Valid for `serverName` only: not for 127.0.0.1, where the server listens.
    public let serverNameOnlyCertFile: String
    public let serverNameOnlyKeyFile: String
    /// Issued by the CA of `caFile`, for the client side of mutual TLS.
    public let clientCertFile: String
    public let clientKeyFile: String
    /// A CA that issued none of the above: a client that trusts only it cannot verify the servers.
    public let unrelatedCAFile: String
    /// A client certificate of the unrelated CA: a server that requires client certificates refuses it.
    public let unrelatedClientCertFile: String
    public let unrelatedClientKeyFile: String

    public var serverName: String { Self.serverName }

    /// Makes everything anew in a fresh directory (mode 0700) under the temporary directory.
    public static func make() throws -> RedisTLSMaterial {
        let authority = try CertificateAuthority(commonName: "push-worker Redis test CA")
        let server = try authority.issueServerCertificate(names: ["localhost", "127.0.0.1", serverName])
        let serverNameOnly = try authority.issueServerCertificate(names: [serverName])
        let client = try authority.issueClientCertificate(commonName: "worker")
        let unrelated = try CertificateAuthority(commonName: "an unrelated CA")
        let unrelatedClient = try unrelated.issueClientCertificate(commonName: "worker")

        let directory = try PrivateDirectory(prefix: "redis-tls")
        let write = directory.write
        return RedisTLSMaterial(
            directory: directory.url,
            caFile: try write("ca.pem", authority.certificatePEM),
            serverCertFile: try write("server.pem", server.certificatePEM),
            serverKeyFile: try write("server-key.pem", server.privateKeyPEM),
            serverNameOnlyCertFile: try write("server-name-only.pem", serverNameOnly.certificatePEM),
            serverNameOnlyKeyFile: try write("server-name-only-key.pem", serverNameOnly.privateKeyPEM),
            clientCertFile: try write("client.pem", client.certificatePEM),
            clientKeyFile: try write("client-key.pem", client.privateKeyPEM),
            unrelatedCAFile: try write("unrelated-ca.pem", unrelated.certificatePEM),
            unrelatedClientCertFile: try write("unrelated-client.pem", unrelatedClient.certificatePEM),
            unrelatedClientKeyFile: try write("unrelated-client-key.pem", unrelatedClient.privateKeyPEM))
    }

    /// Removes the directory with every file in it.
    public func remove() { try? FileManager.default.removeItem(at: directory) }
}
