import PushCore
import PushHTTP

/// One APNs app (bundle id) and how it authenticates.
public struct APNsApp: Sendable {
    public enum Authentication: Sendable {
        /// Token auth: a `.p8` signing key, its 10-character key id and the team id.
        case token(keyFile: String, keyId: String, teamId: String)
        /// Certificate auth: the app's push certificate as TLS client certificate.
        case certificate(TLSOptions)
    }

    public var bundleId: String
    public var authentication: Authentication
    /// A VoIP Services certificate beside the app's alert credentials (the push-proxy seed keeps both for
    /// one app): VoIP pushes use it; every other push uses `authentication`.
    public var voipAuthentication: Authentication?
    /// Replaces the bundle id in the derived `apns-topic` (Mizu `pushnotification_topic`), e.g. for MDM; each push type
    /// keeps its suffix, so calls still go to `<topic>.voip` ("Sending notification requests to APNs", `apns-topic`).
    public var topicOverride: String?
    /// Push type of cancels to targets that name none: `alert` (default: iOS 13+ ends an app that
    /// gets a VoIP push without reporting a call, as the Mizu seed warns) or `voip` (apps whose
    /// PushKit handler reports and ends the call).
    public var cancelPushType: APNsPushType
    /// The environment of targets that name none (X-MPUSH `d:` or no prefix included).
    public var defaultEnvironment: APNsEnvironment
    /// The app's X-MPUSH `i:` tokens are PushKit (VoIP) tokens, as in the Mizu seed's iOS guide: a push to
    /// one that would not go as `voip` is not sent.
    public var xmpushTokensArePushKit: Bool

    /// Push types a cancel may default to.
    public static let cancelPushTypes: [APNsPushType] = [.voip, .alert]
    /// The seed's `pushnotification_apnspushtype` default: voip for calls, alert for everything else.
    public static let defaultCancelPushType = APNsPushType.alert

    /// Some push type of this app goes with a client certificate.
    var hasCertificate: Bool {
        [authentication, voipAuthentication].contains { if case .certificate = $0 { true } else { false } }
    }

    public init(
        bundleId: String, authentication: Authentication, topicOverride: String? = nil,
        cancelPushType: APNsPushType = defaultCancelPushType, defaultEnvironment: APNsEnvironment = .production,
        xmpushTokensArePushKit: Bool = false
    ) {
        self.bundleId = bundleId
        self.authentication = authentication
        self.topicOverride = topicOverride
        self.cancelPushType = cancelPushType
        self.defaultEnvironment = defaultEnvironment
        self.xmpushTokensArePushKit = xmpushTokensArePushKit
    }

    /// The credentials a push of `pushType` is sent with.
    public func authentication(for pushType: APNsPushType) -> Authentication {
        pushType == .voip ? voipAuthentication ?? authentication : authentication
    }

    /// The environment a push to `target` goes to: its own, else the app's default.
    public func environment(of target: Target) -> APNsEnvironment {
        target.details(APNsTarget.self)?.environment.flatMap(APNsEnvironment.init(rawValue:)) ?? defaultEnvironment
    }
}

/// Apple's two environments: separate hosts, and a token or certificate may be valid in one only.
public enum APNsEnvironment: String, Sendable, CaseIterable {
    case production, sandbox
}

public struct APNsConfiguration: Sendable {
    /// Base URLs; overridable for staging and tests.
    public var productionURL: String
    public var sandboxURL: String
    /// Trust for the endpoints (a sandbox CA); nil = the system store. Read once, with the
    /// configuration (`CredentialFile`): the init reads the path it is given; a plugin sets the file it checked.
    public var caFile: CredentialFile?
    public var apps: [APNsApp]
    /// The app serving targets without `app`.
    public var defaultBundleId: String?
    public var timeout: Duration
    /// How long its connections live idle, and their keepalive (`PUSH_APNS_IDLE_CONNECTION_S`).
    public var connectionLifetime = APNsConfiguration.defaultConnectionLifetime

    /// Apple: "Keep your connections with APNs open across multiple notifications; don't repeatedly open and close
    /// connections. APNs treats rapid connection and disconnection as a denial-of-service attack", and a connection
    /// may stay open for hours or days with an HTTP/2 PING after an hour of inactivity ([Sending notification requests
    /// to APNs](https://developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns)).
    /// Closed after a day without a request: Apple's own example of a connection fine to open anew is one used once a day.
    /// A PING unanswered within the transport's PING timeout (5 s, as for a request that hears nothing) closes the
    /// connection, and the next request opens a new one.
    public static let defaultConnectionLifetime = HTTPConnectionLifetime(
        maximumIdleTime: .seconds(24 * 3600), keepaliveInterval: .seconds(3600))

    public static let productionHost = "https://api.push.apple.com"
    public static let sandboxHost = "https://api.sandbox.push.apple.com"

    public init(
        apps: [APNsApp], defaultBundleId: String? = nil, productionURL: String = productionHost,
        sandboxURL: String = sandboxHost, caFile: String? = nil, timeout: Duration = .seconds(10)
    ) {
        self.apps = apps
        self.defaultBundleId = defaultBundleId ?? (apps.count == 1 ? apps[0].bundleId : nil)
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.caFile = caFile.map { CredentialFile(reading: $0) }
        self.timeout = timeout
    }
}
