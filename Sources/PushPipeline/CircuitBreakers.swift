import Logging
import PushCore
import Synchronization

/// One circuit breaker per delivery scope (an app in one APNs environment, an FCM project,
/// a push service's origin: what the provider plugin names), shared by every delivery of this replica.
public final class CircuitBreakers: Sendable {
    private let breakers = Mutex<[DeliveryScope: CircuitBreaker]>([:])
    private let settings: CircuitBreaker.Settings
    private let metrics: PipelineMetrics
    private let logger: Logger

    public init(settings: CircuitBreaker.Settings, metrics: PipelineMetrics, logger: Logger) {
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
    }

    func permit(_ scope: DeliveryScope, at now: Int64) -> CircuitBreaker.Permit {
        breakers.withLock { $0[scope, default: CircuitBreaker(settings: settings)].permit(at: now) }
    }

    func record(_ result: DeliveryResult, in scope: DeliveryScope, at now: Int64) {
        var result = result
        if case .failed(let reason, let status, .checkCredentials) = result, !scope.credentialFailuresOpenCircuit {
            // The answer concerns one target, not the scope: the scope's service is working.
            result = .failed(reason: reason, httpStatus: status, action: .none)
        }
        let (opened, wasOpen, state) = breakers.withLock { breakers -> (Bool, Bool, CircuitBreaker.State) in
            var breaker = breakers[scope, default: CircuitBreaker(settings: settings)]
            let wasOpen = breaker.isOpen
            let opened = breaker.record(result, at: now)
            breakers[scope] = breaker
            return (opened, wasOpen, breaker.state)
        }
        if opened {
            metrics.circuit(scope, open: true)
            logger.warning("circuit opened: not sending to this scope during the cool-down", metadata: [
                "provider": "\(scope.provider.rawValue)", "scope": "\(scope.key)", "state": "\(state)",
                "coolDownMs": "\(settings.coolDownMilliseconds)",
            ])
        } else if wasOpen, case .closed = state {
            metrics.circuit(scope, open: false)
            logger.notice("circuit closed: sending again", metadata: ["provider": "\(scope.provider.rawValue)", "scope": "\(scope.key)"])
        }
    }

    /// Every breaker that is not closed, for logs, metrics and tests.
    public var openCircuits: [DeliveryScope: CircuitBreaker.State] {
        breakers.withLock { $0.filter { $0.value.isOpen }.mapValues(\.state) }
    }
}
