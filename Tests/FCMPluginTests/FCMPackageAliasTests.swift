import Foundation
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
import FCMSandbox
@testable import FCMPlugin

@Suite("FCM apps named by their package, as the Mizu seed's X-MPUSH bindings name them")
struct FCMPackageAliasTests {
    @Test("a target whose app is one of a project's package names is sent to that project and shares its scope")
    func packageNameSelectsItsProject() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await FCMSandboxInstance.start(tls: tls)
        let account = try ServiceAccount(contentsOfFile: instance.credentialsFile)
        let configuration = FCMConfiguration(
            accounts: [
                account,
                ServiceAccount(
                    projectId: "other-project", clientEmail: "o@x",
                    privateKeyId: "k", privateKeyPEM: account.privateKeyPEM,
                    tokenURI: account.tokenURI),
            ],
            packages: ["com.voip.phone": FCMSandboxInstance.projectId],
            endpoint: instance.server.baseURL, caFile: tls.caFile)
        let provider = try FCMProvider(configuration: configuration, transport: TestTransport.make())
        let json =
            #"{"v":1,"id":"j1","kind":"message","userId":"u","notification":{"title":"T"},"targets":[{"bindingId":"b1","xmpush":"a:com.voip.phone:fcm-token-1"}]}"#
        let job = try JobDecoder().decode(Array(json.utf8), fallbackCreatedAt: currentTimeMilliseconds())
        let result = await provider.deliver(Delivery(job: job, target: job.targets[0], attempt: 1, now: currentTimeMilliseconds()))
        guard case .delivered(_, 200?, _) = result else {
            Issue.record("expected delivered, got \(result)")
            return
        }
        #expect(instance.server.requests.last?.path == "/v1/projects/\(FCMSandboxInstance.projectId)/messages:send")
        #expect(provider.scope(of: job.targets[0]) == provider.scope(of: .fcm("b2", app: FCMSandboxInstance.projectId, token: "t")))
        #expect(configuration.projectId(for: "unknown.package") == "unknown.package", "anything else is taken as a project id")
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }
}
