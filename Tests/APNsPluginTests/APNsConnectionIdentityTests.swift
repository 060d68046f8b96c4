import Foundation
import Logging
import PushCore
import PushCrypto
import PushHTTP
import PushInMemoryKafka
import PushKafka
import PushPipeline
import PushPluginAPI
@testable import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import APNsSandbox
@testable import APNsPlugin

/// Apple binds a connection to the signing key of the first provider token it accepted on it (docs/providers/apns.md
/// APNS-Q28): apps of different teams need connections of their own.
@Suite("APNs: one signing identity per connection")
struct APNsConnectionIdentityTests {
    /// Signing keys written as `.p8` files, each registered with its own team.
    struct Teams {
        let keys: [APNsSandbox.SigningKey]
        let apps: [APNsApp]

        init(_ count: Int, in directory: URL) throws {
            var keys: [APNsSandbox.SigningKey] = []
            var apps: [APNsApp] = []
            for team in 0..<count {
                let key = try PrivateKey.generateP256()
                let keyId = "KEY" + String(1_000_000 + team)
                let teamId = "TEAM" + String(100_000 + team)
                let keyFile = directory.appendingPathComponent("AuthKey_\(keyId).p8").path
                try key.pem().write(toFile: keyFile, atomically: true, encoding: .utf8)
                keys.append(try APNsSandbox.SigningKey(keyId: keyId, teamId: teamId, publicKeyPEM: key.publicKeyPEM()))
                apps.append(
                    APNsApp(bundleId: "com.team\(team).chat", authentication: .token(keyFile: keyFile, keyId: keyId, teamId: teamId)))
            }
            self.keys = keys
            self.apps = apps
        }
    }

    static let deviceToken = String(repeating: "ab", count: 32)

    @Test(
        "a connection is bound to the key of the first token accepted on it: another key's token there is answered 403 UnrelatedKeyIdInToken"
    )
    func sandboxBindsConnectionsToKeys() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let teams = try Teams(2, in: directory)
        let sandbox = APNsSandbox(keys: teams.keys, bundleIds: Set(teams.apps.map(\.bundleId)))
        let tokens = try teams.keys.map { key in
            try APNsTokenCache(
                key: PrivateKey(
                    pem: String(
                        contentsOfFile: directory.appendingPathComponent("AuthKey_\(key.keyId).p8").path,
                        encoding: .utf8)),
                keyId: key.keyId, teamId: key.teamId
            ).token()
        }
        // Two live objects stand for two connections (the server uses its channels' identifiers).
        let connections = [NSObject(), NSObject()]
        let first = ObjectIdentifier(connections[0]), second = ObjectIdentifier(connections[1])
        defer { withExtendedLifetime(connections) {} }
        func answer(team: Int, on connection: ObjectIdentifier) -> (Int, String) {
            let response = sandbox.respond(
                to: SandboxRequest(
                    method: "POST", path: "/3/device/\(Self.deviceToken)",
                    headers: [("authorization", "bearer \(tokens[team])"), ("apns-topic", teams.apps[team].bundleId)],
                    body: Array(#"{"aps":{"alert":"hi"}}"#.utf8), receivedAt: .now, connection: connection))
            let reason = if case .string(let text)? = try? JSONParser.parse(response.body)["reason"] { text } else { "" }
            return (response.status, reason)
        }
        #expect(answer(team: 0, on: first) == (200, ""))
        #expect(answer(team: 1, on: first) == (403, "UnrelatedKeyIdInToken"))
        #expect(answer(team: 1, on: second) == (200, ""), "another connection takes the other key")
        #expect(answer(team: 0, on: first) == (200, ""), "the first key still works on its connection")
        sandbox.connectionClosed(first)
        #expect(answer(team: 1, on: first) == (200, ""), "a closed connection's identifier, reused, starts unbound")
    }

    @Test("apps of one signing key share their connections' scope; apps of different keys or with a certificate have scopes of their own")
    func scopesFollowSigningKeys() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let teams = try Teams(2, in: directory)
        var sameKey = teams.apps[0]
        sameKey.bundleId = "com.team0.other"
        let certificateFile = directory.appendingPathComponent("voip.p12").path
        try Data("not parsed here".utf8).write(to: URL(fileURLWithPath: certificateFile))
        let certificate = APNsApp(
            bundleId: "com.example.voip",
            authentication: .certificate(TLSOptions(clientCertificateFile: certificateFile, clientCertificateFormat: .pkcs12)))
        let provider = try APNsProvider(
            configuration: APNsConfiguration(
                apps: teams.apps + [sameKey, certificate], productionURL: "https://apns.test",
                sandboxURL: "https://sandbox.apns.test"),
            transport: TestTransport.make(), logger: Logger(label: "test"))
        func endpoint(_ app: String) -> String? {
            provider.scope(of: Target(bindingId: "b", provider: .apns, app: app, details: APNsTarget(token: "aa"))).endpoint
        }
        #expect(endpoint("com.team0.chat") == "https://apns.test TEAM100000/KEY1000000")
        #expect(endpoint("com.team0.other") == endpoint("com.team0.chat"))
        #expect(endpoint("com.team1.chat") == "https://apns.test TEAM100001/KEY1000001")
        #expect(endpoint("com.example.voip") == "https://apns.test com.example.voip")
        #expect(provider.connectionIdentities.count == 3, "two signing keys and one certificate")
        #expect(provider.connectionIdentities.contains(ConnectionIdentity("TEAM100001/KEY1000001")))
    }

    @Test(
        "20 teams, each with its own app and key, through one worker against a sandbox that binds connections to keys: every job delivered, no 403",
        arguments: HTTP2FramingKind.allFramings)
    func twentyTeamsThroughOneWorker(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let teams = try Teams(20, in: tls.directory)
        let sandbox = APNsSandbox(keys: teams.keys, bundleIds: Set(teams.apps.map(\.bundleId)))
        let refused = Mutex<[String: Int]>([:])
        let server = try await SandboxServer.start(
            tls: tls, initialConcurrentStreams: 1, connectionClosed: { sandbox.connectionClosed($0) }
        ) { request in
            let response = sandbox.respond(to: request)
            if response.status != 200 {
                let reason =
                    if case .string(let text)? = try? JSONParser.parse(response.body)["reason"] { text } else { "HTTP \(response.status)" }
                refused.withLock { $0[reason, default: 0] += 1 }
            }
            return response
        }
        let provider = try APNsProvider(
            configuration: APNsConfiguration(
                apps: teams.apps, productionURL: server.baseURL,
                sandboxURL: server.baseURL, caFile: tls.caFile),
            transport: NIOHTTP2Transport(name: "apns", framing: framing), logger: testLogger())
        let kafka = InMemoryKafka(topics: ["push.jobs": 4, "push.jobs.urgent": 1, "push.outcomes": 2])
        let jobsPerTeam = 10
        for index in 0..<jobsPerTeam {
            for (team, app) in teams.apps.enumerated() {
                let target =
                    #"{"bindingId":"b-\#(team)-\#(index)","provider":"apns","app":"\#(app.bundleId)","token":"\#(Self.deviceToken)"}"#
                kafka.append(
                    KafkaRecord(
                        topic: "push.jobs", key: Array("user-\(team)".utf8),
                        value: jobJSON(id: "job-\(team)-\(index)", userId: "user-\(team)", targets: [target])))
            }
        }
        let configuration = PipelineConfiguration(shutdownGrace: .seconds(2))
        let processor = JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(),
            retryQueue: nil, logger: testLogger())
        let pipeline = DeliveryPipeline(
            configuration: configuration, sources: kafka.sources(group: "push-worker"), sink: kafka.sink,
            processor: processor, logger: testLogger())
        let running = Task { try await pipeline.run() }
        let jobs = teams.apps.count * jobsPerTeam
        let deadline = ContinuousClock.now + .seconds(120)
        while kafka.messages(in: "push.outcomes").count < jobs, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        pipeline.stop()
        try await running.value
        await provider.shutdown()
        await server.stop()
        let statuses = kafka.messages(in: "push.outcomes").compactMap { message -> String? in
            if case .string(let status)? = (try? JSONParser.parse(message.value))?["status"] { status } else { nil }
        }
        #expect(statuses.count == jobs)
        #expect(statuses.allSatisfy { $0 == "delivered" }, "\(Dictionary(grouping: statuses, by: { $0 }).mapValues(\.count))")
        #expect(refused.withLock { $0 }.isEmpty, "APNs refused nothing")
    }
}
