import PushCore

/// A push-proxy target's own fields, as the proxy's `endpointData` entry names them:
/// `{"provider": "proxy", "token"?, "tokenType"?: "fcm" | "apns" | "apnsVoip" | "cookie",
/// "platform"?: "android" | "ios" | "web" | "node", "pushType"?: "im" | "voip"}`.
public struct ProxyTarget: TargetDetails, Equatable {
    public var token: String?
    public var tokenType: String?
    public var platform: String?
    public var pushType: String?

    public init(token: String? = nil, tokenType: String? = nil, platform: String? = nil, pushType: String? = nil) {
        self.token = token
        self.tokenType = tokenType
        self.platform = platform
        self.pushType = pushType
    }

    public var deviceAddress: String? { token }
}

extension ProviderID {
    public static let proxy: ProviderID = "proxy"
}

extension Target {
    public static func proxy(
        _ bindingId: String, app: String? = nil, token: String? = nil, tokenType: String? = nil,
        platform: String? = nil, pushType: String? = nil
    ) -> Target {
        Target(
            bindingId: bindingId, provider: .proxy, app: app,
            details: ProxyTarget(token: token, tokenType: tokenType, platform: platform, pushType: pushType))
    }
}

/// How jobs write push-proxy targets.
public struct ProxyTargetFormat: TargetFormat {
    public let provider = ProviderID.proxy
    static let pushTypes = ["im", "voip"]
    static let tokenTypes = ["fcm", "apns", "apnsVoip", "cookie"]
    static let platforms = ["android", "ios", "web", "node"]

    public init() {}

    public func decode(_ fields: inout Fields) throws(JobRejection) -> any TargetDetails {
        let details = ProxyTarget(
            token: try fields.optionalString("token", maximumLength: 4096),
            tokenType: try fields.optionalChoice("tokenType", of: Self.tokenTypes),
            platform: try fields.optionalChoice("platform", of: Self.platforms),
            pushType: try fields.optionalChoice("pushType", of: Self.pushTypes))
        if details.tokenType != nil, details.token == nil { throw fields.invalid("token is required when tokenType is present") }
        return details
    }
}
