import Logging
import PushCore

/// One circuit breaker per delivery scope (an app in one APNs environment, an FCM project,
/// a push service's origin: what the provider plugin names), plus one per part of a scope that
/// has credentials of its own (an FCM project's platform), shared by every delivery of this replica.
///
/// A send needs both its scope's and its part's circuit closed. A result goes to the scope's
/// breaker as the answer of a working service unless it blames the scope's credentials; the
/// part's breaker opens only on a failure blamed on the part. So what fails for the whole
/// project (OAuth, quota, an outage) opens one breaker, and a platform's APNs key stops that platform only.
public final class CircuitBreakers: Sendable {
    private let breakers = Locked<[DeliveryScope: CircuitBreaker]>([:])
    private let settings: CircuitBreaker.Settings
    private let metrics: PipelineMetrics
    private let logger: Logger

    public init(settings: CircuitBreaker.Settings, metrics: PipelineMetrics, logger: Logger) {
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
    }

    /// Whether a send to `scope` may go out now; when not, the scope (or part) whose circuit is open.
    func permit(_ scope: DeliveryScope, at now: Int64) -> (permit: CircuitBreaker.Permit, openScope: DeliveryScope) {
        breakers.withLock { breakers in
            guard let partScope = scope.partScope else {
                return (Self.withBreaker(of: scope, in: &breakers, settings: settings) { $0.permit(at: now) }, scope)
            }
            var whole = breakers[scope, default: CircuitBreaker(settings: settings)]
            let permit = whole.permit(at: now)
            guard case .allowed = permit else {
                breakers[scope] = whole
                return (permit, scope)
            }
            var part = breakers[partScope, default: CircuitBreaker(settings: settings)]
            let partPermit = part.permit(at: now)
            // Commit only when both allow: a half-open probe must belong to a send that happens.
            guard case .allowed = partPermit else { return (partPermit, partScope) }
            breakers[scope] = whole
            breakers[partScope] = part
            return (.allowed, scope)
        }
    }

    /// Runs `body` on the scope's breaker in place (a new one the first time): one lookup of the scope.
    private static func withBreaker<Result>(of scope: DeliveryScope, in breakers: inout [DeliveryScope: CircuitBreaker],
                                            settings: CircuitBreaker.Settings, _ body: (inout CircuitBreaker) -> Result) -> Result {
        if let index = breakers.index(forKey: scope) { return body(&breakers.values[index]) }
        var breaker = CircuitBreaker(settings: settings)
        defer { breakers[scope] = breaker }
        return body(&breaker)
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
        let change = breakers.withLock { breakers -> (opened: Bool, wasOpen: Bool, state: CircuitBreaker.State)? in
            Self.withBreaker(of: scope, in: &breakers, settings: settings) { breaker in
                let wasOpen = breaker.isOpen
                if onlyWhenOpen, !wasOpen { return nil }
                let opened = breaker.record(result, at: now)
                return (opened, wasOpen, breaker.state)
            }
        }
        guard let (opened, wasOpen, state) = change else { return }
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
