/// Stops sending for one (provider, app) when its credentials are rejected or its
/// requests fail in a storm, instead of burning the account's quota (Mizu `fcm_maxfail`).
///
/// closed ──credential failure──────────▶ open(credentials) ──cool-down──▶ half-open
/// closed ──N transient failures in a row▶ open(storm)       ──cool-down──▶ half-open
/// half-open: one probe at a time; success → closed, failure → open again.
///
/// The probe is a lease, not a flag: the send it was handed to gives it back when it does not happen
/// (abandoned, or its TTL passed while it waited for a slot), and a probe that has not reported by
/// the end of its lease (`probeLeaseMilliseconds`) is taken back at the next permit. So no probe that
/// never reports can hold a scope's sends back for good.
public struct CircuitBreaker: Sendable, Equatable {
    public enum Cause: String, Sendable, Equatable {
        case credentials
        case failureStorm = "failure_storm"
    }

    /// The one send a half-open circuit let through, until it reports or its lease ends.
    public struct Probe: Sendable, Hashable {
        public let number: UInt64
        /// Milliseconds since the epoch after which the probe is taken back unreported.
        public let leaseEnd: Int64
    }

    public enum State: Sendable, Equatable {
        case closed(consecutiveFailures: Int)
        case open(cause: Cause, until: Int64)
        /// `probe`: the send out now, if any.
        case halfOpen(cause: Cause, probe: Probe?)
    }

    public enum Permit: Sendable, Equatable {
        case allowed
        /// Allowed as the half-open circuit's probe: its result goes to `record`, or the probe goes back
        /// with `giveBack(_:)` when the send does not happen.
        case probe(Probe)
        case rejected(cause: Cause, retryAt: Int64)

        public var isAllowed: Bool {
            if case .rejected = self { return false }
            return true
        }
    }

    public struct Settings: Sendable, Equatable {
        public var failureThreshold: Int
        public var coolDownMilliseconds: Int64
        /// How long a probe may take to report: the longest wait for a slot plus the longest request.
        public var probeLeaseMilliseconds: Int64

        public static let `default` = Settings(failureThreshold: 50, coolDownMilliseconds: 30_000)

        public init(failureThreshold: Int, coolDownMilliseconds: Int64, probeLeaseMilliseconds: Int64 = 60_000) {
            self.failureThreshold = failureThreshold
            self.coolDownMilliseconds = coolDownMilliseconds
            self.probeLeaseMilliseconds = max(1, probeLeaseMilliseconds)
        }
    }

    public private(set) var state: State = .closed(consecutiveFailures: 0)
    public let settings: Settings
    private var probesIssued: UInt64 = 0

    public init(settings: Settings = .default) { self.settings = settings }

    /// Whether a request may go out at `now`.
    public mutating func permit(at now: Int64) -> Permit {
        switch state {
        case .closed:
            return .allowed
        case .open(let cause, let until):
            guard now >= until else { return .rejected(cause: cause, retryAt: until) }
            return issueProbe(cause: cause, at: now)
        case .halfOpen(let cause, let probe):
            if let probe, now < probe.leaseEnd {
                let retryAt = now.adding(saturating: max(settings.coolDownMilliseconds / 10, 1))
                return .rejected(cause: cause, retryAt: min(retryAt, probe.leaseEnd))
            }
            return issueProbe(cause: cause, at: now)
        }
    }

    private mutating func issueProbe(cause: Cause, at now: Int64) -> Permit {
        probesIssued &+= 1
        let probe = Probe(number: probesIssued, leaseEnd: now.adding(saturating: settings.probeLeaseMilliseconds))
        state = .halfOpen(cause: cause, probe: probe)
        return .probe(probe)
    }

    /// The probe's send did not happen: the next send may probe. A probe that was already taken back,
    /// or answered, changes nothing.
    public mutating func giveBack(_ probe: Probe) {
        guard case .halfOpen(let cause, let current?) = state, current.number == probe.number else { return }
        state = .halfOpen(cause: cause, probe: nil)
    }

    /// Feeds back the result of a permitted request to `scope`: a rate limit on the whole scope
    /// (`DeliveryScope.hold(after:)`) holds every send for as long as it says, else as `record(_:at:)`.
    /// Returns true when the circuit opened.
    @discardableResult
    public mutating func record(_ result: DeliveryResult, in scope: DeliveryScope, at now: Int64) -> Bool {
        guard let duration = scope.hold(after: result) else { return record(result, at: now) }
        return hold(until: now.adding(saturating: duration.milliseconds))
    }

    /// Stops every send until `until`, then lets one probe through as after a cool-down; a circuit open after a failure
    /// storm keeps the later of its end and `until`, one open on credentials keeps its own end (its sends end failed,
    /// not held: a hold must not stretch that). Returns true when the circuit opened (it was not open already).
    @discardableResult
    public mutating func hold(until: Int64) -> Bool {
        if case .open(let cause, let end) = state {
            if cause == .failureStorm { state = .open(cause: cause, until: max(end, until)) }
            return false
        }
        state = .open(cause: .failureStorm, until: until)
        return true
    }

    /// Feeds back the result of a permitted request. Returns true when the circuit opened.
    @discardableResult
    public mutating func record(_ result: DeliveryResult, at now: Int64) -> Bool {
        switch result {
        case .failed(_, _, .checkCredentials, _):
            state = .open(cause: .credentials, until: now.adding(saturating: settings.coolDownMilliseconds))
            return true
        case .retryable:
            switch state {
            case .closed(let failures):
                if failures >= settings.failureThreshold - 1 {
                    state = .open(cause: .failureStorm, until: now.adding(saturating: settings.coolDownMilliseconds))
                    return true
                }
                state = .closed(consecutiveFailures: failures + 1)
            case .halfOpen(let cause, _):
                state = .open(cause: cause, until: now.adding(saturating: settings.coolDownMilliseconds))
                return true
            case .open:
                break
            }
            return false
        case .delivered, .rejected, .failed:
            // The provider answered on the merits: credentials and service are fine.
            state = .closed(consecutiveFailures: 0)
            return false
        }
    }

    public var isOpen: Bool {
        if case .closed = state { return false }
        return true
    }

    /// Closed with no failure counted: the same as a breaker never used, so its owner may forget it.
    public var isPristine: Bool { state == .closed(consecutiveFailures: 0) }
}
