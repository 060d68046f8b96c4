/// A notification job as consumed from the jobs topic (contract v1, see docs/job.schema.json).
public struct Job: Sendable, Equatable {
    public var id: String
    /// Milliseconds since the Unix epoch.
    public var createdAt: Int64
    /// Seconds the job stays valid after `createdAt`; 0 means "now or never".
    public var ttl: Int64
    public var kind: JobKind
    public var priority: JobPriority
    public var userId: String
    public var collapseKey: String?
    public var dedupeKey: String?
    public var notification: Notification?
    public var data: [String: String]
    public var body: String?
    public var targets: [Target]

    public init(id: String, createdAt: Int64, ttl: Int64, kind: JobKind, priority: JobPriority, userId: String,
                collapseKey: String? = nil, dedupeKey: String? = nil, notification: Notification? = nil,
                data: [String: String] = [:], body: String? = nil, targets: [Target]) {
        self.id = id
        self.createdAt = createdAt
        self.ttl = ttl
        self.kind = kind
        self.priority = priority
        self.userId = userId
        self.collapseKey = collapseKey
        self.dedupeKey = dedupeKey
        self.notification = notification
        self.data = data
        self.body = body
        self.targets = targets
    }

    public var deadline: Deadline { Deadline(createdAt: createdAt, ttlSeconds: ttl) }

    /// Whether the push shows the user anything: a notification title, body, sound or badge. Apple
    /// devices get a push that shows nothing as a background push (`content-available: 1`, priority 5).
    public var hasVisibleNotification: Bool {
        guard let notification else { return false }
        return notification.title != nil || notification.body != nil || notification.sound != nil || notification.badge != nil
    }
}

/// What the push is for (the Mizu TYPE codes 0–4, in order); drives provider defaults.
public enum JobKind: String, Sendable, CaseIterable {
    case call, message, cancel, custom, wake
}

public enum JobPriority: String, Sendable, CaseIterable {
    case high, normal
}

public struct Notification: Sendable, Equatable {
    public var title: String?
    public var body: String?
    public var sound: String?
    public var badge: Int64?

    public init(title: String? = nil, body: String? = nil, sound: String? = nil, badge: Int64? = nil) {
        self.title = title
        self.body = body
        self.sound = sound
        self.badge = badge
    }
}

/// The providers the job contract knows. A provider plugin registers under one of these.
public enum ProviderID: String, Sendable, CaseIterable, Hashable {
    case apns, fcm, webpush, proxy
}

/// One device binding of the job's user.
public struct Target: Sendable, Equatable {
    public var bindingId: String
    public var provider: ProviderID
    public var app: String?
    public var token: String?
    /// APNs: `production` or `sandbox`.
    public var environment: String?
    public var pushType: String?
    /// Web Push subscription endpoint.
    public var endpoint: String?
    public var keys: WebPushKeys?
    /// Proxy: `fcm`, `apns`, `apnsVoip` or `cookie`.
    public var tokenType: String?
    /// Proxy: `android`, `ios`, `web` or `node`; FCM: `android`, `ios` or `web`.
    public var platform: String?
    /// The device unbound itself (RFC 8599 `pn-prid=null`, X-MPUSH token `null`): nothing
    /// is sent, the outcome is `rejected` + `remove_binding`.
    public var isUnbound: Bool

    public init(bindingId: String, provider: ProviderID, app: String? = nil, token: String? = nil,
                environment: String? = nil, pushType: String? = nil, endpoint: String? = nil,
                keys: WebPushKeys? = nil, tokenType: String? = nil, platform: String? = nil, isUnbound: Bool = false) {
        self.bindingId = bindingId
        self.provider = provider
        self.app = app
        self.token = token
        self.environment = environment
        self.pushType = pushType
        self.endpoint = endpoint
        self.keys = keys
        self.tokenType = tokenType
        self.platform = platform
        self.isUnbound = isUnbound
    }
}

public struct WebPushKeys: Sendable, Equatable {
    public var p256dh: String
    public var auth: String

    public init(p256dh: String, auth: String) {
        self.p256dh = p256dh
        self.auth = auth
    }
}

extension Job {
    /// The job as a small JSON document for payloads that carry it whole (push-proxy body,
    /// Web Push message): `{"jobId", "kind", "notification"?: {title, body, sound, badge}, "data"?: {…}}`.
    public func summaryJSON() -> [UInt8] {
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.member("jobId", id)
        writer.member("kind", kind.rawValue)
        if let notification {
            writer.key("notification")
            writer.beginObject()
            if let title = notification.title { writer.member("title", title) }
            if let body = notification.body { writer.member("body", body) }
            if let sound = notification.sound { writer.member("sound", sound) }
            if let badge = notification.badge { writer.member("badge", badge) }
            writer.endObject()
        }
        if !data.isEmpty {
            writer.key("data")
            writer.beginObject()
            for (key, value) in data.sorted(by: { $0.key < $1.key }) { writer.member(key, value) }
            writer.endObject()
        }
        writer.endObject()
        return writer.bytes
    }
}
