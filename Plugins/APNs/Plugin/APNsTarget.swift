import PushCore

/// An APNs target's own fields: `{"provider": "apns", "app": "<bundle id>", "token": "<hex>",
/// "environment"?: "production" | "sandbox", "pushType"?: "<apns-push-type>"}`.
public struct APNsTarget: TargetDetails, Equatable {
    /// The device token, hex (of a dual binding, the ordinary `remote` one).
    public var token: String?
    /// A dual binding's PushKit token (RFC 8599 `voip&remote`): calls go to it as `voip`, every other push to `token`.
    public var voipToken: String?
    /// `sandbox` selects Apple's development environment; anything else is production.
    public var environment: String?
    /// The push type the binding demands (an RFC 8599 binding's service), if any.
    public var pushType: String?
    /// The SIP notation the binding came in, if any: an X-MPUSH `i:` token may be a PushKit token.
    public var notation: SIPBinding.Notation?
    /// An RFC 8599 `pn-param` read the other way round (`APNsRFC8599Binding.alternativeBundleId`): the app the push
    /// goes to when it is configured and the target's `app` is not.
    public var alternativeBundleId: String?

    public init(
        token: String?, voipToken: String? = nil, environment: String? = nil, pushType: String? = nil,
        notation: SIPBinding.Notation? = nil, alternativeBundleId: String? = nil
    ) {
        self.token = token
        self.voipToken = voipToken
        self.environment = environment
        self.pushType = pushType
        self.notation = notation
        self.alternativeBundleId = alternativeBundleId
    }

    public var deviceAddress: String? { token }

    /// Whether the binding says which environment its token belongs to, so that a BadDeviceToken there means the token
    /// is dead (`APNsResponse.classify`): a target's `environment`, X-MPUSH `s:`/`p:`, RFC 8599 `apns.dev`. RFC 8599's
    /// `apns` does not: RFC 8599 defines no other value, and liblinphone writes `apns` unless the app says `apns.dev`
    /// (`src/account/account.cpp`; `PushNotificationConfig`'s default provider), so a development build's token may
    /// arrive as `apns` and be sent to production.
    public var namesEnvironment: Bool {
        guard let environment else { return false }
        return !(notation == .rfc8599 && environment == APNsEnvironment.production.rawValue)
    }

    /// Of a dual binding (`voipToken` set), the token a push of `pushType` goes to (`APNsDestination`); nil for a
    /// binding of one token, or when both halves hold the same token (then it is the whole binding that died).
    func half(sentAs pushType: APNsPushType) -> BindingToken? {
        guard let voipToken, voipToken != token else { return nil }
        return pushType == .voip ? .voip : .remote
    }
}

extension ProviderID {
    public static let apns: ProviderID = "apns"
}

extension Target {
    public static func apns(
        _ bindingId: String, app: String? = nil, token: String, environment: String? = nil,
        pushType: String? = nil
    ) -> Target {
        Target(
            bindingId: bindingId, provider: .apns, app: app,
            details: APNsTarget(token: token, environment: environment, pushType: pushType))
    }
}

/// How jobs write APNs targets, natively and as SIP bindings.
public struct APNsTargetFormat: TargetFormat {
    public let provider = ProviderID.apns

    /// `overrides.apns.payload` is merged into the payload; headers (topic, push type, priority) follow the rules.
    public func checkOverride(_ override: JSONValue) throws(JobRejection) {
        try checkOverride(override, members: ["payload"])
    }
    public static let environments = ["production", "sandbox"]

    public init() {}

    public func decode(_ fields: inout Fields) throws(JobRejection) -> any TargetDetails {
        let details = APNsTarget(
            token: try fields.optionalString("token", maximumLength: 4096),
            environment: try fields.optionalString("environment", maximumLength: 16),
            pushType: try fields.optionalString("pushType", maximumLength: 32))
        try check(details, fields.path)
        return details
    }

    private func check(_ details: APNsTarget, _ path: String) throws(JobRejection) {
        func invalid(_ message: String) -> JobRejection { JobRejection(.invalidField, "\(path)\(message)") }
        guard let token = details.token else { throw invalid("token is required for apns") }
        // Counted in bytes: a token of hex digits has as many bytes as characters (and any other is refused).
        for token in [token, details.voipToken].compactMap(\.self) {
            let length = token.utf8.count
            guard length >= 16, length.isMultiple(of: 2), !token.containsUTF8Byte(where: { !$0.isHexDigit }) else {
                throw invalid("token must be an even number (≥ 16) of hex digits for apns")
            }
        }
        if let environment = details.environment, !Self.environments.contains(environment) {
            throw invalid("environment must be production or sandbox")
        }
        if let pushType = details.pushType, APNsPushType(rawValue: pushType) == nil {
            throw invalid("pushType \"\(pushType)\" is not an APNs push type")
        }
    }

    // MARK: SIP bindings

    public var rfc8599Providers: [String] { APNsRFC8599Binding.providers.keys.sorted() }
    public var xmpushProviders: [(letter: String, meaning: String)] { [("i", "APNs")] }

    /// X-MPUSH environment prefixes: `s` sandbox, `p` production; `d` (or none) the app's default environment.
    static let xmpushEnvironments: [String: String] = ["s": "sandbox", "p": "production"]

    /// - RFC 8599, as Flexisip and Linphone write it (`APNsRFC8599Binding`): the bundle id selects the app (the team id
    ///   before it dropped by its shape, the other reading kept for the provider), `pn-provider` the environment; a `remote` token follows the job's kind, a `voip` token is a PushKit token
    ///   (calls only), `voip-ptt` and `complication` select those push types, and a dual `voip&remote` binding
    ///   keeps both tokens.
    /// - X-MPUSH `i`: the package is the bundle id; `s:`/`p:` choose the environment, `d:` or none leave it
    ///   to the app's configured default.
    public func decode(_ binding: SIPBinding, _ fields: inout Fields) throws(JobRejection) -> (app: String?, details: any TargetDetails) {
        let app: String
        var details = APNsTarget(token: binding.token, notation: binding.notation)
        switch binding.notation {
        case .rfc8599:
            let parsed = try APNsRFC8599Binding.parse(binding)
            app = parsed.bundleId
            details.alternativeBundleId = parsed.alternativeBundleId
            details.environment = parsed.environment.rawValue
            if parsed.services.count > 1 {
                details.token = parsed.tokens[.remote]
                details.voipToken = parsed.tokens[.voip]
            } else {
                details.token = parsed.tokens[parsed.services[0]]
                details.pushType = parsed.services[0].pushType?.rawValue
            }
        case .xmpush:
            guard let package = binding.parameter else { throw binding.invalid("the package (bundle id) is empty") }
            app = package
            details.environment = binding.environment.flatMap { Self.xmpushEnvironments[$0] }
        }
        if !binding.isUnbound { try check(details, "\(binding.path)\(binding.notation.rawValue): ") }
        return (app, details)
    }
}
