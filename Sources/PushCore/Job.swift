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
    /// Per-provider blocks merged last into what the provider's plugin built (`overrides`), by provider name.
    public var overrides: [ProviderID: JSONValue]
    public var liveActivity: LiveActivity?
    public var targets: [Target]

    public init(id: String, createdAt: Int64, ttl: Int64, kind: JobKind, priority: JobPriority, userId: String,
                collapseKey: String? = nil, dedupeKey: String? = nil, notification: Notification? = nil,
                data: [String: String] = [:], body: String? = nil, overrides: [ProviderID: JSONValue] = [:],
                liveActivity: LiveActivity? = nil, targets: [Target]) {
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
        self.overrides = overrides
        self.liveActivity = liveActivity
        self.targets = targets
    }

    public var deadline: Deadline { Deadline(createdAt: createdAt, ttlSeconds: ttl) }

    /// Whether the push shows the user anything: a notification text, sound or badge. Apple devices get
    /// a push that shows nothing as a background push (`content-available: 1`, priority 5).
    public var hasVisibleNotification: Bool { notification?.isVisible ?? false }
}

/// What the push is for (the Mizu TYPE codes 0–4, in order); drives provider defaults.
public enum JobKind: String, Sendable, CaseIterable {
    case call, message, cancel, custom, wake
}

public enum JobPriority: String, Sendable, CaseIterable {
    case high, normal
}

/// A provider's name as the job contract writes it (`"provider": "…"`). Each plugin declares its own.
public struct ProviderID: RawRepresentable, Hashable, Comparable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }

    public var description: String { rawValue }

    public static func < (lhs: ProviderID, rhs: ProviderID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One device binding of the job's user: the fields every provider shares, and the provider's own
/// part (`details`), which only its plugin decodes and reads.
public struct Target: Sendable, Equatable {
    public var bindingId: String
    public var provider: ProviderID
    /// The provider's name for the app the device installed (a bundle id, a project id, …), if it has one.
    public var app: String?
    public var details: any TargetDetails
    /// The device unbound itself (RFC 8599 `pn-prid=null`, X-MPUSH token `null`): nothing
    /// is sent, the outcome is `rejected` + `remove_binding`.
    public var isUnbound: Bool

    public init(bindingId: String, provider: ProviderID, app: String? = nil, details: any TargetDetails = NoTargetDetails(),
                isUnbound: Bool = false) {
        self.bindingId = bindingId
        self.provider = provider
        self.app = app
        self.details = details
        self.isUnbound = isUnbound
    }

    /// The provider's part as its plugin's type; nil for a target of another provider.
    public func details<Details: TargetDetails>(_ type: Details.Type) -> Details? { details as? Details }

    public static func == (lhs: Target, rhs: Target) -> Bool {
        lhs.bindingId == rhs.bindingId && lhs.provider == rhs.provider && lhs.app == rhs.app
            && lhs.isUnbound == rhs.isUnbound && lhs.details.isEqual(to: rhs.details)
    }
}

/// The provider-owned part of a target, decoded and checked by the plugin's `TargetFormat`.
public protocol TargetDetails: Sendable {
    /// The device's address at its provider (a token, an endpoint): the `TOKEN` template keyword.
    var deviceAddress: String? { get }
    func isEqual(to other: any TargetDetails) -> Bool
}

extension TargetDetails where Self: Equatable {
    public func isEqual(to other: any TargetDetails) -> Bool { (other as? Self) == self }
}

/// A target with no provider-owned fields (an unbound binding, a provider that needs none).
public struct NoTargetDetails: TargetDetails, Equatable {
    public init() {}
    public var deviceAddress: String? { nil }
}

extension Job {
    /// The job as a small JSON document for payloads that carry it whole (push-proxy body,
    /// Web Push message): `{"jobId", "kind", "notification"?: {title, body, sound, badge, …}, "data"?: {…}}`;
    /// the notification carries the fields the job gave, under their contract names.
    public func summaryJSON() -> [UInt8] {
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.member("jobId", id)
        writer.member("kind", kind.rawValue)
        if let notification {
            writer.key("notification")
            notification.writeSummary(into: &writer)
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
