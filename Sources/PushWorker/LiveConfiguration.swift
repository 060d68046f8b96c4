import Foundation
import Logging
import Metrics
import PushCore
import PushPipeline
import PushPluginAPI

/// Applies a new version of `PUSH_APPS_FILE` and its credential files to the running worker, the way start-up
/// configured it (`ProviderSource`), or keeps the last good version whole.
///
/// A version is taken only if every plugin accepts it. Then each plugin whose files changed gets a new provider
/// (its own transport, `ProviderTransports`) and the set is swapped in at once (`LiveProviders`): attempts that
/// started keep the provider they read, so requests in flight finish on the old credentials, and the next attempt
/// uses the new ones. An app the new version drops is unknown to its provider, whose jobs end `failed` ("no … credentials
/// for app …"). The circuit breakers of the changed plugins' apps are forgotten (a new key starts with a closed
/// circuit), the metric `app` labels follow the new apps, and connections of identities no provider uses any more
/// are closed once idle. A refused version logs one line per problem and changes nothing.
///
/// Metrics: `push_config_reloads_total{result="success"|"failure"|"unchanged"}`, `push_config_version` (the first
/// 48 bits of the loaded version's SHA-256), `push_config_last_success_timestamp_seconds`, and `push_config_refused`
/// (1 while the files hold a version that was refused).
public final class LiveConfiguration: Sendable {
    public enum Reload: Equatable, Sendable {
        /// The files did not change since the last check.
        case unchanged
        /// The new version is in use; the providers whose configuration changed.
        case applied(Set<ProviderID>)
        /// The new version was refused, one line per problem; the last good one stays.
        case refused([String])
    }

    private struct State {
        /// The version running.
        var loaded: ConfigurationVersion
        /// The version last read, applied or not: a refused one is reported once, not at every check.
        var lastRead: ConfigurationVersion
        var plugins: [ProviderID: ConfiguredPlugin]
    }

    private let source: ProviderSource
    private let attemptTimeout: Duration
    private let providers: LiveProviders
    private let formats: [any TargetFormat]
    private let context: ProviderContext
    private let transports: ProviderTransports
    private let breakers: CircuitBreakers
    private let metrics: PipelineMetrics
    private let logger: Logger
    /// Held for a whole check: the watcher and SIGHUP take turns.
    private let state: Locked<State>

    private let succeeded = Counter(label: "push_config_reloads_total", dimensions: [("result", "success")])
    private let failed = Counter(label: "push_config_reloads_total", dimensions: [("result", "failure")])
    private let unchanged = Counter(label: "push_config_reloads_total", dimensions: [("result", "unchanged")])
    private let versionGauge = Gauge(label: "push_config_version")
    private let lastSuccessGauge = Gauge(label: "push_config_last_success_timestamp_seconds")
    private let refusedGauge = Gauge(label: "push_config_refused")

    /// - Parameters:
    ///   - plugins: the plugins start-up configured from `source`, whose providers `providers` holds.
    ///   - version: the files' content as it was before those plugins read them.
    init(
        source: ProviderSource, version: ConfigurationVersion, plugins: [ConfiguredPlugin], attemptTimeout: Duration,
        providers: LiveProviders,
        formats: [any TargetFormat], context: ProviderContext, transports: ProviderTransports, breakers: CircuitBreakers,
        metrics: PipelineMetrics, logger: Logger
    ) {
        self.source = source
        self.attemptTimeout = attemptTimeout
        self.providers = providers
        self.formats = formats
        self.context = context
        self.transports = transports
        self.breakers = breakers
        self.metrics = metrics
        self.logger = logger
        state = Locked(State(loaded: version, lastRead: version, plugins: Dictionary(plugins.map { ($0.id, $0) }) { $1 }))
        recordLoaded(version)
        refusedGauge.record(0)
    }

    /// The version running, for logs and tests: the first 12 hex digits of its SHA-256.
    var loadedVersion: String { state.withLock { $0.loaded.shortHex } }

    /// Reads the files and applies a new version. `force` (SIGHUP) tries again a version refused before, and counts
    /// a check that finds nothing new as `unchanged`.
    @discardableResult
    func check(force: Bool = false) -> Reload {
        state.withLock { state in
            let version = ConfigurationVersion.read(source)
            guard force || version != state.lastRead else { return .unchanged }
            state.lastRead = version
            guard version != state.loaded else {
                unchanged.increment()
                refusedGauge.record(0)
                return .unchanged
            }
            switch apply(version, over: &state) {
            case .success(let changed):
                state.loaded = version
                succeeded.increment()
                recordLoaded(version)
                refusedGauge.record(0)
                return .applied(changed)
            case .failure(let errors):
                failed.increment()
                refusedGauge.record(1)
                for problem in errors.problems {
                    logger.error(
                        "configuration reload refused; the last good version stays in use",
                        metadata: [
                            "problem": "\(problem)", "version": "\(version.shortHex)", "running": "\(state.loaded.shortHex)",
                        ])
                }
                return .refused(errors.problems)
            }
        }
    }

    private func apply(_ version: ConfigurationVersion, over state: inout State) -> Result<Set<ProviderID>, ConfigurationErrors> {
        let enabled: [ConfiguredPlugin]
        switch source.reconfigure(attemptTimeout: attemptTimeout) {
        case .success(let configured): enabled = configured
        case .failure(let errors): return .failure(errors)
        }
        let running = providers.current
        let enabledIDs = Set(enabled.map(\.id))
        let changed = version.changedProviders(since: state.loaded)
            .union(enabledIDs.symmetricDifference(state.plugins.keys))
            .intersection(enabledIDs.union(state.plugins.keys))
        var next = ProviderRegistry(formats: formats)
        for plugin in enabled {
            if !changed.contains(plugin.id), let kept = running.provider(for: plugin.id) {
                next.register(kept)
                continue
            }
            do {
                next.register(try plugin.makeProvider(context.replacing(running.provider(for: plugin.id))))
            } catch {
                return .failure(ConfigurationErrors(problems: ["\(plugin.id): \(error)"]))
            }
        }
        let before = state.plugins
        let after = Dictionary(enabled.map { ($0.id, $0) }) { $1 }
        providers.replace(with: next)
        breakers.forget { scope in
            changed.contains(scope.provider) && Self.names(before[scope.provider]?.appLabels ?? [], scope.metricLabel)
        }
        metrics.replaceAppLabels(MetricAppLabels(after.mapValues(\.appLabels)))
        transports.closeConnections(unusedBy: next.all)
        state.plugins = after
        logApplied(version, changed: changed, before: before, after: after)
        return .success(changed)
    }

    /// Whether a scope's metric label is one of `apps`, or a part of one (`<app>/<part>`, `DeliveryScope.partScope`).
    private static func names(_ apps: Set<String>, _ label: String) -> Bool {
        if apps.contains(label) { return true }
        guard let slash = label.lastIndex(of: "/") else { return false }
        return apps.contains(String(label[..<slash]))
    }

    private func recordLoaded(_ version: ConfigurationVersion) {
        versionGauge.record(version.gaugeValue)
        lastSuccessGauge.record(Date().timeIntervalSince1970)
    }

    private func logApplied(
        _ version: ConfigurationVersion, changed: Set<ProviderID>,
        before: [ProviderID: ConfiguredPlugin], after: [ProviderID: ConfiguredPlugin]
    ) {
        for id in changed.sorted(by: { $0.rawValue < $1.rawValue }) {
            let old = before[id]?.appLabels ?? [], new = after[id]?.appLabels ?? []
            logger.notice(
                "configuration reloaded",
                metadata: [
                    "provider": "\(id)", "version": "\(version.shortHex)",
                    "added": "\(new.subtracting(old).sorted().joined(separator: ","))",
                    "removed": "\(old.subtracting(new).sorted().joined(separator: ","))",
                    "enabled": "\(after[id] != nil)",
                ])
        }
        if changed.isEmpty { logger.notice("configuration reloaded; no provider changed", metadata: ["version": "\(version.shortHex)"]) }
    }
}
