import PushCore

/// An FCM target's own fields: `{"provider": "fcm", "app": "<project id>", "token": "<registration token>",
/// "platform"?: "android" | "ios" | "web", "pushType"?: "…"}`. The platform says which of the project's
/// credentials a failure is about and which block (`android`, `apns`, `webpush`) the message carries.
public struct FCMTarget: TargetDetails, Equatable {
    public var token: String?
    public var platform: String?
    /// `voip` marks an iOS token when the platform is not given.
    public var pushType: String?

    public init(token: String?, platform: String? = nil, pushType: String? = nil) {
        self.token = token
        self.platform = platform
        self.pushType = pushType
    }

    public var deviceAddress: String? { token }

    /// The platform of the token: its own, iOS for a VoIP binding; nil when unknown.
    public var resolvedPlatform: String? { platform ?? (pushType == "voip" ? "ios" : nil) }

    /// The platforms that choose a block of the message (and name a part of a project's scope); a job may write others.
    public static let platforms = ["android", "ios", "web"]
}

extension ProviderID {
    public static let fcm: ProviderID = "fcm"
}

extension Target {
    public static func fcm(
        _ bindingId: String, app: String? = nil, token: String, platform: String? = nil,
        pushType: String? = nil
    ) -> Target {
        Target(bindingId: bindingId, provider: .fcm, app: app, details: FCMTarget(token: token, platform: platform, pushType: pushType))
    }
}

/// How jobs write FCM targets, natively and as SIP bindings.
public struct FCMTargetFormat: TargetFormat {
    public let provider = ProviderID.fcm

    /// `overrides.fcm.message` is merged into the message; its recipient stays the target's token.
    public func checkOverride(_ override: JSONValue) throws(JobRejection) {
        try checkOverride(
            override, members: ["message"], protected: [["message", "token"], ["message", "topic"], ["message", "condition"]],
            because: "the message goes to the target's token")
    }

    public init() {}

    public func decode(_ fields: inout Fields) throws(JobRejection) -> any TargetDetails {
        guard let token = try fields.optionalString("token", maximumLength: 4096), !token.isEmpty else {
            throw fields.invalid("token is required for fcm")
        }
        // v1 accepted any platform name; only these three choose a block (others leave the platform unknown).
        return FCMTarget(
            token: token, platform: try fields.optionalString("platform", maximumLength: 16),
            pushType: try fields.optionalString("pushType", maximumLength: 32))
    }

    public var rfc8599Providers: [String] { ["fcm"] }
    public var xmpushProviders: [(letter: String, meaning: String)] { [("a", "Android FCM"), ("j", "iOS FCM"), ("w", "FCM web token")] }

    /// `w:` is an FCM web token only without subscription keys (with them it is a Web Push subscription).
    public func claims(_ binding: SIPBinding, _ fields: Fields) -> Bool {
        binding.notation != .xmpush || binding.provider != "w" || !fields.has("keys")
    }

    /// - RFC 8599 `fcm`: `pn-param` is the Firebase project id (which selects the app).
    /// - X-MPUSH `a` (Android), `j` (iOS) and `w` without keys (an FCM web token, the seed's
    ///   `pushnotification_web=0`): the package is the project id or one of its package names.
    public func decode(_ binding: SIPBinding, _ fields: inout Fields) throws(JobRejection) -> (app: String?, details: any TargetDetails) {
        switch binding.notation {
        case .rfc8599:
            guard let project = binding.parameter else { throw binding.invalid("pn-param (the Firebase project id) is required for fcm") }
            return (project, FCMTarget(token: binding.token))
        case .xmpush:
            guard let project = binding.parameter else {
                throw binding.invalid("the package (Firebase project id or package name) is empty")
            }
            let platform =
                switch binding.provider {
                case "a": "android"
                case "j": "ios"
                default: "web"
                }
            return (project, FCMTarget(token: binding.token, platform: platform))
        }
    }
}
