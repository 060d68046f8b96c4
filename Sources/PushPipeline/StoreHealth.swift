import Metrics
import Synchronization

/// Whether the shared store (Redis) answers. While it does not, the consumer pauses
/// (jobs stay uncommitted) and in-flight work waits for it (`StoreRetries`).
/// A store that answers while its replicas fall short of acknowledging a write (`ReplicationShortfall`) is healthy:
/// only the jobs whose writes fell short wait, and the shortfalls are counted and logged here at most once an interval.
public final class StoreHealth: Sendable {
    private let healthy = Atomic<Bool>(true)
    let shortfalls: OccasionalLog

    /// - Parameter logInterval: at most one log line per interval of replication shortfalls.
    public init(logInterval: Duration = .seconds(10)) {
        shortfalls = OccasionalLog(interval: logInterval)
    }

    public var isHealthy: Bool { healthy.load(ordering: .relaxed) }

    /// Why a store operation failed, as `push_store_errors_total{reason}` counts it: a fixed set, never an error's text.
    enum ErrorReason: String, CaseIterable {
        /// The store did not answer, or answered with an error.
        case unavailable
        /// The store answered, but no replica acknowledged the write in time (`ReplicationShortfall`).
        case replicationShortfall = "replication_shortfall"
    }

    func count(_ reason: ErrorReason) {
        Counter(label: "push_store_errors_total", dimensions: [("reason", reason.rawValue)]).increment()
    }

    /// Returns true when this changed the state.
    @discardableResult
    func set(_ value: Bool) -> Bool { healthy.exchange(value, ordering: .relaxed) != value }
}

/// Counts events that happen to many jobs at once and says when to log them: the first one, then at most once per
/// interval, with how many happened since the last line.
final class OccasionalLog: Sendable {
    private let interval: Duration
    private let state = Mutex<(lastLine: ContinuousClock.Instant?, since: Int)>((nil, 0))

    init(interval: Duration) { self.interval = interval }

    /// Counts one event; returns how many to report when a line is due now (this one included), else nil.
    func note(at now: ContinuousClock.Instant = .now) -> Int? {
        state.withLock { state in
            state.since += 1
            if let last = state.lastLine, now - last < interval { return nil }
            defer { state = (now, 0) }
            return state.since
        }
    }
}
