/// Operator-written payload templates (Mizu's `fcmmessage.txt` / `pushkitmessage.txt`,
/// made safe): the plugin API side. Plugins ask for a rendered payload by
/// (provider, app, kind) and fall back to their built-in payload when there is none.
public protocol PayloadTemplates: Sendable {
    /// nil: no template covers this key, build the built-in payload. Otherwise the
    /// rendered document (already checked to be JSON of the provider's shape) or why not.
    /// `keywords` is worked out only when a template covers the key.
    func render(_ key: PayloadTemplateKey, keywords: @autoclosure () -> PayloadKeywords) -> Result<RenderedPayload, PayloadTemplateFailure>?
}

/// No templates: every plugin builds its built-in payload.
public struct BuiltInPayloads: PayloadTemplates {
    public init() {}
    public func render(_ key: PayloadTemplateKey, keywords: @autoclosure () -> PayloadKeywords) -> Result<
        RenderedPayload, PayloadTemplateFailure
    >? { nil }
}

/// Which template renders a payload.
public struct PayloadTemplateKey: Hashable, Sendable, CustomStringConvertible {
    public var provider: ProviderID
    /// APNs bundle id, FCM project id.
    public var app: String
    public var kind: JobKind

    public init(provider: ProviderID, app: String, kind: JobKind) {
        self.provider = provider
        self.app = app
        self.kind = kind
    }

    public var description: String { "\(provider.rawValue)/\(app)/\(kind.rawValue)" }
}

public struct RenderedPayload: Sendable, Equatable {
    public var document: JSONValue
    /// The template file it came from, for logs and failures.
    public var source: String

    public init(document: JSONValue, source: String) {
        self.document = document
        self.source = source
    }
}

public struct PayloadTemplateFailure: Error, Equatable, CustomStringConvertible {
    public var source: String
    public var message: String

    public init(source: String, message: String) {
        self.source = source
        self.message = message
    }

    public var description: String { "\(source): \(message)" }
}

/// What a provider's templates (`PUSH_TEMPLATES_DIR/<provider>/…`) must render: the plugin's rules.
/// A provider without one has no templates.
public protocol TemplateShape: Sendable {
    var provider: ProviderID { get }
    /// nil when `document` can be sent to the provider; else the rule it breaks.
    func problem(in document: JSONValue) -> String?
    /// A target of this provider for the sample rendering every template gets at start-up and on reload.
    func sampleTarget(app: String) -> Target
}

/// The keyword values a template sees, after Mizu's message-file keywords, taken from the
/// job, its data and the binding. Values are raw text here; the renderer escapes them.
public struct PayloadKeywords: Sendable, Equatable {
    public private(set) var values: [String: String]
    /// The job's `data`, as `{{data.<key>}}`.
    public let data: [String: String]

    /// - Parameter app: the app the plugin resolved (bundle id, project id): `PACKAGE`.
    public init(delivery: Delivery, app: String) {
        let job = delivery.job, target = delivery.target, data = job.data
        // `caller`, not `from`: FCM reserves the data key `from` (Firebase's Message.data reference).
        let from = data["caller"] ?? data["from"] ?? ""
        let fromUsername = data["callerUsername"] ?? data["fromUsername"] ?? from
        var values: [String: String] = [
            "PACKAGE": app,
            "TOKEN": target.details.deviceAddress ?? "",
            "TO": data["to"] ?? job.userId,
            "TOUSERNAME": data["to"] ?? job.userId,
            "TYPE": String(job.kind.mizuType),
            "FROM": from,
            "FROMUSERNAME": fromUsername,
            "FROMDISPLAYNAME": data["callerDisplayName"] ?? data["fromDisplayName"] ?? from,
            "CALLID": data["callId"] ?? "",
            "PRIORITY": job.priority.rawValue,
            "NPRIORITY": job.kind == .call ? "PRIORITY_MAX" : "PRIORITY_HIGH",
            "APRIORITY": String(Self.apnsPriority(job)),
            "APNSEXPIRATION": job.deadline.isNowOrNever ? "0" : String(job.deadline.expiresAt / 1000),
            "TTLNUM": String(delivery.remainingTTLSeconds),
            "PUSHTYPE": Self.defaultPushType(job),
            "SOUND": job.notification?.sound?.name ?? "",
            "MSG": job.notification?.body ?? data["msg"] ?? "",
            "TITLE": job.notification?.title ?? (job.kind == .call && !fromUsername.isEmpty ? "Call from \(fromUsername)" : ""),
            "BODY": job.notification?.body ?? (job.kind == .call && !from.isEmpty ? "Incoming VoIP call from \(from)" : ""),
            "JOBID": job.id,
            "USERID": job.userId,
            "BINDINGID": target.bindingId,
            "KIND": job.kind.rawValue,
        ]
        values["MESSAGE"] = values["BODY"]
        if let badge = job.notification?.badge { values["BADGE"] = String(badge) }
        if let collapseKey = job.collapseKey { values["COLLAPSEKEY"] = collapseKey }
        self.values = values
        self.data = data
    }

    /// Replaces one keyword's value (a plugin knows the push type it resolved, for example: `PUSHTYPE`
    /// is otherwise Mizu's default by kind).
    public mutating func set(_ keyword: String, _ value: String) { values[keyword] = value }

    /// Every keyword, for the keyword table in docs/migration.md and the start-up check.
    public static let names = [
        "PACKAGE", "TOKEN", "TO", "TOUSERNAME", "TYPE", "FROM", "FROMUSERNAME", "FROMDISPLAYNAME",
        "CALLID", "PRIORITY", "NPRIORITY", "APRIORITY", "APNSEXPIRATION", "TTLNUM", "PUSHTYPE", "SOUND", "MSG",
        "MESSAGE", "TITLE", "BODY", "BADGE", "COLLAPSEKEY", "JOBID", "USERID", "BINDINGID", "KIND",
    ]

    /// Mizu's rule: calls and cancels 10, wake-ups 5, others by the job's priority; a message that
    /// shows nothing is a background push, which Apple accepts at 5 only.
    static func apnsPriority(_ job: Job) -> Int {
        switch job.kind {
        case .call, .cancel: 10
        case .wake: 5
        case .message, .custom: job.priority == .high && job.hasVisibleNotification ? 10 : 5
        }
    }

    static func defaultPushType(_ job: Job) -> String {
        switch job.kind {
        case .call, .cancel: "voip"
        case .message, .custom: job.hasVisibleNotification ? "alert" : "background"
        case .wake: "background"
        }
    }
}

extension JobKind {
    /// Mizu's TYPE code: call 0, message (chat) 1, cancel 2, custom 3, wake (refresh the registration) 4.
    public var mizuType: Int { JobKind.allCases.firstIndex(of: self)! }
}

extension RenderedPayload {
    /// The document's bytes without the members named (e.g. Mizu's `headers`).
    public func bytes(removing members: Set<String> = []) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        if case .object(let all) = document {
            writer.value(.object(all.filter { !members.contains($0.key) }))
        } else {
            writer.value(document)
        }
        return writer.bytes
    }
}
