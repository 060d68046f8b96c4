import PushCore

/// A Web Push target's own fields: the browser's `PushSubscription` as `{"provider": "webpush",
/// "endpoint": "https://…", "keys": {"p256dh": "…", "auth": "…"}}`.
public struct WebPushTarget: TargetDetails, Equatable {
    /// The subscription endpoint: an untrusted URL (`EndpointPolicy` decides whether it is contacted).
    public var endpoint: String? {
        didSet { parsedEndpoint = endpoint.map(WebPushEndpoint.parse) }
    }
    public var keys: WebPushKeys?
    /// `endpoint` read once, here: the scope and the check of every attempt use it.
    private(set) var parsedEndpoint: Result<WebPushEndpoint, EndpointRefusal>?

    public init(endpoint: String?, keys: WebPushKeys? = nil) {
        self.endpoint = endpoint
        self.keys = keys
        parsedEndpoint = endpoint.map(WebPushEndpoint.parse)
    }

    public var deviceAddress: String? { endpoint }
}

/// The subscription's keys (RFC 8291): the browser's P-256 public key and the authentication secret, base64url.
public struct WebPushKeys: Sendable, Equatable {
    public var p256dh: String
    public var auth: String

    public init(p256dh: String, auth: String) {
        self.p256dh = p256dh
        self.auth = auth
    }
}

extension ProviderID {
    public static let webpush: ProviderID = "webpush"
}

extension Target {
    public static func webPush(_ bindingId: String, endpoint: String, keys: WebPushKeys) -> Target {
        Target(bindingId: bindingId, provider: .webpush, details: WebPushTarget(endpoint: endpoint, keys: keys))
    }
}

/// How jobs write Web Push targets, natively and as SIP bindings (whose token is the endpoint; the keys,
/// which neither notation has room for, come beside the binding string).
public struct WebPushTargetFormat: TargetFormat {
    public let provider = ProviderID.webpush

    /// `overrides.webpush.payload` is merged into the summary JSON the subscription receives.
    public func checkOverride(_ override: JSONValue) throws(JobRejection) {
        try checkOverride(override, members: ["payload"])
    }

    public init() {}

    public func decode(_ fields: inout Fields) throws(JobRejection) -> any TargetDetails {
        guard let endpoint = try fields.optionalString("endpoint", maximumLength: 2048), !endpoint.isEmpty else {
            throw fields.invalid("endpoint is required for webpush")
        }
        guard let keys = try Self.keys(&fields) else { throw fields.invalid("keys (p256dh, auth) are required for webpush") }
        return WebPushTarget(endpoint: endpoint, keys: keys)
    }

    static func keys(_ fields: inout Fields) throws(JobRejection) -> WebPushKeys? {
        guard var keyFields = try fields.optionalObject("keys") else { return nil }
        let keys = WebPushKeys(
            p256dh: try keyFields.requiredString("p256dh", maximumLength: 256),
            auth: try keyFields.requiredString("auth", maximumLength: 256))
        try keyFields.rejectUnread()
        return keys
    }

    public var rfc8599Providers: [String] { ["webpush"] }
    public var xmpushProviders: [(letter: String, meaning: String)] { [("w", "Web Push")] }

    /// A binding string is a Web Push subscription when its keys come with it (without, `w:` may be an FCM web token).
    public func claims(_ binding: SIPBinding, _ fields: Fields) -> Bool { fields.has("keys") }

    /// RFC 8599 `webpush`: `pn-prid` is the subscription endpoint, `pn-param` is not used; X-MPUSH `w`: the
    /// token is the endpoint, the package is ignored. The keys come as the target's `keys` member.
    public func decode(_ binding: SIPBinding, _ fields: inout Fields) throws(JobRejection) -> (app: String?, details: any TargetDetails) {
        let details = WebPushTarget(endpoint: binding.token, keys: try Self.keys(&fields))
        if !binding.isUnbound, details.keys == nil {
            throw fields.invalid("\(binding.notation.rawValue): keys (p256dh, auth) are required for webpush")
        }
        return (nil, details)
    }
}
