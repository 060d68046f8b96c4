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

    public init(
        provider: ProviderID, key: String, metricLabel: String? = nil, inFlightLimit: Int? = nil,
        part: String? = nil, endpoint: String? = nil
    ) {
        self.provider = provider
        self.key = key
        self.metricLabel = metricLabel ?? key
        self.inFlightLimit = inFlightLimit
        self.part = part
        self.endpoint = endpoint
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
