/// Stops sending for one (provider, app) when its credentials are rejected or its
/// requests fail in a storm, instead of burning the account's quota (Mizu `fcm_maxfail`).
///
/// closed ──credential failure──────────▶ open(credentials) ──cool-down──▶ half-open
/// closed ──N transient failures in a row▶ open(storm)       ──cool-down──▶ half-open
/// half-open: one probe; success → closed, failure → open again.
public struct CircuitBreaker: Sendable, Equatable {
    public enum Cause: String, Sendable, Equatable {
        case credentials, failureStorm = "failure_storm"
    }

    public enum State: Sendable, Equatable {
        case closed(consecutiveFailures: Int)
        case open(cause: Cause, until: Int64)
        case halfOpen(cause: Cause, probeInFlight: Bool)
    }

    public enum Permit: Sendable, Equatable {
        case allowed
        case rejected(cause: Cause, retryAt: Int64)
    }

    public struct Settings: Sendable, Equatable {
        public var failureThreshold: Int
        public var coolDownMilliseconds: Int64

        public static let `default` = Settings(failureThreshold: 50, coolDownMilliseconds: 30_000)

        public init(failureThreshold: Int, coolDownMilliseconds: Int64) {
            self.failureThreshold = failureThreshold
            self.coolDownMilliseconds = coolDownMilliseconds
        }
    }

    public private(set) var state: State = .closed(consecutiveFailures: 0)
    public let settings: Settings

    public init(settings: Settings = .default) { self.settings = settings }

    /// Whether a request may go out at `now`.
    public mutating func permit(at now: Int64) -> Permit {
        switch state {
        case .closed:
            return .allowed
        case .open(let cause, let until):
            guard now >= until else { return .rejected(cause: cause, retryAt: until) }
            state = .halfOpen(cause: cause, probeInFlight: true)
            return .allowed
        case .halfOpen(let cause, let probeInFlight):
            if probeInFlight { return .rejected(cause: cause, retryAt: now.adding(saturating: settings.coolDownMilliseconds / 10)) }
            state = .halfOpen(cause: cause, probeInFlight: true)
            return .allowed
        }
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
}
