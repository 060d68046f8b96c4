import Foundation
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
import APNsSandbox
@testable import APNsPlugin

@Suite("APNs sandbox with several teams (push-worker-dev sandbox --apns-teams)")
struct APNsSandboxTeamsTests {
    @Test("another team's app signed with its second key is delivered, and the record names that key id as the signer")
    func recordNamesSigner() async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let record = tls.directory.appendingPathComponent("record").path
        let recorder = FaultInjector(SandboxFaults(), record: try AnswerRecord(path: record))
        let instance = try await APNsSandboxInstance.start(
            tls: tls, teams: 2, keysPerTeam: 2,
            wrap: { responder in
                recorder.wrap(responder, key: APNsSandbox.deviceToken, signer: APNsSandbox.signingKeyId)
            })
        let team = try #require(instance.teams.last)
        #expect(instance.teams.map { $0.bundleId } == ["com.example.app1", "com.example.app2"])
        let key = team.keys[1]
        let app = APNsApp(bundleId: team.bundleId, authentication: .token(keyFile: key.keyFile, keyId: key.keyId, teamId: team.teamId))
        let provider = try APNsProvider(
            configuration: APNsConfiguration(
                apps: [app], productionURL: instance.server.baseURL,
                sandboxURL: instance.server.baseURL, caFile: tls.caFile,
                timeout: .seconds(10)),
            transport: TestTransport.make(connectTimeout: .seconds(10)),
            logger: testLogger())
        let token = String(repeating: "ab", count: 32)
        let target = Target.apns("b1", app: team.bundleId, token: token, environment: nil, pushType: nil)
        let job = Job(
            id: "job-b1", createdAt: currentTimeMilliseconds(), ttl: 30, kind: .message, priority: .high,
            userId: "alice", notification: Notification(title: "Bob", body: "Hi"), targets: [target])
        let result = await provider.deliver(Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds()))
        guard case .delivered = result else {
            Issue.record("expected delivered, got \(result)")
            return
        }
        let fields = try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n").first?.split(separator: " ") ?? []
        #expect(fields.count == 5)
        #expect(fields.dropFirst().first.map(String.init) == token)
        #expect(fields.last.map(String.init) == key.keyId)
        await provider.shutdown()
        await instance.server.stop()
    }
}
