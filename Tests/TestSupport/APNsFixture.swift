import Foundation
import PushCrypto
import PushSandbox

/// An APNs sandbox over HTTP/2 + TLS with a freshly generated `.p8` signing key.
public struct APNsSandboxFixture: Sendable {
    public static let keyId = "ABC123DEFG"
    public static let teamId = "TEAM123456"
    public static let bundleId = "com.example.chat"

    public let tls: SandboxTLS
    public let server: SandboxServer
    public let sandbox: APNsSandbox
    /// Path of the PKCS#8 PEM signing key (what Apple's `.p8` file holds).
    public let keyFile: String

    public static func start(certificateAuthentication: Bool = false, goAwayEvery: Int? = nil) async throws -> APNsSandboxFixture {
        let tls = try SandboxTLS.make()
        let key = try PrivateKey.generateP256()
        let keyFile = tls.directory.appendingPathComponent("AuthKey_\(keyId).p8").path
        try key.pem().write(toFile: keyFile, atomically: true, encoding: .utf8)
        let sandbox = APNsSandbox(keys: [try APNsSandbox.SigningKey(keyId: keyId, teamId: teamId, publicKeyPEM: key.publicKeyPEM())],
                                  bundleIds: [bundleId], certificateAuthentication: certificateAuthentication,
                                  goAwayEvery: goAwayEvery)
        let server = try await SandboxServer.start(tls: tls, requireClientCertificate: certificateAuthentication,
                                                   initialConcurrentStreams: 1, responder: sandbox.respond)
        return APNsSandboxFixture(tls: tls, server: server, sandbox: sandbox, keyFile: keyFile)
    }

    public func stop() async {
        await server.stop()
        tls.remove()
    }
}
