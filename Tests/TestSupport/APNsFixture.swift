import Foundation
import PushSandbox
import APNsSandbox

/// An APNs sandbox over HTTP/2 + TLS with its own CA and a freshly generated `.p8` key.
public struct APNsSandboxFixture: Sendable {
    public static let keyId = APNsSandboxInstance.keyId
    public static let teamId = APNsSandboxInstance.teamId
    public static let bundleId = APNsSandboxInstance.bundleId

    public let tls: SandboxTLS
    public let instance: APNsSandboxInstance

    public var server: SandboxServer { instance.server }
    public var sandbox: APNsSandbox { instance.sandbox }
    public var keyFile: String { instance.keyFile }

    public static func start(certificateAuthentication: Bool = false, goAwayEvery: Int? = nil) async throws -> APNsSandboxFixture {
        let tls = try SandboxTLS.make()
        return APNsSandboxFixture(
            tls: tls,
            instance: try await APNsSandboxInstance.start(
                tls: tls, certificateAuthentication: certificateAuthentication, goAwayEvery: goAwayEvery))
    }

    public func stop() async {
        await server.stop()
        tls.remove()
    }
}
