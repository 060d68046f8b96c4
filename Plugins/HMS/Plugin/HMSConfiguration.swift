import PushHTTP

/// Huawei Push Kit (HMS Core) v1: one OAuth 2.0 client per app.
public struct HMSConfiguration: Sendable {
    public static let defaultTokenURL = "https://oauth-login.cloud.huawei.com/oauth2/v3/token"
    public static let defaultEndpoint = "https://push-api.cloud.huawei.com"

    /// Huawei's message classification standard ("消息分类标准"): the service-and-communication categories and
    /// MARKETING, the values a notification message's `android.category` may take (PLAY_VOICE is for data messages).
    public static let notificationCategories: Set<String> = [
        "IM", "VOIP", "SUBSCRIPTION", "TRAVEL", "HEALTH", "WORK", "ACCOUNT", "EXPRESS", "FINANCE", "DEVICE_REMINDER",
        "SYSTEM_REMINDER", "MAIL", "MARKETING",
    ]
    /// Instant messaging: this worker serves chat and VoIP services, whose messages are chat messages.
    public static let defaultCategory = "IM"

    /// One app and its OAuth 2.0 client. Printing it never shows the secret.
    public struct App: Sendable, CustomStringConvertible {
        public var appId: String
        /// The OAuth 2.0 client id; Huawei's client id is the app id unless the console says otherwise.
        public var clientId: String
        public var clientSecret: String
        /// Where the secret was read from (for the start-up summary).
        public var clientSecretFile: String
        /// The `android.category` of the app's notification messages (Huawei's self-classification, one of
        /// `notificationCategories`); calls and cancels are VOIP data messages whatever it says.
        public var category: String

        public init(
            appId: String, clientId: String? = nil, clientSecret: String, clientSecretFile: String,
            category: String = HMSConfiguration.defaultCategory
        ) {
            self.appId = appId
            self.clientId = clientId ?? appId
            self.clientSecret = clientSecret
            self.clientSecretFile = clientSecretFile
            self.category = category
        }

        public var description: String {
            "hms app \(appId): client \(clientId), secret from \(clientSecretFile), notification category \(category)"
        }
    }

    public var apps: [App]
    /// The app serving targets without `app`.
    public var defaultAppId: String?
    public var tokenURL: String
    /// Base URL of the send API.
    public var endpoint: String
    /// Trust for the send API and the token endpoint (a sandbox CA); nil = the system store. Read once, with the
    /// configuration (`CredentialFile`): the init reads the path it is given; a plugin sets the file it checked.
    public var caFile: CredentialFile?
    public var timeout: Duration

    public init(
        apps: [App], defaultAppId: String? = nil, tokenURL: String = defaultTokenURL, endpoint: String = defaultEndpoint,
        caFile: String? = nil, timeout: Duration = .seconds(10)
    ) {
        self.apps = apps
        self.defaultAppId = defaultAppId ?? (apps.count == 1 ? apps.first?.appId : nil)
        self.tokenURL = tokenURL
        self.endpoint = endpoint
        self.caFile = caFile.map { CredentialFile(reading: $0) }
        self.timeout = timeout
    }
}
