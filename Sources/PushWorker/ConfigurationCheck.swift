import Foundation
import Logging
import PushCore
import PushHTTP
import PushPluginAPI

/// `push-worker check-config`: meets what `run` meets. Everything start-up would refuse (environment, credential files,
/// payload templates), then, through the same clients and settings the worker uses:
/// - Kafka (`ConfigurationCheck+Kafka.swift`): the cluster's metadata through the configured security settings, each
///   of the four topics with its partitions, the committed offsets of the group and of the urgent lane's group;
/// - Redis (`ConfigurationCheck+Redis.swift`): `AUTH` as the URL gives it, `PING`, a server version of at least 7.0;
/// - each provider plugin's credentials (`ConfiguredPlugin.checkCredentials`), and with `probesProviders` one request
///   to each provider that shows it accepts them.
///
/// One `CheckResult` per check, in a stable order whatever order they finish in; the groups run concurrently, each
/// within its deadline.
public enum ConfigurationCheck {
    public struct Options: Sendable {
        /// The longest one request may take; a group of checks that has not finished after twice this fails.
        public var timeout: Duration
        /// Send each provider one request with the configured credentials (`--probe-providers`).
        public var probesProviders: Bool

        public init(timeout: Duration = .seconds(5), probesProviders: Bool = false) {
            self.timeout = timeout
            self.probesProviders = probesProviders
        }
    }

    public struct Report: Sendable {
        public var results: [CheckResult]
        /// The configuration did not load: `run` would refuse to start (exit status 2).
        public var configurationRefused: Bool

        /// 0 when every check passed, 1 when one failed, 2 when the configuration did not load (as `run`).
        public var exitStatus: Int32 { configurationRefused ? 2 : results.allSatisfy(\.passed) ? 0 : 1 }

        /// `ok   <check>: <detail>` or `FAIL <check>: <detail>`, one line per check.
        public var lines: [String] { results.map(\.description) }

        /// `{"check":"…","ok":true,"detail":"…"}`, one object per line per check.
        public var jsonLines: [String] {
            results.map { result in
                var writer = JSONWriter()
                writer.beginObject()
                writer.member("check", result.check)
                writer.member("ok", result.passed)
                writer.member("detail", result.detail)
                writer.endObject()
                return writer.string
            }
        }

        /// The failed checks' lines.
        public var failures: [CheckResult] { results.filter { !$0.passed } }
    }

    public static func run(
        environment: [String: String], options: Options = Options(), logger: Logger = Logger(label: "push-worker-check-config")
    ) async -> Report {
        let configuration: WorkerConfiguration
        switch WorkerConfiguration.load(from: environment) {
        case .success(let loaded): configuration = loaded
        case .failure(let errors):
            return Report(results: errors.problems.map { .fail("configuration", $0) }, configurationRefused: true)
        }
        var results = startUpWarnings(configuration)
        if results.isEmpty {
            let providers = configuration.plugins.map(\.id.rawValue).sorted().joined(separator: ", ")
            results.append(
                .ok(
                    "configuration",
                    "PUSH_* variables, credential files and templates load (providers: \(providers.isEmpty ? "none" : providers))"))
        }
        if let proxy = configuration.egressProxy { results.append(egressProxyLine(proxy)) }
        results += await checkConnections(configuration, options: options, logger: logger)
        return Report(results: results, configurationRefused: false)
    }

    /// Where provider connections go: the plugins' checks below tunnel through this proxy, and a refusal of it fails them
    /// with the proxy's answer ("the egress proxy proxy.corp:3128 refused CONNECT …: 407 Proxy Authentication Required").
    static func egressProxyLine(_ proxy: EgressProxy) -> CheckResult {
        let excluded = proxy.noProxy.isEmpty ? "no host excluded" : "NO_PROXY excludes \(proxy.noProxy.summary)"
        return .ok(
            "egress proxy",
            "provider connections tunnel through \(proxy) (HTTP CONNECT\(proxy.hasCredentials ? ", Basic auth" : "")); \(excluded)")
    }

    /// What start-up only warns about and `check-config` fails: variables it does not know (typos) or no longer reads.
    static func startUpWarnings(_ configuration: WorkerConfiguration) -> [CheckResult] {
        configuration.unknownVariables.map { .fail("configuration", "\($0) is not a push-worker variable (a typo?)") }
            + configuration.removedVariables.map { .fail("configuration", $0) }
    }

    /// Kafka, Redis and each plugin, concurrently; the results in that order.
    static func checkConnections(_ configuration: WorkerConfiguration, options: Options, logger: Logger) async -> [CheckResult] {
        let transports = Worker.transports(configuration)
        defer { transports.shutdown() }
        var groups: [(name: String, run: @Sendable () async -> [CheckResult])] = [
            ("kafka", { await kafkaChecks(configuration, timeout: options.timeout, logger: logger) }),
            ("redis", { await redisChecks(configuration, timeout: options.timeout) }),
        ]
        for plugin in configuration.plugins {
            let context = CredentialCheckContext(
                transport: transports.transport(named: "check-\(plugin.id.rawValue)"), probesProvider: options.probesProviders,
                timeout: options.timeout)
            groups.append((plugin.id.rawValue, { await plugin.checkCredentials(context) }))
        }
        let deadline = options.timeout * 2
        return await withTaskGroup(of: (Int, [CheckResult]).self) { tasks in
            for (index, group) in groups.enumerated() {
                tasks.addTask { (index, await withDeadline(deadline, name: group.name, group.run)) }
            }
            var byGroup: [Int: [CheckResult]] = [:]
            for await (index, results) in tasks { byGroup[index] = results }
            return groups.indices.flatMap { byGroup[$0] ?? [] }
        }
    }

    /// `work`'s results, or one failure naming the group when they are not all in after `deadline`. The work is then
    /// cancelled, and otherwise left to finish on its own: a blocked C call cannot be cancelled.
    static func withDeadline(
        _ deadline: Duration, name: String, _ work: @escaping @Sendable () async -> [CheckResult]
    ) async -> [CheckResult] {
        await withCheckedContinuation { continuation in
            let resumed = Locked(false)
            let finish: @Sendable ([CheckResult]) -> Void = { results in
                if resumed.withLock({ resumed in
                    defer { resumed = true }
                    return !resumed
                }) {
                    continuation.resume(returning: results)
                }
            }
            let worker = Task { await work() }
            let timer = Task {
                try await Task.sleep(for: deadline)
                finish([.fail(name, "no answer within \(deadline.seconds) s")])
                worker.cancel()
            }
            Task {
                finish(await worker.value)
                timer.cancel()
            }
        }
    }
}

extension Duration {
    /// Whole seconds and a decimal part, for messages: `3`, `0.5`.
    fileprivate var seconds: String {
        let (seconds, attoseconds) = components
        let milliseconds = attoseconds / 1_000_000_000_000_000
        return milliseconds == 0 ? "\(seconds)" : String(format: "%.3g", Double(seconds) + Double(milliseconds) / 1000)
    }
}
