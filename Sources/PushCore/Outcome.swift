/// A final outcome with its JSON, encoded once: the store records the bytes the outcomes topic then gets.
public struct EncodedOutcome: Sendable {
    public let outcome: Outcome
    public let json: [UInt8]

    public init(_ outcome: Outcome) {
        self.outcome = outcome
        json = outcome.encoded()
    }
}

/// The result for one target of one job, published to the outcomes topic (contract v1,
/// see docs/outcome.schema.json). Key = bindingId.
public struct Outcome: Sendable, Equatable {
    public enum Status: String, Sendable, CaseIterable {
        case delivered, rejected, failed, expired, deduplicated, retrying
    }

    /// What the upstream service should do about the binding or the app.
    public enum Action: String, Sendable, CaseIterable {
        case none
        case removeBinding = "remove_binding"
        case checkCredentials = "check_credentials"
    }

    /// The fields, in one shared immutable box (as `Job`'s): an outcome is handed through async calls, enum payloads
    /// and records, and each copy of its fields inline (184 bytes, a retain per string) took a slot in every async
    /// frame that held one. A change to a field makes a new box.
    private struct Fields: Sendable, Equatable {
        var jobId: String
        var userId: String
        var bindingId: String
        var provider: ProviderID
        var app: String?
        var status: Status
        var reason: String?
        var httpStatus: Int?
        var providerMessageId: String?
        var action: Action
        var invalidSince: Int64?
        var attempts: Int
        var truncated: Bool
        var token: BindingToken?
        var at: Int64
    }

    private var box: Indirect<Fields>

    public var jobId: String {
        get { box.value.jobId }
        set { box = box.changed { $0.jobId = newValue } }
    }
    public var userId: String {
        get { box.value.userId }
        set { box = box.changed { $0.userId = newValue } }
    }
    public var bindingId: String {
        get { box.value.bindingId }
        set { box = box.changed { $0.bindingId = newValue } }
    }
    public var provider: ProviderID {
        get { box.value.provider }
        set { box = box.changed { $0.provider = newValue } }
    }
    public var app: String? {
        get { box.value.app }
        set { box = box.changed { $0.app = newValue } }
    }
    public var status: Status {
        get { box.value.status }
        set { box = box.changed { $0.status = newValue } }
    }
    public var reason: String? {
        get { box.value.reason }
        set { box = box.changed { $0.reason = newValue } }
    }
    public var httpStatus: Int? {
        get { box.value.httpStatus }
        set { box = box.changed { $0.httpStatus = newValue } }
    }
    public var providerMessageId: String? {
        get { box.value.providerMessageId }
        set { box = box.changed { $0.providerMessageId = newValue } }
    }
    public var action: Action {
        get { box.value.action }
        set { box = box.changed { $0.action = newValue } }
    }
    /// Milliseconds since the epoch from which the provider considers the token invalid.
    public var invalidSince: Int64? {
        get { box.value.invalidSince }
        set { box = box.changed { $0.invalidSince = newValue } }
    }
    public var attempts: Int {
        get { box.value.attempts }
        set { box = box.changed { $0.attempts = newValue } }
    }
    /// The alert was shortened to fit the provider's size limit. Written only when true, so that outcomes
    /// without it keep their bytes.
    public var truncated: Bool {
        get { box.value.truncated }
        set { box = box.changed { $0.truncated = newValue } }
    }
    /// Of a binding that holds two tokens (an RFC 8599 `voip&remote` APNs binding), the one the provider said is dead,
    /// while the other may live: the outcome is `rejected` with action `none`, so the upstream drops that half and keeps
    /// the binding. Written only when set.
    public var token: BindingToken? {
        get { box.value.token }
        set { box = box.changed { $0.token = newValue } }
    }
    /// Milliseconds since the epoch when the outcome was decided.
    public var at: Int64 {
        get { box.value.at }
        set { box = box.changed { $0.at = newValue } }
    }

    public init(
        jobId: String, userId: String, bindingId: String, provider: ProviderID, app: String?,
        status: Status, reason: String? = nil, httpStatus: Int? = nil, providerMessageId: String? = nil,
        action: Action = .none, invalidSince: Int64? = nil, attempts: Int, truncated: Bool = false, token: BindingToken? = nil,
        at: Int64
    ) {
        box = Indirect(
            Fields(
                jobId: jobId, userId: userId, bindingId: bindingId, provider: provider, app: app, status: status, reason: reason,
                httpStatus: httpStatus, providerMessageId: providerMessageId, action: action, invalidSince: invalidSince,
                attempts: attempts, truncated: truncated, token: token, at: at))
    }

    /// The JSON value, fields in contract order.
    public func encoded() -> [UInt8] {
        var writer = JSONWriter(capacity: 320)
        writer.beginObject()
        writer.member("v", Int64(1))
        writer.member("jobId", jobId)
        writer.member("userId", userId)
        writer.member("bindingId", bindingId)
        writer.member("provider", provider.rawValue)
        writer.member("app", app)
        writer.member("status", status.rawValue)
        writer.member("reason", reason)
        writer.member("httpStatus", httpStatus.map(Int64.init))
        writer.member("providerMessageId", providerMessageId)
        writer.member("action", action.rawValue)
        writer.member("invalidSince", invalidSince)
        writer.member("attempts", Int64(attempts))
        writer.member("at", at)
        if truncated { writer.member("truncated", true) }
        if let token { writer.member("token", token.rawValue) }
        writer.endObject()
        return writer.bytes
    }
}

extension Outcome {
    /// Reads an outcome back from its contract JSON (as stored in idempotency records).
    public init?(json bytes: [UInt8]) {
        guard let document = try? JSONParser.parse(bytes), case .integer(1)? = document["v"],
            case .string(let jobId)? = document["jobId"], case .string(let userId)? = document["userId"],
            case .string(let bindingId)? = document["bindingId"],
            case .string(let providerName)? = document["provider"],
            case .string(let statusName)? = document["status"], let status = Status(rawValue: statusName),
            case .string(let actionName)? = document["action"], let action = Action(rawValue: actionName),
            case .integer(let attempts)? = document["attempts"], case .integer(let at)? = document["at"]
        else { return nil }
        func string(_ name: String) -> String? { if case .string(let value)? = document[name] { value } else { nil } }
        func integer(_ name: String) -> Int64? { if case .integer(let value)? = document[name] { value } else { nil } }
        self.init(
            jobId: jobId, userId: userId, bindingId: bindingId, provider: ProviderID(providerName), app: string("app"),
            status: status, reason: string("reason"), httpStatus: integer("httpStatus").map { Int($0) },
            providerMessageId: string("providerMessageId"), action: action, invalidSince: integer("invalidSince"),
            attempts: Int(attempts), truncated: document["truncated"] == .bool(true),
            token: string("token").flatMap(BindingToken.init(rawValue:)), at: at)
    }
}

/// One of the tokens of a binding that holds two: RFC 8599's dual APNs binding `voip&remote`, as Flexisip and
/// liblinphone write it (`pn-prid=<voip token>:voip&<remote token>:remote`), whose PushKit token takes calls and whose
/// remote token takes everything else.
public enum BindingToken: String, Sendable, CaseIterable {
    case voip, remote
}
