/// A notification job as consumed from the jobs topic (contract v1, see docs/job.schema.json).
///
/// Its fields live in one shared, immutable box: a job is handed through many
/// async calls and tasks, and each copy of the fields themselves (over 500 bytes, a retain per
/// string and array) would be stored in every suspended frame that holds the job. A change to
/// a field makes a new box.
public struct Job: Sendable, Equatable {
    private struct Fields: Sendable, Equatable {
        var id: String
        var createdAt: Int64
        var ttl: Int64
        var kind: JobKind
        var priority: JobPriority
        var userId: String
        var collapseKey: String?
        var dedupeKey: String?
        var notification: Notification?
        var data: [String: String]
        var body: String?
        var overrides: [ProviderID: JSONValue]
        /// Out of line: rare, and about 120 bytes inline.
        var liveActivity: Indirect<LiveActivity>?
        var targets: [Target]
    }

    private var box: Indirect<Fields>

    public var id: String {
        get { box.value.id }
        set { box = box.changed { $0.id = newValue } }
    }
    /// Milliseconds since the Unix epoch.
    public var createdAt: Int64 {
        get { box.value.createdAt }
        set { box = box.changed { $0.createdAt = newValue } }
    }
    /// Seconds the job stays valid after `createdAt`; 0 means "now or never".
    public var ttl: Int64 {
        get { box.value.ttl }
        set { box = box.changed { $0.ttl = newValue } }
    }
    public var kind: JobKind {
        get { box.value.kind }
        set { box = box.changed { $0.kind = newValue } }
    }
    public var priority: JobPriority {
        get { box.value.priority }
        set { box = box.changed { $0.priority = newValue } }
    }
    public var userId: String {
        get { box.value.userId }
        set { box = box.changed { $0.userId = newValue } }
    }
    public var collapseKey: String? {
        get { box.value.collapseKey }
        set { box = box.changed { $0.collapseKey = newValue } }
    }
    public var dedupeKey: String? {
        get { box.value.dedupeKey }
        set { box = box.changed { $0.dedupeKey = newValue } }
    }
    public var notification: Notification? {
        get { box.value.notification }
        set { box = box.changed { $0.notification = newValue } }
    }
    public var data: [String: String] {
        get { box.value.data }
        set { box = box.changed { $0.data = newValue } }
    }
    public var body: String? {
        get { box.value.body }
        set { box = box.changed { $0.body = newValue } }
    }
    /// Per-provider blocks merged last into what the provider's plugin built (`overrides`), by provider name.
    public var overrides: [ProviderID: JSONValue] {
        get { box.value.overrides }
        set { box = box.changed { $0.overrides = newValue } }
    }
    public var liveActivity: LiveActivity? {
        get { box.value.liveActivity?.value }
        set { box = box.changed { $0.liveActivity = newValue.map(Indirect.init) } }
    }
    public var targets: [Target] {
        get { box.value.targets }
        set { box = box.changed { $0.targets = newValue } }
    }

    public init(
        id: String, createdAt: Int64, ttl: Int64, kind: JobKind, priority: JobPriority, userId: String,
        collapseKey: String? = nil, dedupeKey: String? = nil, notification: Notification? = nil,
        data: [String: String] = [:], body: String? = nil, overrides: [ProviderID: JSONValue] = [:],
        liveActivity: LiveActivity? = nil, targets: [Target]
    ) {
        box = Indirect(
            Fields(
                id: id, createdAt: createdAt, ttl: ttl, kind: kind, priority: priority, userId: userId,
                collapseKey: collapseKey, dedupeKey: dedupeKey, notification: notification, data: data, body: body,
                overrides: overrides, liveActivity: liveActivity.map(Indirect.init), targets: targets))
    }

    /// This decoding of the job: each consumed Kafka message (and each claimed retry entry) decodes to an instance of
    /// its own, which every copy of the value shares and a change to a field replaces. Two jobs in flight that reuse an
    /// `id` are two instances. Unique among the jobs alive (a value that holds it keeps it alive).
    public var instance: ObjectIdentifier { ObjectIdentifier(box) }

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

    /// `none`: the provider of a target that names none this worker links — an X-MPUSH value of just `null`, or a target
    /// refused before its provider was known (`pn-provider=gcm`, `"provider": "pager"`). The outcome says `none` rather
    /// than the producer's text, which never becomes a metric label.
    public static let unnamed: ProviderID = "none"
}

/// One device binding of the job's user: the fields every provider shares, and the provider's own
/// part (`details`), which only its plugin decodes and reads.
public struct Target: Sendable, Equatable {
    /// In one shared, immutable box, as `Job`'s: a target is handed through every step of its delivery, and a copy of the
    /// fields themselves (about 120 bytes, a retain per string and the details) would sit in each suspended frame.
    private struct Fields: Sendable, Equatable {
        var bindingId: String
        var provider: ProviderID
        var app: String?
        var details: any TargetDetails
        var isUnbound: Bool
        var refusal: JobRejection?

        static func == (lhs: Fields, rhs: Fields) -> Bool {
            lhs.bindingId == rhs.bindingId && lhs.provider == rhs.provider && lhs.app == rhs.app
                && lhs.isUnbound == rhs.isUnbound && lhs.refusal == rhs.refusal && lhs.details.isEqual(to: rhs.details)
        }
    }

    private var box: Indirect<Fields>

    public var bindingId: String {
        get { box.value.bindingId }
        set { box = box.changed { $0.bindingId = newValue } }
    }
    public var provider: ProviderID {
        get { box.value.provider }
        set { box = box.changed { $0.provider = newValue } }
    }
    /// The provider's name for the app the device installed (a bundle id, a project id, …), if it has one.
    public var app: String? {
        get { box.value.app }
        set { box = box.changed { $0.app = newValue } }
    }
    public var details: any TargetDetails {
        get { box.value.details }
        set { box = box.changed { $0.details = newValue } }
    }
    /// The device unbound itself (RFC 8599 `pn-prid=null`, X-MPUSH token `null`): nothing
    /// is sent, the outcome is `rejected` + `remove_binding`.
    public var isUnbound: Bool {
        get { box.value.isUnbound }
        set { box = box.changed { $0.isUnbound = newValue } }
    }
    /// Why this target cannot be understood (its provider unknown, its binding string or token malformed): nothing is
    /// sent, its outcome is `rejected` + `none` with this reason, and the job's other targets go on. nil for a target
    /// that decoded. Such a target has its `bindingId`, the provider it named when this worker links it (else
    /// `ProviderID.unnamed`), and no app or details.
    public var refusal: JobRejection? {
        get { box.value.refusal }
        set { box = box.changed { $0.refusal = newValue } }
    }

    public init(
        bindingId: String, provider: ProviderID, app: String? = nil, details: any TargetDetails = NoTargetDetails(),
        isUnbound: Bool = false, refusal: JobRejection? = nil
    ) {
        box = Indirect(
            Fields(bindingId: bindingId, provider: provider, app: app, details: details, isUnbound: isUnbound, refusal: refusal))
    }

    /// Whether a provider is asked to deliver to it: neither unbound nor refused.
    public var isDeliverable: Bool { !box.value.isUnbound && box.value.refusal == nil }

    /// The provider's part as its plugin's type; nil for a target of another provider.
    public func details<Details: TargetDetails>(_ type: Details.Type) -> Details? { box.value.details as? Details }
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
