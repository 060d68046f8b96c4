import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import PushKafka
import PushKafkaMock
import PushDevelopmentTools
import PushCrypto
import PushSandbox
import PushCore
import PushWorker
import WebPushPlugin
import Synchronization
import APNsSandbox
import HMSSandbox
import PushPlugins
import FCMSandbox
import WebPushSandbox
import ProxySandbox

@main
struct PushWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-worker",
        abstract: "Delivers push-notification jobs from Kafka through APNs, FCM, Web Push and push-proxy plugins.",
        subcommands: [Run.self, DemoCommand.self, BenchCommand.self, Send.self, CheckConfig.self, VAPIDKeys.self, ImportTemplates.self,
                      KafkaMock.self, Sandbox.self])
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the production worker (configured by PUSH_* environment variables).",
        discussion: "Environment variables:\n" + ConfigurationReference.render(markdown: false))

    @Flag(help: "Print the configuration reference as a Markdown table and exit.")
    var markdownReference = false

    func run() async throws {
        if markdownReference {
            print(ConfigurationReference.render(markdown: true))
            return
        }
        let configuration: WorkerConfiguration
        switch WorkerConfiguration.load(from: ProcessInfo.processInfo.environment) {
        case .success(let loaded): configuration = loaded
        case .failure(let errors):
            for problem in errors.problems { FileHandle.standardError.write(Data("configuration: \(problem)\n".utf8)) }
            throw ExitCode(2)
        }
        LogSetup.bootstrap(format: configuration.logFormat, level: configuration.logLevel)
        let logger = Logger(label: "push-worker")
        for name in configuration.unknownVariables {
            logger.warning("unknown PUSH_ variable ignored (a typo?)", metadata: ["variable": "\(name)"])
        }
        for setting in configuration.allowedUnsafeKafkaSettings {
            logger.warning("unsafe librdkafka setting allowed by PUSH_RDKAFKA_ALLOW_UNSAFE", metadata: ["setting": "\(setting)"])
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let worker = try Worker(configuration: configuration, logger: logger)
        let endpoint = configuration.operations
        let operations: OperationsServer
        do {
            operations = try await OperationsServer.start(
                endpoint, registry: registry,
                liveness: { worker.pipeline.isAlive ? (true, "alive") : (false, "the consumer thread has not polled for 30 s") },
                readiness: { let state = worker.pipeline.readiness; return (state.ready, state.reason) })
        } catch {
            FileHandle.standardError.write(Data("configuration: cannot listen on PUSH_HTTP_BIND \(endpoint.bindAddress), PUSH_HTTP_PORT \(endpoint.port): \(error)\n".utf8))
            throw ExitCode(2)
        }
        logger.info("operations endpoint listening", metadata: [
            "address": "\(endpoint.bindAddress)", "port": "\(operations.port)",
        ])
        let signals = StopSignals { worker.pipeline.stop() }
        let hangUp = ReloadSignal { _ = worker.reloadConfiguration() }
        logger.info("push-worker started", metadata: [
            "brokers": "\(configuration.brokers)", "group": "\(configuration.groupId)",
            "topic": "\(configuration.pipeline.jobsTopic)",
            "providers": "\(configuration.enabledProviders.map(\.rawValue).sorted().joined(separator: ","))",
        ])
        try await worker.run()
        await operations.stop()
        withExtendedLifetime((signals, hangUp)) {}
        logger.info("push-worker stopped")
    }
}

/// SIGTERM/SIGINT: the first asks for a graceful stop, a second exits at once.
final class StopSignals {
    private let sources: [any DispatchSourceSignal]

    init(onFirst stop: @escaping @Sendable () -> Void) {
        let received = ManagedCounter()
        sources = [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if received.increment() == 1 { stop() } else { exit(130) }
            }
            source.resume()
            return source
        }
    }
}

final class ManagedCounter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() -> Int { count.add(1, ordering: .relaxed).newValue }
}

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the whole pipeline on embedded parts (Kafka mock cluster, HTTPS push-proxy sandbox) and print the outcomes.")

    @Flag(help: "Show the worker's log lines.")
    var verbose = false

    func run() async throws {
        LogSetup.bootstrap(format: .text, level: verbose ? .info : .error)
        print(Demo.text(try await Demo.run(logger: Logger(label: "push-worker-demo"))))
    }
}

struct KafkaMock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kafka-mock",
        abstract: "Run librdkafka's mock Kafka cluster on loopback (for local runs and tests; not a real broker).")

    @Option(help: "Topics to create, as name:partitions.")
    var topic: [String] = ["push.jobs:4", "push.outcomes:4", "push.dlq:1"]

    @Option(help: "Number of brokers.")
    var brokers = 1

    @Option(help: "Also write the bootstrap servers to this file.")
    var bootstrapFile: String?

    @Option(help: """
        Create a FIFO at this path and read fault-injection commands from it, one per line: \
        broker-down <id|all>, broker-up <id|all>, produce-errors <n>, request-errors <apiKey> <n> <errorCode>, \
        rtt <id|all> <ms>. Each command is acknowledged on standard output ("control: ok <command>").
        """)
    var control: String?

    func run() async throws {
        let cluster = try MockKafkaCluster(brokers: brokers)
        for spec in topic {
            let parts = spec.split(separator: ":")
            try cluster.createTopic(String(parts[0]), partitions: parts.count > 1 ? Int(parts[1]) ?? 1 : 1)
        }
        if let control { try Self.serveControl(at: control, cluster: cluster) }
        if let bootstrapFile { try cluster.bootstrapServers.write(toFile: bootstrapFile, atomically: true, encoding: .utf8) }
        FileHandle.standardOutput.write(Data((cluster.bootstrapServers + "\n").utf8))
        let (stopped, continuation) = AsyncStream<Void>.makeStream()
        let signals = StopSignals { continuation.finish() }
        for await _ in stopped {}
        withExtendedLifetime((cluster, signals)) {}
        if let control { unlink(control) }
    }

    /// Reads commands from a FIFO on a thread of its own. The FIFO is opened read-write so
    /// that writers coming and going never make it reach end-of-file.
    static func serveControl(at path: String, cluster: MockKafkaCluster) throws {
        unlink(path)
        guard mkfifo(path, 0o600) == 0 else { throw ValidationError("cannot create the control FIFO \(path)") }
        let descriptor = open(path, O_RDWR)
        guard descriptor >= 0 else { throw ValidationError("cannot open the control FIFO \(path)") }
        NamedThread.start("kafka-mock-ctl") {
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return }
                pending.append(contentsOf: buffer[..<count])
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self).trimmingCharacters(in: .whitespaces)
                    pending.removeSubrange(...newline)
                    guard !line.isEmpty else { continue }
                    let answer: String
                    do {
                        try MockKafkaControl.parse(line).apply(to: cluster)
                        answer = "control: ok \(line)\n"
                    } catch {
                        answer = "control: error \(error)\n"
                    }
                    FileHandle.standardOutput.write(Data(answer.utf8))
                }
            }
        }
    }
}

struct Sandbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run push-proxy, APNs, FCM, Web Push and Huawei Push Kit sandboxes (HTTP/2 over TLS on loopback, throwaway CA) for local runs and tests.",
        discussion: """
            Writes into --state-dir: ca.pem, client.pem and client-key.pem (mutual TLS), url (the push-proxy endpoint), \
            apns-port and AuthKey_\(APNsSandboxInstance.keyId).p8 (the APNs signing key; key id \(APNsSandboxInstance.keyId), \
            team \(APNsSandboxInstance.teamId), bundle id \(APNsSandboxInstance.bundleId)), fcm-url and \
            service-account.json (project \(FCMSandboxInstance.projectId); its token_uri points at the sandbox), \
            webpush-subscription.json (a subscription {endpoint, keys: {p256dh, auth}} the push-service sandbox holds the key of; \
            <endpoint>/<anything> is another endpoint with the same keys), webpush-url (the push service's origin), \
            hms-url and hms-client-secret (Huawei app \(HMSSandboxInstance.appId); the token endpoint is <hms-url>\(HMSSandbox.tokenPath)).
            """)

    @Option(help: "Directory for the CA, client certificate and the endpoint URL.")
    var stateDir: String

    @Option(help: "Port to listen on (0 = any free port).")
    var port = 0

    @Flag(help: "Demand a client certificate issued by the sandbox CA.")
    var requireClientCertificate = false

    @Option(help: "Push proxy faults: share of requests answered --fail-status instead of 200.")
    var failShare = 0.0

    @Option(help: "Push proxy faults: the status of a failed request.")
    var failStatus = 503

    @Option(help: "Push proxy faults: Retry-After seconds on failed requests (-1 = none).")
    var retryAfter = 1

    @Option(help: "Push proxy faults: share of requests whose TCP connection is closed instead of answered.")
    var resetShare = 0.0

    @Option(help: "Push proxy faults: every n-th request closes its connection with GOAWAY after the answer (0 = never).")
    var goawayEvery = 0

    @Option(help: "Push proxy faults: share of requests answered only after --stall-ms.")
    var stallShare = 0.0

    @Option(help: "Push proxy faults: how long a stalled request waits.")
    var stallMs = 5000

    @Option(help: "Push proxy faults: at most this many faults per endpointId.")
    var maxFaultsPerTarget = 2

    @Option(help: "Push proxy faults: endpointIds starting with this are answered only after --slow-ms, every time (one slow user).")
    var slowPrefix: String?

    @Option(help: "Push proxy faults: how long a slow endpoint's answer waits.")
    var slowMs = 2000

    @Option(help: "Push proxy faults: while a file exists at this path, every request is answered --fail-status (an outage).")
    var outageFile: String?

    @Option(help: "Push proxy: append one line per answer (<ms> <endpointId> <status|reset|stall:…|goaway:…>) to this file.")
    var recordFile: String?

    @Flag(help: """
        Hostile endpoints in the APNs, Web Push and push-proxy sandboxes, chosen per target by a marker:         hostile/<behaviour> in a Web Push endpoint path or a proxy endpointId, or an APNs token starting         "\(HostileAnswers.apnsTokenPrefix)" + the behaviour's code (\(HostileAnswers.Behaviour.allCases.map { "\($0.rawValue) \($0.apnsCode)" }.joined(separator: ", "))).         Stalls and resets count against --max-faults-per-target. With --record-file, all three sandboxes record their         answers (keys: proxy endpointId, APNs token, Web Push path). The Web Push sandbox is then addressed as 127.0.0.1         (webpush-url in the state directory).
        """)
    var hostile = false

    @Option(help: "Hostile endpoints: how long a stalled answer waits (longer than the worker's request timeout).")
    var hostileStallMs = 12_000

    func run() async throws {
        let tls = try SandboxTLS.make()
        // Also when a sandbox fails to start: the directory holds the sandboxes' private keys.
        defer { tls.remove() }
        var faults = SandboxFaults()
        faults.failShare = failShare
        faults.failStatus = failStatus
        faults.retryAfterSeconds = retryAfter < 0 ? nil : retryAfter
        faults.resetShare = resetShare
        faults.goAwayEvery = goawayEvery
        faults.stallShare = stallShare
        faults.stallMilliseconds = stallMs
        faults.maximumFaultsPerTarget = maxFaultsPerTarget
        faults.slowTargetPrefix = slowPrefix
        faults.slowMilliseconds = slowMs
        faults.outageFile = outageFile
        let record = try recordFile.map(AnswerRecord.init(path:))
        // Hostile mode records every sandbox's answers itself (hostile or not); otherwise the proxy's injector does.
        let injector = FaultInjector(faults, record: hostile ? nil : record)
        var responder: SandboxServer.Responder = faults.isEmpty && recordFile == nil
            ? ProxySandbox.respond : injector.wrap(ProxySandbox.respond, key: ProxySandbox.endpointId)
        var wrapAPNs: @Sendable (@escaping SandboxServer.Responder) -> SandboxServer.Responder = { $0 }
        var wrapWebPush = wrapAPNs
        let connectionClosed = record?.connectionClosed
        if hostile {
            var settings = HostileAnswers.Settings()
            settings.stallMilliseconds = hostileStallMs
            settings.maximumPerTarget = maxFaultsPerTarget
            let answers = HostileAnswers(settings, record: record)
            responder = answers.wrap(responder, key: ProxySandbox.endpointId, marker: HostileAnswers.behaviour(markedIn:))
            wrapAPNs = { answers.wrap($0, key: APNsSandbox.deviceToken, marker: HostileAnswers.behaviour(apnsToken:)) }
            wrapWebPush = { answers.wrap($0, key: { $0.path }, marker: HostileAnswers.behaviour(markedIn:)) }
        }
        let server = try await SandboxServer.start(tls: tls, requireClientCertificate: requireClientCertificate, port: port,
                                                   connectionClosed: connectionClosed, responder: responder)
        let apns = try await APNsSandboxInstance.start(tls: tls, connectionClosed: connectionClosed, wrap: wrapAPNs)
        let fcm = try await FCMSandboxInstance.start(tls: tls)
        let hms = try await HMSSandboxInstance.start(tls: tls)
        let webPush = try await WebPushSandboxInstance.start(tls: tls, host: hostile ? "127.0.0.1" : "localhost",
                                                             connectionClosed: connectionClosed, wrap: wrapWebPush)
        let subscription = try webPush.sandbox.subscribe(id: "sandbox-subscription")
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        try #"{"endpoint":"\#(subscription.endpoint)","keys":{"p256dh":"\#(subscription.p256dh)","auth":"\#(subscription.auth)"}}"#
            .write(toFile: stateDir + "/webpush-subscription.json", atomically: true, encoding: .utf8)
        try String(apns.server.port).write(toFile: stateDir + "/apns-port", atomically: true, encoding: .utf8)
        try subscription.endpoint.replacingOccurrences(of: "/push/sandbox-subscription", with: "")
            .write(toFile: stateDir + "/webpush-url", atomically: true, encoding: .utf8)
        try fcm.server.baseURL.write(toFile: stateDir + "/fcm-url", atomically: true, encoding: .utf8)
        try hms.server.baseURL.write(toFile: stateDir + "/hms-url", atomically: true, encoding: .utf8)
        for (name, source) in [("ca.pem", tls.caFile), ("client.pem", tls.clientCertificateFile), ("client-key.pem", tls.clientKeyFile),
                               ("AuthKey_\(APNsSandboxInstance.keyId).p8", apns.keyFile), ("service-account.json", fcm.credentialsFile),
                               ("hms-client-secret", hms.clientSecretFile)] {
            try? FileManager.default.removeItem(atPath: stateDir + "/" + name)
            try FileManager.default.copyItem(atPath: source, toPath: stateDir + "/" + name)
        }
        let url = server.baseURL + ProxySandbox.path
        try url.write(toFile: stateDir + "/url", atomically: true, encoding: .utf8)
        FileHandle.standardOutput.write(Data((url + "\n").utf8))
        let (stopped, continuation) = AsyncStream<Void>.makeStream()
        let signals = StopSignals { continuation.finish() }
        for await _ in stopped {}
        withExtendedLifetime(signals) {}
        await server.stop()
        await apns.server.stop()
        await fcm.server.stop()
        await hms.server.stop()
        await webPush.server.stop()
    }
}

struct VAPIDKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vapid-keys",
        abstract: "Generate a VAPID key pair for Web Push, or print the public key of an existing key file.")

    @Option(help: "Print the public key of this key file (PEM or base64url) instead of generating one.")
    var keyFile: String?

    @Option(help: "Also write the new private key (PEM) to this file, readable by its owner only.")
    var output: String?

    func run() async throws {
        let key = try keyFile.map(VAPIDKeyFile.load) ?? PrivateKey.generateP256()
        if let output, !FileManager.default.createFile(atPath: output, contents: Data(try key.pem().utf8),
                                                        attributes: [.posixPermissions: 0o600]) {
            throw ValidationError("cannot write \(output)")
        }
        print(try VAPIDKeyFile.describe(key))
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send one push with the configured credentials (PUSH_* variables) to one token or endpoint, print the provider's answer and the outcome.",
        discussion: """
            Like the Mizu gateway's sendpush: checks credentials and tokens without Kafka. Give the binding as native fields \
            (--provider with --token or --endpoint/--p256dh/--auth) or as a SIP binding string (--rfc8599 or --xmpush). \
            Exits 0 when the provider accepted the push, 1 otherwise, 2 for configuration or argument problems.
            """)

    @Option(help: ArgumentHelp("One of \(LinkedPlugins.all.map(\.id.rawValue).joined(separator: ", ")) (with native fields).")) var provider: String?
    @Option(help: "The target's app: APNs bundle id, FCM project id, HMS app id, proxy app.") var app: String?
    @Option(help: "Device token (APNs hex, FCM registration token, HMS push token, proxy token).") var token: String?
    @Option(help: "APNs environment: production or sandbox.") var environment: String?
    @Option(help: "APNs push type (voip, alert, …) or proxy push type.") var pushType: String?
    @Option(help: "FCM/proxy platform: android, ios, web.") var platform: String?
    @Option(help: "Proxy token type: fcm, apns, apnsVoip, cookie.") var tokenType: String?
    @Option(help: "Web Push subscription endpoint.") var endpoint: String?
    @Option(help: "Web Push subscription key p256dh.") var p256dh: String?
    @Option(help: "Web Push subscription key auth.") var auth: String?
    @Option(help: "RFC 8599 binding, e.g. 'pn-provider=apns;pn-param=TEAMID.com.example.app.voip;pn-prid=<token>'.") var rfc8599: String?
    @Option(help: "X-MPUSH binding, e.g. 's:i:com.example.app:<token>'.") var xmpush: String?
    @Option(help: "Job kind: call, message, cancel, custom or wake.") var kind = "message"
    @Option(help: "Notification title.") var title: String?
    @Option(help: "Notification body.") var body: String?
    @Option(name: [.customLong("caller"), .customLong("from")],
            help: "Caller or sender (data.caller, the FROM template keyword; FCM reserves data.from).") var caller: String?
    @Option(help: "Call id (data.callId).") var callId: String?
    @Option(help: "TTL in seconds.") var ttl: Int64 = 60

    func run() async throws {
        guard let jobKind = JobKind(rawValue: kind) else {
            throw ValidationError("--kind must be one of \(JobKind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let fields: [(String, String?)] = [
            ("provider", provider), ("app", app), ("token", token), ("environment", environment), ("pushType", pushType),
            ("platform", platform), ("tokenType", tokenType), ("endpoint", endpoint), ("rfc8599", rfc8599), ("xmpush", xmpush),
        ]
        var objects: [(name: String, members: [(name: String, value: String)])] = []
        if p256dh != nil || auth != nil {
            guard let p256dh, let auth else { throw ValidationError("--p256dh and --auth go together") }
            objects.append(("keys", [("p256dh", p256dh), ("auth", auth)]))
        }
        var data: [String: String] = [:]
        data["caller"] = caller
        data["callId"] = callId
        let options = OperatorSend.Options(target: fields.compactMap { name, value in value.map { (name, $0) } }, objects: objects,
                                           kind: jobKind, title: title, body: body, data: data, ttlSeconds: ttl)
        LogSetup.bootstrap(format: .text, level: .error)
        let report: OperatorSend.Report
        do {
            report = try await OperatorSend.run(environment: ProcessInfo.processInfo.environment, options: options,
                                                logger: Logger(label: "push-worker-send"))
        } catch {
            for problem in error.problems { FileHandle.standardError.write(Data("\(problem)\n".utf8)) }
            throw ExitCode(2)
        }
        print(report.lines.joined(separator: "\n"))
        if !report.delivered { throw ExitCode(1) }
    }
}

struct CheckConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate the PUSH_* environment, credential files and payload templates, and reach every configured endpoint.",
        discussion: "Prints one line per problem and exits 1 when there is any (0 and \"configuration OK\" otherwise). " +
            "Endpoints: Kafka brokers and Redis by TCP connect; APNs, FCM (API and token endpoint) and the push proxy by TLS + HTTP.")

    @Option(help: "Seconds to wait for each endpoint.") var timeout = 3

    func run() async throws {
        let problems = await ConfigurationCheck.run(environment: ProcessInfo.processInfo.environment, timeout: .seconds(timeout))
        guard problems.isEmpty else {
            for problem in problems { print("problem: \(problem)") }
            throw ExitCode(1)
        }
        print("configuration OK")
    }
}

struct ImportTemplates: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-templates",
        abstract: "Turn Mizu's fcmmessage.txt and pushkitmessage.txt into a PUSH_TEMPLATES_DIR and print what changed.",
        discussion: "Bare keywords become {{KEYWORD}}, the text after --EOF-- is cut, a relative apns-expiration becomes "
            + "APNSEXPIRATION. The result is checked as run checks PUSH_TEMPLATES_DIR; exits 1 when it does not load.")

    @Argument(help: "The folder holding fcmmessage.txt and/or pushkitmessage.txt.") var source: String
    @Option(help: "The templates directory to write (apns/default/default.mustache, fcm/default/default.mustache).") var output: String

    func run() throws {
        let report = TemplateImport.run(from: source, to: output)
        print(report.lines.joined(separator: "\n"))
        if !report.succeeded { throw ExitCode(1) }
    }
}
