import Logging
import PushCore
import Synchronization

/// One circuit breaker per (provider, app), shared by every delivery of this replica.
public final class CircuitBreakers: Sendable {
    public struct Key: Hashable, Sendable, CustomStringConvertible {
        public let provider: ProviderID
        public let app: String
        public var description: String { "\(provider.rawValue)/\(app)" }
    }

    private let breakers = Mutex<[Key: CircuitBreaker]>([:])
    private let settings: CircuitBreaker.Settings
    private let metrics: PipelineMetrics
    private let logger: Logger

    public init(settings: CircuitBreaker.Settings, metrics: PipelineMetrics, logger: Logger) {
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
    }

    static func key(_ target: Target) -> Key { Key(provider: target.provider, app: target.app ?? "-") }

    func permit(_ target: Target, at now: Int64) -> CircuitBreaker.Permit {
        breakers.withLock { $0[Self.key(target), default: CircuitBreaker(settings: settings)].permit(at: now) }
    }

    func record(_ result: DeliveryResult, for target: Target, at now: Int64) {
        let key = Self.key(target)
        let (opened, wasOpen, state) = breakers.withLock { breakers -> (Bool, Bool, CircuitBreaker.State) in
            var breaker = breakers[key, default: CircuitBreaker(settings: settings)]
            let wasOpen = breaker.isOpen
            let opened = breaker.record(result, at: now)
            breakers[key] = breaker
            return (opened, wasOpen, breaker.state)
        }
        if opened {
            metrics.circuit(target.provider, app: target.app, open: true)
            logger.warning("circuit opened: not sending for this app during the cool-down", metadata: [
                "provider": "\(key.provider.rawValue)", "app": "\(key.app)", "state": "\(state)",
                "coolDownMs": "\(settings.coolDownMilliseconds)",
            ])
        } else if wasOpen, case .closed = state {
            metrics.circuit(target.provider, app: target.app, open: false)
            logger.notice("circuit closed: sending again", metadata: ["provider": "\(key.provider.rawValue)", "app": "\(key.app)"])
        }
    }

    /// Every breaker that is not closed, for logs, metrics and tests.
    public var openCircuits: [Key: CircuitBreaker.State] {
        breakers.withLock { $0.filter { $0.value.isOpen }.mapValues(\.state) }
    }
}
