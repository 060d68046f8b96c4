import PushCore

/// An HMS target's own field: `{"provider": "hms", "app": "<HMS app id>", "token": "<push token>"}`.
/// `app` picks the app whose credentials send the push (absent: `PUSH_HMS_APP_ID`, or the only app).
/// SIP bindings have no notation for Huawei tokens (RFC 8599 names no HMS `pn-provider`, X-MPUSH no
/// letter), so HMS targets are written natively only.
public struct HMSTarget: TargetDetails, Equatable {
    /// Huawei's push token of the app instance (`message.token[0]`).
    public var token: String

    public init(token: String) {
        self.token = token
    }

    public var deviceAddress: String? { token }
}

extension ProviderID {
    public static let hms: ProviderID = "hms"
}

extension Target {
    public static func hms(_ bindingId: String, app: String? = nil, token: String) -> Target {
        Target(bindingId: bindingId, provider: .hms, app: app, details: HMSTarget(token: token))
    }
}

/// How jobs write HMS targets.
public struct HMSTargetFormat: TargetFormat {
    public let provider = ProviderID.hms

    /// `overrides.hms.message` is merged into the message; its recipient stays the target's token.
    public func checkOverride(_ override: JSONValue) throws(JobRejection) {
        try checkOverride(
            override, members: ["message"], protected: [["message", "token"], ["message", "topic"], ["message", "condition"]],
            because: "the message goes to the target's token")
    }
    /// Huawei documents no token length; FCM's 4096 bytes bounds what a job may carry.
    public static let longestToken = 4096

    public init() {}

    public func decode(_ fields: inout Fields) throws(JobRejection) -> any TargetDetails {
        HMSTarget(token: try fields.requiredString("token", maximumLength: Self.longestToken))
    }
}
