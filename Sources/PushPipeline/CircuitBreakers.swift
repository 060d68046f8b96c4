import Logging
import Metrics
import PushCore

/// One circuit breaker per delivery scope (an app in one APNs environment, an FCM project,
/// a push service's origin: what the provider plugin names), plus one per part of a scope that
/// has credentials of its own (an FCM project's platform), shared by every delivery of this replica.
///
/// A send needs both its scope's and its part's circuit closed. A result goes to the scope's
/// breaker as the answer of a working service unless it blames the scope's credentials; the
/// part's breaker opens only on a failure blamed on the part. So what fails for the whole
/// project (OAuth, quota, an outage) opens one breaker, and a platform's APNs key stops that platform only.
///
/// Scopes come from jobs (a Web Push origin is whatever host an endpoint names), so the map is
/// bounded: a breaker closed with no failure counted is the same as none and is not kept; one left
/// alone for `idleEviction` is forgotten (its next send probes or counts afresh); beyond
/// `maximumEntries` the longest unused go first. `push_circuit_breakers` is the number kept, `push_circuits_open` the
/// number of them not closed (open or half-open).
public final class CircuitBreakers: Sendable {
    /// The probes a permitted send holds: given back with `giveBack` when the send does not happen.
    public struct Probes: Sendable, Equatable {
        fileprivate var held: [(scope: DeliveryScope, probe: CircuitBreaker.Probe)] = []
        public var isEmpty: Bool { held.isEmpty }

        public static func == (lhs: Probes, rhs: Probes) -> Bool {
            lhs.held.map(\.scope) == rhs.held.map(\.scope) && lhs.held.map(\.probe) == rhs.held.map(\.probe)
        }
    }

    fileprivate struct Entry {
        var breaker: CircuitBreaker
        var lastUsed: Int64
    }

    fileprivate struct Table {
        var entries: [DeliveryScope: Entry] = [:]
        var operationsSinceSweep = 0
        var reportedCount = -1
        /// Breakers kept that are not closed: kept up to date by `store`, counted again when entries are dropped.
        var open = 0
        var reportedOpen = -1
    }

    public static let defaultMaximumEntries = 10_000

    private let table = Locked(Table())
    private let settings: CircuitBreaker.Settings
    private let maximumEntries: Int
    /// Milliseconds a breaker may go unused before it is forgotten.
    private let idleEviction: Int64
    private let metrics: PipelineMetrics
    private let logger: Logger
    private let entriesGauge = Gauge(label: "push_circuit_breakers")
    private let openGauge = Gauge(label: "push_circuits_open")

    public init(
        settings: CircuitBreaker.Settings, metrics: PipelineMetrics, logger: Logger,
        maximumEntries: Int = CircuitBreakers.defaultMaximumEntries, idleEviction: Duration? = nil
    ) {
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.maximumEntries = max(1, maximumEntries)
        // Long enough that an open circuit lives through its cool-down and a probe through its lease.
        self.idleEviction =
            idleEviction?.milliseconds
            ?? max(600_000, 2 * settings.coolDownMilliseconds.adding(saturating: settings.probeLeaseMilliseconds))
    }

    /// Whether a send to `scope` may go out now; when not, the scope (or part) whose circuit is open.
    /// A send allowed as a half-open circuit's probe holds `probes` until it reports, or gives them back.
    func permit(_ scope: DeliveryScope, at now: Int64) -> (permit: CircuitBreaker.Permit, openScope: DeliveryScope, probes: Probes) {
        table.withLock { table in
            defer { table.maintain(at: now, maximum: maximumEntries, idle: idleEviction, gauges: (entriesGauge, openGauge)) }
            var whole = table.breaker(of: scope, settings: settings)
            let permit = whole.permit(at: now)
            guard permit.isAllowed else {
                table.store(whole, for: scope, at: now)
                return (permit, scope, Probes())
            }
            var probes = Probes()
            if case .probe(let probe) = permit { probes.held.append((scope, probe)) }
            if let partScope = scope.partScope {
                var part = table.breaker(of: partScope, settings: settings)
                let partPermit = part.permit(at: now)
                // Commit only when both allow: a half-open probe must belong to a send that happens.
                guard partPermit.isAllowed else {
                    table.store(part, for: partScope, at: now)
                    return (partPermit, partScope, Probes())
                }
                if case .probe(let probe) = partPermit { probes.held.append((partScope, probe)) }
                table.store(part, for: partScope, at: now)
            }
            table.store(whole, for: scope, at: now)
            return (.allowed, scope, probes)
        }
    }

    /// The permitted send did not happen (abandoned, or expired waiting for its slot): its probes go back,
    /// so the next send probes instead of waiting for the lease to end.
    func giveBack(_ probes: Probes, at now: Int64) {
        guard !probes.isEmpty else { return }
        table.withLock { table in
            for (scope, probe) in probes.held {
                guard var entry = table.entries[scope] else { continue }
                entry.breaker.giveBack(probe)
                entry.lastUsed = now
                table.entries[scope] = entry
            }
        }
    }

    func record(_ result: DeliveryResult, in scope: DeliveryScope, at now: Int64) {
        var blame: CredentialBlame?
        if case .failed(_, _, .checkCredentials, let resultBlame) = result {
            blame = resultBlame
            if blame == .part, scope.partScope == nil { blame = .request }
        }
        let answeredOnTheMerits = DeliveryResult.failed(reason: "answered", httpStatus: result.httpStatus)
        record(blame == nil || blame == .scope ? result : answeredOnTheMerits, in: scope, at: now, onlyWhenOpen: false)
        guard let partScope = scope.partScope else { return }
        switch blame {
        case .part?: record(result, in: partScope, at: now, onlyWhenOpen: false)
        case .scope?: record(.retryable(reason: "the scope failed", httpStatus: nil), in: partScope, at: now, onlyWhenOpen: true)
        case .request?: record(answeredOnTheMerits, in: partScope, at: now, onlyWhenOpen: false)
        case nil:
            if case .retryable = result {
                // Transient failures are counted once, by the scope; a probe of the part still needs its answer.
                record(result, in: partScope, at: now, onlyWhenOpen: true)
            } else {
                record(result, in: partScope, at: now, onlyWhenOpen: false)
            }
        }
    }

    private func record(_ result: DeliveryResult, in scope: DeliveryScope, at now: Int64, onlyWhenOpen: Bool) {
        let change = table.withLock { table -> (opened: Bool, wasOpen: Bool, state: CircuitBreaker.State)? in
            defer { table.maintain(at: now, maximum: maximumEntries, idle: idleEviction, gauges: (entriesGauge, openGauge)) }
            var breaker = table.breaker(of: scope, settings: settings)
            let wasOpen = breaker.isOpen
            if onlyWhenOpen, !wasOpen { return nil }
            let opened = breaker.record(result, in: scope, at: now)
            table.store(breaker, for: scope, at: now)
            return (opened, wasOpen, breaker.state)
        }
        guard let (opened, wasOpen, state) = change else { return }
        if opened {
            metrics.circuit(scope, open: true)
            logger.warning(
                "circuit opened: not sending to this scope during the cool-down",
                metadata: [
                    "provider": "\(scope.provider.rawValue)", "scope": "\(scope.key)", "state": "\(state)",
                    "coolDownMs": "\(settings.coolDownMilliseconds)",
                ])
        } else if wasOpen, case .closed = state {
            metrics.circuit(scope, open: false)
            logger.notice("circuit closed: sending again", metadata: ["provider": "\(scope.provider.rawValue)", "scope": "\(scope.key)"])
        }
    }

    /// Forgets the breakers of the scopes `released` picks (apps live configuration removed or gave new credentials):
    /// their next send counts afresh. An open one's `push_circuit_open` goes back to 0.
    public func forget(where released: (DeliveryScope) -> Bool) {
        let forgotten = table.withLock { table -> [DeliveryScope: CircuitBreakers.Entry] in
            let forgotten = table.entries.filter { released($0.key) }
            for scope in forgotten.keys { table.entries[scope] = nil }
            table.reportedCount = table.entries.count
            table.open = table.entries.values.count { $0.breaker.isOpen }
            table.reportedOpen = table.open
            entriesGauge.record(table.entries.count)
            openGauge.record(table.open)
            return forgotten
        }
        for (scope, entry) in forgotten where entry.breaker.isOpen { metrics.circuit(scope, open: false) }
    }

    /// Every breaker that is not closed, for logs, metrics and tests.
    public var openCircuits: [DeliveryScope: CircuitBreaker.State] {
        table.withLock { $0.entries.filter { $0.value.breaker.isOpen }.mapValues(\.breaker.state) }
    }

    /// Breakers not closed, as `push_circuits_open` reports them, for tests.
    var openCount: Int { table.withLock { $0.open } }

    /// Breakers kept (not pristine), for tests.
    var count: Int { table.withLock { $0.entries.count } }
}

private extension CircuitBreakers.Table {
    func breaker(of scope: DeliveryScope, settings: CircuitBreaker.Settings) -> CircuitBreaker {
        entries[scope]?.breaker ?? CircuitBreaker(settings: settings)
    }

    /// Keeps `breaker` for `scope`, unless it is pristine (then none is the same).
    mutating func store(_ breaker: CircuitBreaker, for scope: DeliveryScope, at now: Int64) {
        let wasOpen = entries[scope]?.breaker.isOpen == true
        entries[scope] = breaker.isPristine ? nil : CircuitBreakers.Entry(breaker: breaker, lastUsed: now)
        open += (breaker.isOpen ? 1 : 0) - (wasOpen ? 1 : 0)
    }

    /// Forgets breakers unused for `idle`, now and then and whenever more than `maximum` are kept; then, while
    /// still more than `maximum`, the longest unused, down to nine tenths of it (so the next sweep is far off).
    mutating func maintain(at now: Int64, maximum: Int, idle: Int64, gauges: (entries: Gauge, open: Gauge)) {
        operationsSinceSweep += 1
        if entries.count > maximum || operationsSinceSweep >= 4096 {
            defer { open = entries.values.count { $0.breaker.isOpen } }
            operationsSinceSweep = 0
            entries = entries.filter { now.subtracting(saturating: $0.value.lastUsed) < idle }
            if entries.count > maximum {
                let keep = maximum - maximum / 10
                let byUse = entries.sorted { $0.value.lastUsed > $1.value.lastUsed }
                entries = Dictionary(uniqueKeysWithValues: byUse.prefix(keep).map { ($0.key, $0.value) })
            }
        }
        if entries.count != reportedCount {
            reportedCount = entries.count
            gauges.entries.record(entries.count)
        }
        if open != reportedOpen {
            reportedOpen = open
            gauges.open.record(open)
        }
    }
}
