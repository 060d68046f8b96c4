/// The smallest thing a provider's answer can be about: what a circuit breaker stops and
/// what a concurrency limit bounds. A plugin names it per target (an app in one APNs
/// environment, an FCM project, a Web Push service's origin), so one failing scope never
/// stops deliveries of another.
public struct DeliveryScope: Sendable, Hashable, CustomStringConvertible {
    public let provider: ProviderID
    /// Identifies the scope within the provider, e.g. `com.example.chat/sandbox` or `https://updates.push.services.mozilla.com`.
    public let key: String
    /// The `app` label of this scope's metrics: a bounded value, never one an outsider chooses.
    public let metricLabel: String
    /// Requests in flight allowed in this scope; nil: the worker's per-app limit.
    public let inFlightLimit: Int?
    /// The part of the scope this target belongs to that has credentials of its own (an FCM project's
    /// platform: Firebase holds separate APNs and web credentials). A failure blamed on the part
    /// (`CredentialBlame.part`) opens the part's circuit only; nil: the target's part is unknown, so
    /// such a failure opens no circuit.
    public let part: String?
    /// The provider endpoint whose connections this scope's requests share with other scopes' (its
    /// URL, and the client identity when the app has one of its own): the
    /// worker bounds the requests in flight per endpoint as well, so that requests beyond what those
    /// connections carry wait as values before their jobs start. nil: the scope shares no connections
    /// (or its own limit is lower than they carry).
    public let endpoint: String?
    /// The longest a rate-limit answer holds the whole scope: a `retryable` answer with HTTP 429 stops every send
    /// of the scope for its `retryAfter`, at most this long (an FCM project's quota, which Firebase refills "in the
    /// following minute"). nil: a 429 is about its own request (an APNs device token's rate), not the scope.
    public let rateLimitHold: Duration?

    public init(
        provider: ProviderID, key: String, metricLabel: String? = nil, inFlightLimit: Int? = nil,
        part: String? = nil, endpoint: String? = nil, rateLimitHold: Duration? = nil
    ) {
        self.provider = provider
        self.key = key
        self.metricLabel = metricLabel ?? key
        self.inFlightLimit = inFlightLimit
        self.part = part
        self.endpoint = endpoint
        self.rateLimitHold = rateLimitHold
    }

    /// How long `result` holds every send of this scope: a 429's `retryAfter`, at most `rateLimitHold`; nil when it
    /// holds nothing (another answer, no hold for this scope, or a hint of zero).
    public func hold(after result: DeliveryResult) -> Duration? {
        guard let longest = rateLimitHold, case .retryable(_, 429?, let retryAfter?) = result else { return nil }
        let hold = min(max(retryAfter, .zero), longest)
        return hold > .zero ? hold : nil
    }

    /// The scope of this target's part (`<key>/<part>`), whose circuit a part's failure opens; nil without a part.
    public var partScope: DeliveryScope? {
        part.map { DeliveryScope(provider: provider, key: "\(key)/\($0)", metricLabel: "\(metricLabel)/\($0)") }
    }

    /// The default scope: the target's app at its provider.
    public static func app(of target: Target) -> DeliveryScope {
        DeliveryScope(provider: target.provider, key: target.app ?? "-")
    }

    public var description: String { "\(provider.rawValue)/\(key)" }

    public static func == (lhs: DeliveryScope, rhs: DeliveryScope) -> Bool {
        lhs.provider == rhs.provider && lhs.key == rhs.key
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(provider)
        hasher.combine(key)
    }
}
