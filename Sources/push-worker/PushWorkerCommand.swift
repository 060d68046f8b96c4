import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import PushKafka
import PushCrypto
import PushSandbox
import PushWorker
import Synchronization

@main
struct PushWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-worker",
        abstract: "Delivers push-notification jobs from Kafka through APNs, FCM, Web Push and push-proxy plugins.",
        subcommands: [Run.self, DemoCommand.self, BenchCommand.self, VAPIDKeys.self, KafkaMock.self, Sandbox.self])
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
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let worker = try Worker(configuration: configuration, logger: logger)
        let operations = try await OperationsServer.start(
            port: configuration.httpPort, registry: registry,
            liveness: { worker.pipeline.isAlive ? (true, "alive") : (false, "the consumer thread has not polled for 30 s") },
            readiness: { let state = worker.pipeline.readiness; return (state.ready, state.reason) })
        logger.info("operations endpoint listening", metadata: ["port": "\(operations.port)"])
        let signals = StopSignals { worker.pipeline.stop() }
        logger.info("push-worker started", metadata: [
            "brokers": "\(configuration.brokers)", "group": "\(configuration.groupId)",
            "topic": "\(configuration.pipeline.jobsTopic)",
            "providers": "\(configuration.enabledProviders.map(\.rawValue).sorted().joined(separator: ","))",
        ])
        try await worker.run()
        await operations.stop()
        withExtendedLifetime(signals) {}
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
        let rows = try await Demo.run(logger: Logger(label: "push-worker-demo"))
        print(Demo.table(rows))
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

    func run() async throws {
        let cluster = try MockKafkaCluster(brokers: brokers)
        for spec in topic {
            let parts = spec.split(separator: ":")
            try cluster.createTopic(String(parts[0]), partitions: parts.count > 1 ? Int(parts[1]) ?? 1 : 1)
        }
        if let bootstrapFile { try cluster.bootstrapServers.write(toFile: bootstrapFile, atomically: true, encoding: .utf8) }
        FileHandle.standardOutput.write(Data((cluster.bootstrapServers + "\n").utf8))
        let (stopped, continuation) = AsyncStream<Void>.makeStream()
        let signals = StopSignals { continuation.finish() }
        for await _ in stopped {}
        withExtendedLifetime((cluster, signals)) {}
    }
}

struct Sandbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run push-proxy, APNs, FCM and Web Push sandboxes (HTTP/2 over TLS on loopback, throwaway CA) for local runs and tests.",
        discussion: """
            Writes into --state-dir: ca.pem, client.pem and client-key.pem (mutual TLS), url (the push-proxy endpoint), \
            apns-port and AuthKey_\(APNsSandboxInstance.keyId).p8 (the APNs signing key; key id \(APNsSandboxInstance.keyId), \
            team \(APNsSandboxInstance.teamId), bundle id \(APNsSandboxInstance.bundleId)), fcm-url and \
            service-account.json (project \(FCMSandboxInstance.projectId); its token_uri points at the sandbox), \
            webpush-subscription.json (a subscription {endpoint, keys: {p256dh, auth}} the push-service sandbox holds the key of).
            """)

    @Option(help: "Directory for the CA, client certificate and the endpoint URL.")
    var stateDir: String

    @Option(help: "Port to listen on (0 = any free port).")
    var port = 0

    @Flag(help: "Demand a client certificate issued by the sandbox CA.")
    var requireClientCertificate = false

    func run() async throws {
        let tls = try SandboxTLS.make()
        let server = try await SandboxServer.start(tls: tls, requireClientCertificate: requireClientCertificate, port: port,
                                                   responder: ProxySandbox.respond)
        let apns = try await APNsSandboxInstance.start(tls: tls)
        let fcm = try await FCMSandboxInstance.start(tls: tls)
        let webPush = try await WebPushSandboxInstance.start(tls: tls)
        let subscription = try webPush.sandbox.subscribe(id: "sandbox-subscription")
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        try #"{"endpoint":"\#(subscription.endpoint)","keys":{"p256dh":"\#(subscription.p256dh)","auth":"\#(subscription.auth)"}}"#
            .write(toFile: stateDir + "/webpush-subscription.json", atomically: true, encoding: .utf8)
        try String(apns.server.port).write(toFile: stateDir + "/apns-port", atomically: true, encoding: .utf8)
        try fcm.server.baseURL.write(toFile: stateDir + "/fcm-url", atomically: true, encoding: .utf8)
        for (name, source) in [("ca.pem", tls.caFile), ("client.pem", tls.clientCertificateFile), ("client-key.pem", tls.clientKeyFile),
                               ("AuthKey_\(APNsSandboxInstance.keyId).p8", apns.keyFile), ("service-account.json", fcm.credentialsFile)] {
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
        await webPush.server.stop()
        tls.remove()
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
