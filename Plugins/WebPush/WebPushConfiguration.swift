import PushCrypto

public struct WebPushConfiguration: Sendable {
    /// The application server's VAPID key (P-256).
    public var vapidKey: PrivateKey
    /// `sub` of the VAPID token: a `mailto:` or `https:` contact.
    public var subject: String
    /// Trust for push services (a sandbox CA); nil = the system store.
    public var caFile: String?
    /// Allow endpoints on loopback, private and link-local addresses (tests, private push services).
    public var allowPrivateNetworks: Bool
    /// When not empty, only endpoints whose host equals or ends with one of these (after a dot).
    public var allowedHosts: [String]
    public var timeout: Duration
    /// Lifetime of a VAPID token (RFC 8292 allows at most 24 h).
    public var tokenLifetime: Duration

    public init(vapidKey: PrivateKey, subject: String, caFile: String? = nil, allowPrivateNetworks: Bool = false,
                allowedHosts: [String] = [], timeout: Duration = .seconds(10), tokenLifetime: Duration = .seconds(12 * 3600)) {
        self.vapidKey = vapidKey
        self.subject = subject
        self.caFile = caFile
        self.allowPrivateNetworks = allowPrivateNetworks
        self.allowedHosts = allowedHosts
        self.timeout = timeout
        self.tokenLifetime = tokenLifetime
    }
}
