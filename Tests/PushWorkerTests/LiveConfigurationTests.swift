import APNsPlugin
import APNsSandbox
import Foundation
import PushCore
import PushCrypto
import PushKafka
import PushPipeline
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushWorker
#if canImport(Glibc)
    import Glibc
#endif

/// A worker's providers and the live configuration that replaces them, wired as `Worker` wires them, in front of an
/// APNs sandbox over real TLS; the apps file and keys are real files in a scratch directory.
final class LiveConfigurationHarness: Sendable {
    let scratch: ScratchDirectory
    let tls: SandboxTLS
    let sandbox: APNsSandbox
    let server: SandboxServer
    let processor: JobProcessor
    let live: LiveConfiguration
    let transports: ProviderTransports
    private final class ClosedConnections: Sendable {
        let ids = Mutex<Set<ObjectIdentifier>>([])
    }
    private let closed = ClosedConnections()
    /// The sandbox's connections that have closed, by `SandboxRequest.connection`.
    var closedConnections: Set<ObjectIdentifier> { closed.ids.withLock { $0 } }

    /// A signing key of one Apple team, as the sandbox knows it.
    struct Key: Sendable {
        let id: String
        let key: PrivateKey
        var signingKey: APNsSandbox.SigningKey {
            get throws { try APNsSandbox.SigningKey(keyId: id, teamId: LiveConfigurationHarness.team, publicKeyPEM: key.publicKeyPEM()) }
        }
    }

    static let team = "TEAM123456"

    /// - Parameters:
    ///   - sandboxKeys: the keys the sandbox accepts tokens of.
    ///   - environment: `PUSH_*` settings beside the sandbox's host, port and CA; `write` prepares the files first.
    init(
        sandboxKeys: [Key], bundleIds: Set<String>, circuitFailures: Int = 1000,
        environment: (ScratchDirectory) throws -> [String: String]
    ) async throws {
        _ = TestMetrics.registry
        scratch = try ScratchDirectory()
        tls = try SandboxTLS.make()
        sandbox = APNsSandbox(keys: try sandboxKeys.map { try $0.signingKey }, bundleIds: bundleIds)
        let closed = closed
        let sandbox = sandbox
        server = try await SandboxServer.start(
            tls: tls, initialConcurrentStreams: 1,
            connectionClosed: { connection in
                sandbox.connectionClosed(connection)
                closed.ids.withLock { _ = $0.insert(connection) }
            }, responder: sandbox.respond)
        var variables = try environment(scratch)
        variables.merge(["PUSH_APNS_HOST": "localhost", "PUSH_APNS_PORT": String(server.port), "PUSH_APNS_CA_FILE": tls.caFile]) { $1 }
        let configuration = try WorkerConfiguration.load(from: variables, requireBrokers: false).get()
        let logger = testLogger()
        transports = Worker.transports(configuration)
        let context = Worker.context(configuration, transports: transports, logger: logger)
        let providers = LiveProviders(try Worker.makeRegistry(configuration, context: context))
        let metrics = PipelineMetrics(appLabels: MetricAppLabels(Dictionary(configuration.plugins.map { ($0.id, $0.appLabels) }) { $1 }))
        var pipeline = configuration.pipeline
        pipeline.retryPolicy = RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 1)
        pipeline.circuitBreaker = CircuitBreaker.Settings(failureThreshold: circuitFailures, coolDownMilliseconds: 600_000)
        processor = JobProcessor(
            providers: providers, configuration: pipeline, store: InMemoryDeliveryStore(), retryQueue: nil,
            metrics: metrics, logger: logger)
        live = LiveConfiguration(
            source: configuration.providerSource, version: configuration.providerVersion, plugins: configuration.plugins,
            attemptTimeout: pipeline.attemptTimeout,
            providers: providers, formats: configuration.targetFormats, context: context, transports: transports,
            breakers: processor.circuitBreakers, metrics: metrics, logger: logger)
    }

    deinit {
        transports.shutdown()
        scratch.remove()
        tls.remove()
    }

    func stop() async { await server.stop() }

    static func key(_ id: String) throws -> Key { Key(id: id, key: try PrivateKey.generateP256()) }

    /// Writes `key` as a `.p8` file at `path` (replacing what was there, as a secret update does).
    @discardableResult
    static func write(_ key: Key, to path: String) throws -> String {
        try key.key.pem().write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// An apps file entry of a token-authenticated app.
    static func app(_ bundleId: String, key: Key, file: String) -> String {
        #"{"bundleId":"\#(bundleId)","keyFile":"\#(file)","keyId":"\#(key.id)","teamId":"\#(team)"}"#
    }

    static func appsFile(_ entries: [String]) -> String { #"{"apns":[\#(entries.joined(separator: ","))]}"# }

    /// The apps file in the scratch directory.
    var appsPath: String { scratch.url.appendingPathComponent("apps.json").path }
    /// The key file of `sharingOneKey`.
    var sharedKeyFile: String { scratch.url.appendingPathComponent("key.p8").path }

    /// Writes the apps file at `path`: each app signed with its key, from its key file.
    @discardableResult
    static func writeApps(_ apps: [(bundleId: String, key: Key, file: String)], to path: String) throws -> String {
        try appsFile(apps.map { app($0.bundleId, key: $0.key, file: $0.file) }).write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Replaces the apps file with `bundleIds`' apps, all signed with `key` from `sharedKeyFile`.
    func writeApps(_ bundleIds: [String], sharing key: Key) throws {
        try Self.writeApps(bundleIds.map { ($0, key, sharedKeyFile) }, to: appsPath)
    }

    /// A harness whose apps file lists `apps`, all signed with `key`, written to `key.p8`.
    static func sharingOneKey(
        _ key: Key, apps: [String], bundleIds: Set<String>, circuitFailures: Int = 1000
    ) async throws -> LiveConfigurationHarness {
        try await LiveConfigurationHarness(sandboxKeys: [key], bundleIds: bundleIds, circuitFailures: circuitFailures) { scratch in
            let keyFile = try write(key, to: scratch.url.appendingPathComponent("key.p8").path)
            let path = try writeApps(apps.map { ($0, key, keyFile) }, to: scratch.url.appendingPathComponent("apps.json").path)
            return ["PUSH_APPS_FILE": path]
        }
    }

    /// Sends one message job to `bundleId` and returns its outcome.
    func send(to bundleId: String, token: String = "00aa" + String(repeating: "0", count: 60)) async throws -> Outcome {
        let id = UUID().uuidString
        let target = #"{"bindingId":"b-\#(id)","provider":"apns","app":"\#(bundleId)","token":"\#(token)"}"#
        let message = KafkaMessage(
            topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil,
            value: jobJSON(id: id, targets: [target]), timestamp: currentTimeMilliseconds())
        guard case .publish(let publications, _) = await processor.process(message), case .outcome(let outcome)? = publications.first else {
            throw Unexpected("no outcome")
        }
        return outcome
    }

    /// The key id of the provider token on the last request the sandbox received.
    var lastKeyId: String? { server.requests.last.flatMap(Self.keyId) }

    /// The key id of a request's provider token.
    static func keyId(of request: SandboxRequest) -> String? {
        guard let bearer = request.header("authorization")?.dropFirst("bearer ".count),
            let token = JSONWebToken.parse(String(bearer)), case .string(let kid)? = token.header["kid"]
        else { return nil }
        return kid
    }

    /// The connections the sandbox received requests signed with each key id on.
    var connectionsByKeyId: [String: Set<ObjectIdentifier>] {
        server.requests.reduce(into: [:]) { byKey, request in
            guard let keyId = Self.keyId(of: request), let connection = request.connection else { return }
            byKey[keyId, default: []].insert(connection)
        }
    }

    /// The key id each device token's requests were signed with, as the sandbox received them.
    var keyIdsByToken: [String: Set<String>] {
        server.requests.reduce(into: [:]) { byToken, request in
            guard request.path.hasPrefix("/3/device/") else { return }
            byToken[String(request.path.dropFirst("/3/device/".count)), default: []].insert(Self.keyId(of: request) ?? "-")
        }
    }

    struct Unexpected: Error {
        let what: String
        init(_ what: String) { self.what = what }
    }
}

/// A Kubernetes secret volume: each file a link through `..data` to a timestamped directory, the whole version swapped
/// by renaming a new `..data` link over the old one (what kubelet's atomic writer does).
struct SecretVolume {
    let root: URL
    private var generation = 0

    init(in scratch: ScratchDirectory, files: [String: String]) throws {
        root = scratch.url.appendingPathComponent("secret")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try publish(files)
        for name in files.keys {
            try FileManager.default.createSymbolicLink(atPath: path(name), withDestinationPath: "..data/\(name)")
        }
    }

    func path(_ name: String) -> String { root.appendingPathComponent(name).path }

    /// Writes a new version's directory and points `..data` at it in one rename.
    mutating func publish(_ files: [String: String]) throws {
        generation += 1
        let version = "..v\(generation)"
        let directory = root.appendingPathComponent(version)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, content) in files { try content.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        let staged = root.appendingPathComponent("..data_tmp").path
        try FileManager.default.createSymbolicLink(atPath: staged, withDestinationPath: version)
        guard rename(staged, root.appendingPathComponent("..data").path) == 0 else {
            throw LiveConfigurationHarness.Unexpected("rename failed")
        }
    }
}

@Suite("Live configuration: PUSH_APPS_FILE and credential files applied without a restart", .serialized)
struct LiveConfigurationTests {
    static let chat = "com.example.chat"
    static let phone = "com.example.phone"

    @Test("an app added to PUSH_APPS_FILE is served after the reload, under its own metric label, with the token of its unchanged key")
    func addedAppIsServed() async throws {
        let key = try LiveConfigurationHarness.key("KEY1111111")
        let harness = try await LiveConfigurationHarness.sharingOneKey(key, apps: [Self.chat], bundleIds: [Self.chat, Self.phone])
        let before = try await harness.send(to: Self.phone)
        #expect(before.status == .failed)
        #expect(before.reason == "no APNs credentials for app \(Self.phone)")
        #expect(try await harness.send(to: Self.chat).status == .delivered)
        let tokenBefore = harness.server.requests.last?.header("authorization")
        // Past the second of that token's `iat`: a token signed anew after the reload would differ.
        try await Task.sleep(for: .milliseconds(1100))

        try harness.writeApps([Self.chat, Self.phone], sharing: key)
        #expect(harness.live.check() == .applied([.apns]))
        #expect(try await harness.send(to: Self.phone).status == .delivered)
        #expect(
            harness.server.requests.last?.header("authorization") == tokenBefore,
            "the key did not change, so its provider token is kept (Apple refuses a new one within 20 minutes)")
        #expect(try await harness.send(to: Self.chat).status == .delivered)
        #expect(TestMetrics.value(of: #"push_deliveries_total{provider="apns",app="\#(Self.phone)",status="delivered"}"#) ?? 0 >= 1)
        #expect(harness.live.check() == .unchanged)
        await harness.stop()
    }

    @Test("an app removed from PUSH_APPS_FILE ends failed with no credentials, and its circuit breaker is forgotten")
    func removedAppEndsFailed() async throws {
        let key = try LiveConfigurationHarness.key("KEY1111111")
        let harness = try await LiveConfigurationHarness.sharingOneKey(
            key, apps: [Self.chat, Self.phone], bundleIds: [Self.chat, Self.phone], circuitFailures: 1)
        #expect(try await harness.send(to: Self.phone).status == .delivered)
        // A 500 opens the phone app's circuit (threshold 1).
        _ = try await harness.send(to: Self.phone, token: "0500" + String(repeating: "0", count: 60))
        #expect(harness.processor.circuitBreakers.openCircuits.keys.contains { $0.key.hasPrefix(Self.phone) })

        try harness.writeApps([Self.chat], sharing: key)
        #expect(harness.live.check() == .applied([.apns]))
        #expect(!harness.processor.circuitBreakers.openCircuits.keys.contains { $0.key.hasPrefix(Self.phone) })
        let sentBefore = harness.server.requests.count
        let removed = try await harness.send(to: Self.phone)
        #expect(removed.status == .failed)
        #expect(removed.reason == "no APNs credentials for app \(Self.phone)")
        #expect(harness.server.requests.count == sentBefore, "nothing is sent for a removed app")
        #expect(try await harness.send(to: Self.chat).status == .delivered)
        await harness.stop()
    }

    @Test("the connections of a signing key no app uses after a reload are closed; another key's connections stay open")
    func removedKeyConnectionsClose() async throws {
        let chatKey = try LiveConfigurationHarness.key("KEY1111111")
        let phoneKey = try LiveConfigurationHarness.key("KEY2222222")
        let harness = try await LiveConfigurationHarness(sandboxKeys: [chatKey, phoneKey], bundleIds: [Self.chat, Self.phone]) { scratch in
            let chatFile = try LiveConfigurationHarness.write(chatKey, to: scratch.url.appendingPathComponent("chat.p8").path)
            let phoneFile = try LiveConfigurationHarness.write(phoneKey, to: scratch.url.appendingPathComponent("phone.p8").path)
            let apps = scratch.url.appendingPathComponent("apps.json").path
            try LiveConfigurationHarness.appsFile([
                LiveConfigurationHarness.app(Self.chat, key: chatKey, file: chatFile),
                LiveConfigurationHarness.app(Self.phone, key: phoneKey, file: phoneFile),
            ])
            .write(toFile: apps, atomically: true, encoding: .utf8)
            return ["PUSH_APPS_FILE": apps]
        }
        #expect(try await harness.send(to: Self.chat).status == .delivered)
        #expect(try await harness.send(to: Self.phone).status == .delivered)
        let connections = harness.connectionsByKeyId
        let chatConnections = connections[chatKey.id] ?? []
        let phoneConnections = connections[phoneKey.id] ?? []
        try #require(!chatConnections.isEmpty && !phoneConnections.isEmpty)
        #expect(chatConnections.isDisjoint(with: phoneConnections), "each signing key has connections of its own")

        let chatFile = harness.scratch.url.appendingPathComponent("chat.p8").path
        try LiveConfigurationHarness.appsFile([LiveConfigurationHarness.app(Self.chat, key: chatKey, file: chatFile)])
            .write(toFile: harness.scratch.url.appendingPathComponent("apps.json").path, atomically: true, encoding: .utf8)
        #expect(harness.live.check() == .applied([.apns]))
        // APNs connections otherwise live a day idle: only the reload closes them.
        let deadline = ContinuousClock.now + .seconds(20)
        while !phoneConnections.isSubset(of: harness.closedConnections), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(phoneConnections.isSubset(of: harness.closedConnections), "the removed key's connections are closed")
        #expect(chatConnections.isDisjoint(with: harness.closedConnections), "the remaining key keeps its connections")
        #expect(try await harness.send(to: Self.chat).status == .delivered)
        #expect((harness.connectionsByKeyId[chatKey.id] ?? []) == chatConnections, "and goes on using them")
        await harness.stop()
    }

    @Test("a key rotated through a secret volume's ..data swap signs the next tokens; the sandbox knows only the new key")
    func rotatedKeyThroughSymlinkSwap() async throws {
        let old = try LiveConfigurationHarness.key("KEYOLD0000"), new = try LiveConfigurationHarness.key("KEYNEW0000")
        let volume = Mutex<SecretVolume?>(nil)
        let harness = try await LiveConfigurationHarness(sandboxKeys: [new], bundleIds: [Self.chat]) { scratch in
            let made = try SecretVolume(
                in: scratch,
                files: [
                    "key.p8": try old.key.pem(),
                    "apps.json": LiveConfigurationHarness.appsFile([
                        LiveConfigurationHarness.app(Self.chat, key: old, file: scratch.url.appendingPathComponent("secret/key.p8").path)
                    ]),
                ])
            volume.withLock { $0 = made }
            return ["PUSH_APPS_FILE": made.path("apps.json")]
        }
        var secret = try #require(volume.withLock { $0 })
        let before = try await harness.send(to: Self.chat)
        #expect(before.status == .failed)
        #expect(before.httpStatus == 403)
        #expect(harness.lastKeyId == "KEYOLD0000")

        try secret.publish([
            "key.p8": try new.key.pem(),
            "apps.json": LiveConfigurationHarness.appsFile([LiveConfigurationHarness.app(Self.chat, key: new, file: secret.path("key.p8"))]
            ),
        ])
        #expect(harness.live.check() == .applied([.apns]))
        #expect(try await harness.send(to: Self.chat).status == .delivered)
        #expect(harness.lastKeyId == "KEYNEW0000")
        await harness.stop()
    }

    @Test("a single-app shortcut key file (PUSH_APNS_KEY_FILE) rewritten in place is watched and applied")
    func shortcutKeyFileIsWatched() async throws {
        let wrong = try LiveConfigurationHarness.key("KEY1111111"), right = try LiveConfigurationHarness.key("KEY1111111")
        let harness = try await LiveConfigurationHarness(sandboxKeys: [right], bundleIds: [Self.chat]) { scratch in
            let keyFile = try LiveConfigurationHarness.write(wrong, to: scratch.url.appendingPathComponent("AuthKey.p8").path)
            return [
                "PUSH_APNS_KEY_FILE": keyFile, "PUSH_APNS_KEY_ID": "KEY1111111", "PUSH_APNS_TEAM_ID": LiveConfigurationHarness.team,
                "PUSH_APNS_BUNDLE_ID": Self.chat,
            ]
        }
        #expect(try await harness.send(to: Self.chat).httpStatus == 403)
        try LiveConfigurationHarness.write(right, to: harness.scratch.url.appendingPathComponent("AuthKey.p8").path)
        #expect(harness.live.check() == .applied([.apns]))
        #expect(try await harness.send(to: Self.chat).status == .delivered)
        await harness.stop()
    }

    @Test(
        "a broken version (unparsable file, missing key file, a key that is no key, one bad app among good ones) keeps the last good one whole and counts a failure once",
        arguments: ["unparsable", "missing key", "bad key", "one bad app"])
    func brokenVersionKeepsTheLastGood(breakage: String) async throws {
        let key = try LiveConfigurationHarness.key("KEY1111111")
        let harness = try await LiveConfigurationHarness.sharingOneKey(key, apps: [Self.chat], bundleIds: [Self.chat, Self.phone])
        let keyFile = harness.sharedKeyFile, apps = harness.appsPath
        let version = harness.live.loadedVersion
        let failures = TestMetrics.value(of: #"push_config_reloads_total{result="failure"}"#) ?? 0
        let expected: String
        switch breakage {
        case "unparsable":
            try #"{"apns": [ "#.write(toFile: apps, atomically: true, encoding: .utf8)
            expected = "PUSH_APPS_FILE \(apps) is not a JSON object"
        case "missing key":
            try FileManager.default.removeItem(atPath: keyFile)
            expected = "PUSH_APPS_FILE apns[0] (\(Self.chat)): key file \(keyFile) does not exist or is not readable"
        case "bad key":
            try "not a key".write(toFile: keyFile, atomically: true, encoding: .utf8)
            expected = "PUSH_APPS_FILE apns[0] (\(Self.chat)): key file \(keyFile) is not a PEM private key (an APNs .p8 file is one)"
        default:
            let missing = harness.scratch.url.appendingPathComponent("missing.p8").path
            try LiveConfigurationHarness.appsFile([
                LiveConfigurationHarness.app(Self.chat, key: key, file: keyFile),
                LiveConfigurationHarness.app(Self.phone, key: key, file: missing),
            ])
            .write(toFile: apps, atomically: true, encoding: .utf8)
            expected = "PUSH_APPS_FILE apns[1] (\(Self.phone)): key file \(missing) does not exist or is not readable"
        }
        guard case .refused(let problems) = harness.live.check() else {
            Issue.record("the broken version was applied")
            return
        }
        #expect(problems.contains(expected), "\(problems)")
        #expect(harness.live.loadedVersion == version)
        #expect(TestMetrics.value(of: #"push_config_reloads_total{result="failure"}"#) == failures + 1)
        #expect(TestMetrics.value(of: "push_config_refused") == 1)
        #expect(harness.live.check() == .unchanged, "the same broken version is reported once")
        #expect(TestMetrics.value(of: #"push_config_reloads_total{result="failure"}"#) == failures + 1)
        #expect(try await harness.send(to: Self.chat).status == .delivered)
        #expect(try await harness.send(to: Self.phone).status == .failed, "no part of a refused version is applied")

        try LiveConfigurationHarness.write(key, to: keyFile)
        try LiveConfigurationHarness.appsFile([
            LiveConfigurationHarness.app(Self.chat, key: key, file: keyFile),
            LiveConfigurationHarness.app(Self.phone, key: key, file: keyFile),
        ])
        .write(toFile: apps, atomically: true, encoding: .utf8)
        #expect(harness.live.check() == .applied([.apns]))
        #expect(TestMetrics.value(of: "push_config_refused") == 0)
        #expect(try await harness.send(to: Self.phone).status == .delivered)
        await harness.stop()
    }

    @Test("SIGHUP forces a reload at once")
    func hangUpReloads() async throws {
        let key = try LiveConfigurationHarness.key("KEY1111111")
        let harness = try await LiveConfigurationHarness.sharingOneKey(key, apps: [Self.chat], bundleIds: [Self.chat, Self.phone])
        let reloads = AsyncStream.makeStream(of: LiveConfiguration.Reload.self)
        let watcher = AppsWatcher(configuration: harness.live, interval: nil, reloadsOnHangUp: true) { reloads.continuation.yield($0) }
        // A SIGHUP before the watcher traps it is ignored, not the end of the test process.
        signal(SIGHUP, SIG_IGN)
        let watching = Task { await watcher.run() }
        try harness.writeApps([Self.chat, Self.phone], sharing: key)
        // A bound, not a timing assertion: a signal that never arrives fails the test instead of hanging it.
        let bound = Task {
            try await Task.sleep(for: .seconds(30))
            reloads.continuation.finish()
        }
        var results = reloads.stream.makeAsyncIterator()
        // Sent until the watcher answers: it may not trap the signal yet. Only the first check finds the change.
        let hangingUp = Task {
            while !Task.isCancelled {
                kill(getpid(), SIGHUP)
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        #expect(await results.next() == .applied([.apns]))
        hangingUp.cancel()
        #expect(try await harness.send(to: Self.phone).status == .delivered)
        kill(getpid(), SIGHUP)
        #expect(await results.next() == .unchanged)
        bound.cancel()
        watching.cancel()
        await watching.value
        await harness.stop()
    }

    @Test(
        "under load: add, remove, rotate, break and fix while jobs flow — every job ends once, nothing launched after a removal reaches the provider, nothing launched after a rotation is signed with the old key"
    )
    func changesUnderLoad() async throws {
        let tablet = "com.example.tablet"
        let first = try LiveConfigurationHarness.key("KEYFIRST00"), second = try LiveConfigurationHarness.key("KEYSECOND0")
        let harness = try await LiveConfigurationHarness(sandboxKeys: [first, second], bundleIds: [Self.chat, Self.phone, tablet]) {
            scratch in
            try LiveConfigurationHarness.write(first, to: scratch.url.appendingPathComponent("first.p8").path)
            try LiveConfigurationHarness.write(second, to: scratch.url.appendingPathComponent("second.p8").path)
            let apps = scratch.url.appendingPathComponent("apps.json").path
            try LiveConfigurationHarness.appsFile([
                LiveConfigurationHarness.app(Self.chat, key: first, file: scratch.url.appendingPathComponent("first.p8").path),
                LiveConfigurationHarness.app(Self.phone, key: first, file: scratch.url.appendingPathComponent("first.p8").path),
            ]).write(toFile: apps, atomically: true, encoding: .utf8)
            return ["PUSH_APPS_FILE": apps]
        }
        let directory = harness.scratch.url
        let firstFile = directory.appendingPathComponent("first.p8").path, secondFile = directory.appendingPathComponent("second.p8").path
        func publish(_ entries: [String]) throws {
            try LiveConfigurationHarness.appsFile(entries).write(
                toFile: directory.appendingPathComponent("apps.json").path, atomically: true, encoding: .utf8)
        }
        let apps = [Self.chat, Self.phone, tablet]
        /// One phase: `perApp` jobs per app in flight while `change` runs; the outcomes by app and device token.
        func phase(_ number: Int, perApp: Int = 30, change: () throws -> LiveConfiguration.Reload) async throws
            -> (reload: LiveConfiguration.Reload, outcomes: [(app: String, token: String, outcome: Outcome)])
        {
            try await withThrowingTaskGroup(of: (String, String, Outcome).self) { group in
                for index in 0..<perApp {
                    for (appIndex, app) in apps.enumerated() {
                        let token = String(format: "00%02x%02x%04x", number, appIndex, index) + String(repeating: "0", count: 54)
                        group.addTask { (app, token, try await harness.send(to: app, token: token)) }
                    }
                }
                let reload = try change()
                var outcomes: [(app: String, token: String, outcome: Outcome)] = []
                for try await (app, token, outcome) in group { outcomes.append((app, token, outcome)) }
                return (reload, outcomes)
            }
        }
        /// Jobs launched after a change took effect: one for each app, in order.
        func after(_ number: Int) async throws -> [String: (token: String, outcome: Outcome)] {
            var sent: [String: (token: String, outcome: Outcome)] = [:]
            for (appIndex, app) in apps.enumerated() {
                let token = String(format: "00%02x%02xffff", number, appIndex) + String(repeating: "0", count: 54)
                sent[app] = (token, try await harness.send(to: app, token: token))
            }
            return sent
        }
        var launched = 0, ended = 0
        func count(_ result: (reload: LiveConfiguration.Reload, outcomes: [(app: String, token: String, outcome: Outcome)])) {
            launched += 30 * apps.count
            ended += result.outcomes.count
        }

        // 1. Add the tablet app.
        let added = try await phase(1) {
            try publish([
                LiveConfigurationHarness.app(Self.chat, key: first, file: firstFile),
                LiveConfigurationHarness.app(Self.phone, key: first, file: firstFile),
                LiveConfigurationHarness.app(tablet, key: first, file: firstFile),
            ])
            return harness.live.check()
        }
        count(added)
        #expect(added.reload == .applied([.apns]))
        #expect(try await after(1)[tablet]?.outcome.status == .delivered)

        // 2. Remove the phone app.
        let removed = try await phase(2) {
            try publish([
                LiveConfigurationHarness.app(Self.chat, key: first, file: firstFile),
                LiveConfigurationHarness.app(tablet, key: first, file: firstFile),
            ])
            return harness.live.check()
        }
        count(removed)
        #expect(removed.reload == .applied([.apns]))
        let afterRemoval = try await after(2)
        #expect(afterRemoval[Self.phone]?.outcome.reason == "no APNs credentials for app \(Self.phone)")

        // 3. Rotate the chat app to the second key.
        let rotated = try await phase(3) {
            try publish([
                LiveConfigurationHarness.app(Self.chat, key: second, file: secondFile),
                LiveConfigurationHarness.app(tablet, key: first, file: firstFile),
            ])
            return harness.live.check()
        }
        count(rotated)
        #expect(rotated.reload == .applied([.apns]))
        let afterRotation = try await after(3)
        #expect(afterRotation[Self.chat]?.outcome.status == .delivered)

        // 4. A broken file: refused, the last good version goes on serving.
        let broken = try await phase(4) {
            try #"{"apns": [ "#.write(toFile: directory.appendingPathComponent("apps.json").path, atomically: true, encoding: .utf8)
            return harness.live.check()
        }
        count(broken)
        guard case .refused = broken.reload else {
            Issue.record("the broken file was applied: \(broken.reload)")
            return
        }
        let whileBroken = try await after(4)
        #expect(whileBroken[Self.chat]?.outcome.status == .delivered)
        #expect(whileBroken[tablet]?.outcome.status == .delivered)

        // 5. Fixed: the phone app comes back.
        let fixed = try await phase(5) {
            try publish([
                LiveConfigurationHarness.app(Self.chat, key: second, file: secondFile),
                LiveConfigurationHarness.app(tablet, key: first, file: firstFile),
                LiveConfigurationHarness.app(Self.phone, key: first, file: firstFile),
            ])
            return harness.live.check()
        }
        count(fixed)
        #expect(fixed.reload == .applied([.apns]))
        #expect(try await after(5)[Self.phone]?.outcome.status == .delivered)

        #expect(ended == launched, "every job ends with one outcome")
        for result in [added, removed, rotated, broken, fixed] {
            for (app, _, outcome) in result.outcomes {
                #expect(
                    outcome.status == .delivered || (outcome.status == .failed && outcome.reason == "no APNs credentials for app \(app)"),
                    "\(app): \(outcome.status) \(outcome.reason ?? "")")
            }
        }
        let keyIds = harness.keyIdsByToken
        for (number, sent) in [(2, afterRemoval), (3, afterRotation), (4, whileBroken)] {
            #expect(keyIds[sent[Self.phone]!.token] == nil, "phase \(number): a job for the removed app reached the provider")
            #expect(keyIds[sent[Self.chat]!.token] == (number >= 3 ? ["KEYSECOND0"] : ["KEYFIRST00"]), "phase \(number)")
        }
        await harness.stop()
    }

    @Test("check-config judges a candidate apps file with the problems a reload would refuse it for")
    func checkConfigJudgesACandidate() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let candidate = scratch.url.appendingPathComponent("new.json").path
        let missing = scratch.url.appendingPathComponent("missing.p8").path
        try LiveConfigurationHarness.appsFile([
            #"{"bundleId":"\#(Self.phone)","keyFile":"\#(missing)","keyId":"KEY1111111","teamId":"TEAM123456"}"#
        ])
        .write(toFile: candidate, atomically: true, encoding: .utf8)
        let problems = await ConfigurationCheck.run(environment: ["PUSH_KAFKA_BROKERS": "127.0.0.1:1", "PUSH_APPS_FILE": candidate])
            .failures.map(\.detail)
        #expect(
            problems.contains("PUSH_APPS_FILE apns[0] (\(Self.phone)): key file \(missing) does not exist or is not readable"),
            "\(problems)")
    }
}
