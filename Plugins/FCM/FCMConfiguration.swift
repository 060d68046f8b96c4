import PushHTTP

public struct FCMConfiguration: Sendable {
    public static let defaultEndpoint = "https://fcm.googleapis.com"

    public var accounts: [ServiceAccount]
    /// The project serving targets without `app`.
    public var defaultProjectId: String?
    /// Base URL of the send API; overridable for tests.
    public var endpoint: String
    /// Trust for the send API and the token endpoint (a sandbox CA); nil = the system store.
    public var caFile: String?
    public var timeout: Duration

    public init(accounts: [ServiceAccount], defaultProjectId: String? = nil, endpoint: String = defaultEndpoint,
                caFile: String? = nil, timeout: Duration = .seconds(10)) {
        self.accounts = accounts
        self.defaultProjectId = defaultProjectId ?? (accounts.count == 1 ? accounts[0].projectId : nil)
        self.endpoint = endpoint
        self.caFile = caFile
        self.timeout = timeout
    }
}
