import PushCore
import PushHTTP

public struct FCMConfiguration: Sendable {
    public static let defaultEndpoint = "https://fcm.googleapis.com"

    public var accounts: [ServiceAccount]
    /// The project serving targets without `app`.
    public var defaultProjectId: String?
    /// App package names (Android package, bundle id) that name a project, as the Mizu seed's X-MPUSH
    /// `a:<package>:…` bindings and `fcm_app` settings do.
    public var packages: [String: String]
    /// Bundle ids of iOS apps (each also in `packages`): a target whose `app` is one of them holds an iOS token even when
    /// it does not say its platform, as RFC 8599 `fcm` bindings cannot (`pn-param` is the only place they name an app).
    public var iosPackages: Set<String> = []
    /// Which rendered templates lose their `notification` blocks (Mizu's `fcm_removenotification`).
    public var removeNotification: NotificationRemoval = .dataOnlyKinds
    /// Base URL of the send API; overridable for tests.
    public var endpoint: String
    /// Trust for the send API and the token endpoint (a sandbox CA); nil = the system store. Read once, with the
    /// configuration (`CredentialFile`): the init reads the path it is given; a plugin sets the file it checked.
    public var caFile: CredentialFile?
    public var timeout: Duration

    public init(
        accounts: [ServiceAccount], defaultProjectId: String? = nil, packages: [String: String] = [:],
        endpoint: String = defaultEndpoint, caFile: String? = nil, timeout: Duration = .seconds(10)
    ) {
        self.accounts = accounts
        self.packages = packages
        self.defaultProjectId = defaultProjectId ?? (accounts.count == 1 ? accounts[0].projectId : nil)
        self.endpoint = endpoint
        self.caFile = caFile.map { CredentialFile(reading: $0) }
        self.timeout = timeout
    }

    /// The project a target's `app` names: a project id, one of the projects' package names, or none (the default project).
    public func projectId(for app: String?) -> String? {
        guard let app else { return defaultProjectId }
        return packages[app] ?? app
    }

    /// The platform of a target's token: what the target says (`platform`, a VoIP `pushType`), else `ios` when its
    /// app is one of `iosPackages`; nil when unknown (no `apns` or `webpush` block: Android's message).
    public func platform(of target: Target) -> String? {
        FCMMessage.platform(of: target) ?? target.app.flatMap { iosPackages.contains($0) ? "ios" : nil }
    }
}

/// Mizu's `fcm_removenotification`: a push with a `notification` block is shown by the system and does not reach
/// the app's code, so a call could not ring. Applied to operator templates (built-in payloads are data-only for
/// calls, cancels and wake-ups anyway): `message.notification` and `message.android.notification` are removed.
public enum NotificationRemoval: String, Sendable, CaseIterable {
    /// Calls, cancels and wake-ups (the seed's 1, its usual auto value): kept for messages and custom pushes.
    case dataOnlyKinds = "calls"
    /// Never (the seed's 0).
    case never
    /// Every push (the seed's 2).
    case always

    public func removes(_ kind: JobKind) -> Bool {
        switch self {
        case .dataOnlyKinds: FCMMessage.isDataOnly(kind)
        case .never: false
        case .always: true
        }
    }
}
