import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import PushBuildInfo
import PushCore
import PushCrypto
import PushPlugins
import PushWorker
import ServiceLifecycle
import WebPushPlugin

@main
struct PushWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-worker",
        abstract: "Delivers push-notification jobs from Kafka through APNs, FCM, Web Push and push-proxy plugins.",
        discussion: "The development tools (demo, bench, sandbox, kafka-mock) are the push-worker-dev executable's.",
        version: "push-worker \(BuildInfo.description)",
        subcommands: [Run.self, Send.self, CheckConfig.self, VAPIDKeys.self, ImportTemplates.self])
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
        LogSetup.bootstrap(
            format: configuration.logFormat, level: configuration.logLevel,
            metadataProvider: configuration.exportsTraces ? TraceExport.logMetadataProvider : nil)
        let logger = Logger(label: "push-worker")
        for name in configuration.unknownVariables {
            logger.warning("unknown PUSH_ variable ignored (a typo?)", metadata: ["variable": "\(name)"])
        }
        for line in configuration.removedVariables { logger.warning("removed PUSH_ variable ignored", metadata: ["why": "\(line)"]) }
        for setting in configuration.allowedUnsafeKafkaSettings {
            logger.warning("unsafe librdkafka setting allowed by PUSH_RDKAFKA_ALLOW_UNSAFE", metadata: ["setting": "\(setting)"])
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        BuildInfo.recordGauge()
        let worker = try Worker(configuration: configuration, logger: logger)
        let endpoint = configuration.operations
        let operations: OperationsServer
        do {
            operations = try await OperationsServer.start(
                endpoint, registry: registry,
                liveness: { worker.pipeline.isAlive ? (true, "alive") : (false, "the consumer thread has not polled for 30 s") },
                readiness: {
                    let state = worker.pipeline.readiness
                    return (state.ready, state.reason)
                })
        } catch {
            FileHandle.standardError.write(
                Data(
                    "configuration: cannot listen on PUSH_HTTP_BIND \(endpoint.bindAddress), PUSH_HTTP_PORT \(endpoint.port): \(error)\n"
                        .utf8))
            throw ExitCode(2)
        }
        logger.info(
            "operations endpoint listening",
            metadata: [
                "address": "\(endpoint.bindAddress)", "port": "\(operations.port)",
            ])
        let group = worker.serviceGroup(
            services: worker.services(operations: operations, logOutput: .standardError, reloadsOnHangUp: true),
            signals: ShutdownSignals.signals)
        let signals = await ShutdownSignals.watch(group)
        logger.info(
            "push-worker started",
            metadata: [
                "version": "\(BuildInfo.version)", "revision": "\(BuildInfo.revision)",
                "brokers": "\(configuration.brokers)", "group": "\(configuration.groupId)",
                "topic": "\(configuration.pipeline.jobsTopic)",
                "providers": "\(configuration.enabledProviders.map(\.rawValue).sorted().joined(separator: ","))",
            ])
        try await group.run()
        signals.cancel()
        logger.info("push-worker stopped")
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
        if let output,
            !FileManager.default.createFile(
                atPath: output, contents: Data(try key.pem().utf8),
                attributes: [.posixPermissions: 0o600])
        {
            throw ValidationError("cannot write \(output)")
        }
        print(try VAPIDKeyFile.describe(key))
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Send one push with the configured credentials (PUSH_* variables) to one token or endpoint, print the provider's answer and the outcome.",
        discussion: """
            Like the Mizu gateway's sendpush: checks credentials and tokens without Kafka. Give the binding as native fields \
            (--provider with --token or --endpoint/--p256dh/--auth) or as a SIP binding string (--rfc8599 or --xmpush). \
            Exits 0 when the provider accepted the push, 1 otherwise, 2 for configuration or argument problems.
            """)

    @Option(help: ArgumentHelp("One of \(LinkedPlugins.all.map(\.id.rawValue).joined(separator: ", ")) (with native fields)."))
    var provider: String?
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
    @Option(
        name: [.customLong("caller"), .customLong("from")],
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
        let options = OperatorSend.Options(
            target: fields.compactMap { name, value in value.map { (name, $0) } }, objects: objects,
            kind: jobKind, title: title, body: body, data: data, ttlSeconds: ttl)
        LogSetup.bootstrap(format: .text, level: .error)
        let report: OperatorSend.Report
        do {
            report = try await OperatorSend.run(
                environment: ProcessInfo.processInfo.environment, options: options,
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
        abstract: "Check the PUSH_* environment as run would, then Kafka, Redis and each provider's credentials.",
        discussion: """
            Prints one line per check, "ok   <check>: <detail>" or "FAIL <check>: <detail>" (no secret is printed), and \
            exits 0 when every check passed, 1 when one failed, 2 when the configuration does not load (as run). \
            Kafka: cluster metadata through the PUSH_RDKAFKA_* settings (SASL, TLS), each topic with its partitions, the \
            committed offsets of the group and of <group>.urgent. Redis: AUTH, PING, a server version of at least 7.0. \
            Providers: FCM and HMS mint an access token, APNs signs its provider token or loads its certificate, Web Push \
            loads its VAPID keys, the push proxy loads its client certificate; --probe-providers also sends each provider \
            one request that shows it accepts the credential (APNs: a push to a made-up device token).
            """)

    @Option(help: "Seconds each request may take (a group of checks fails after twice this).") var timeout = 5
    @Flag(help: "Also send each provider one request with the configured credentials (no device receives it).")
    var probeProviders = false
    @Flag(help: "Print one JSON object per check and line: {\"check\":…,\"ok\":…,\"detail\":…}.") var json = false

    func run() async throws {
        LogSetup.bootstrap(format: .text, level: .critical)
        let report = await ConfigurationCheck.run(
            environment: ProcessInfo.processInfo.environment,
            options: .init(timeout: .seconds(max(1, timeout)), probesProviders: probeProviders))
        print((json ? report.jsonLines : report.lines).joined(separator: "\n"))
        if report.exitStatus != 0 { throw ExitCode(report.exitStatus) }
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
