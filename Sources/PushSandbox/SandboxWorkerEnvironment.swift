extension APNsSandboxInstance {
    /// The `PUSH_APNS_*` settings that point a worker at this sandbox with its signing key
    /// (trust for its certificate is the caller's `PUSH_APNS_CA_FILE`).
    public var workerEnvironment: [String: String] {
        [
            "PUSH_APNS_KEY_FILE": keyFile,
            "PUSH_APNS_KEY_ID": Self.keyId,
            "PUSH_APNS_TEAM_ID": Self.teamId,
            "PUSH_APNS_BUNDLE_ID": Self.bundleId,
            "PUSH_APNS_HOST": "localhost",
            "PUSH_APNS_PORT": String(server.port),
        ]
    }
}

extension FCMSandboxInstance {
    /// The `PUSH_FCM_*` settings that point a worker at this sandbox and its token endpoint.
    public var workerEnvironment: [String: String] {
        ["PUSH_FCM_CREDENTIALS_FILE": credentialsFile, "PUSH_FCM_ENDPOINT": server.baseURL]
    }
}
