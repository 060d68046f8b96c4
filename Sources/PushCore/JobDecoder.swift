/// Decodes and validates the job contract (v1) strictly: every rejection names the
/// field and the rule it broke, so the upstream team can fix its producer from the
/// dead-letter header alone.
public struct JobDecoder: Sendable {
    public static let supportedVersion: Int64 = 1
    /// TTL used when a job has none: a ringing call is stale after a minute, a message is not.
    public static func defaultTTL(for kind: JobKind) -> Int64 {
        switch kind {
        case .call, .cancel: 60
        case .message, .custom, .wake: 86_400
        }
    }

    public static func defaultPriority(for kind: JobKind) -> JobPriority {
        switch kind {
        case .call, .cancel, .message: .high
        case .custom, .wake: .normal
        }
    }

    static let apnsPushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm",
        "liveactivity", "pushtotalk", "widgets", "controls",
    ]
    static let proxyPushTypes: Set<String> = ["im", "voip"]
    static let proxyTokenTypes: Set<String> = ["fcm", "apns", "apnsVoip", "cookie"]
    static let proxyPlatforms: Set<String> = ["android", "ios", "web", "node"]
    static let apnsEnvironments: Set<String> = ["production", "sandbox"]

    private static let jobFields: Set<String> = [
        "v", "id", "createdAt", "ttl", "kind", "priority", "userId", "collapseKey", "dedupeKey",
        "notification", "data", "body", "targets",
    ]
    private static let targetFields: Set<String> = [
        "bindingId", "provider", "app", "token", "environment", "pushType", "endpoint", "keys",
        "tokenType", "platform", "rfc8599", "xmpush",
    ]
    /// Besides `bindingId`, what a target written as a SIP binding string may carry:
    /// Web Push subscriptions need their keys, which neither notation has room for.
    private static let sipBindingCompanions: Set<String> = ["bindingId", "keys"]
    private static let notificationFields: Set<String> = ["title", "body", "sound", "badge"]

    public let limits: JobLimits

    public init(limits: JobLimits = .default) { self.limits = limits }

    /// - Parameter fallbackCreatedAt: the Kafka message timestamp (ms), used when the job has no `createdAt`.
    public func decode(_ bytes: [UInt8], fallbackCreatedAt: Int64) throws(JobRejection) -> Job {
        guard bytes.count <= limits.maximumBytes else {
            throw JobRejection(.tooLarge, "message is \(bytes.count) bytes, the limit is \(limits.maximumBytes)")
        }
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            throw JobRejection(.invalidJSON, error.description)
        }
        guard case .object(let members) = document else {
            throw JobRejection(.invalidJSON, "the job must be a JSON object, not \(document.typeName)")
        }
        var fields = Fields(members: members, path: "")
        guard let version = document["v"] else {
            throw JobRejection(.unsupportedVersion, "v is required (supported: \(Self.supportedVersion))")
        }
        guard case .integer(let number) = version, number == Self.supportedVersion else {
            throw JobRejection(.unsupportedVersion, "v must be \(Self.supportedVersion)")
        }

        let id = try fields.requiredString("id", maximumLength: limits.maximumIdentifierLength)
        let kindName = try fields.requiredString("kind", maximumLength: 16)
        guard let kind = JobKind(rawValue: kindName) else {
            throw JobRejection(.invalidField, "kind must be one of \(JobKind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let createdAt = try fields.optionalInteger("createdAt", in: 0...Int64.max) ?? fallbackCreatedAt
        let ttl = try fields.optionalInteger("ttl", in: 0...limits.maximumTTLSeconds) ?? Self.defaultTTL(for: kind)
        var priority = Self.defaultPriority(for: kind)
        if let name = try fields.optionalString("priority", maximumLength: 16) {
            guard let value = JobPriority(rawValue: name) else {
                throw JobRejection(.invalidField, "priority must be high or normal")
            }
            priority = value
        }
        let userId = try fields.requiredString("userId", maximumLength: limits.maximumIdentifierLength)
        let collapseKey = try fields.optionalString("collapseKey", maximumLength: limits.maximumIdentifierLength)
        let dedupeKey = try fields.optionalString("dedupeKey", maximumLength: limits.maximumIdentifierLength)
        var notification: Notification?
        if let object = try fields.optionalObject("notification") { notification = try decodeNotification(object) }
        var data: [String: String] = [:]
        if let object = try fields.optionalObject("data") { data = try decodeData(object) }
        let body = try fields.optionalString("body", maximumLength: limits.maximumBytes, content: .text)
        let targets = try decodeTargets(fields.required("targets"))
        try fields.rejectUnknown(allowed: Self.jobFields)

        return Job(id: id, createdAt: createdAt, ttl: ttl, kind: kind, priority: priority, userId: userId,
                   collapseKey: collapseKey, dedupeKey: dedupeKey, notification: notification, data: data,
                   body: body, targets: targets)
    }

    private func decodeNotification(_ fields: Fields) throws(JobRejection) -> Notification {
        var fields = fields
        let notification = Notification(
            title: try fields.optionalString("title", maximumLength: limits.maximumBytes, content: .text),
            body: try fields.optionalString("body", maximumLength: limits.maximumBytes, content: .text),
            sound: try fields.optionalString("sound", maximumLength: 256),
            badge: try fields.optionalInteger("badge", in: 0...Int64(Int32.max)))
        try fields.rejectUnknown(allowed: Self.notificationFields)
        return notification
    }

    private func decodeData(_ fields: Fields) throws(JobRejection) -> [String: String] {
        var data: [String: String] = [:]
        for (key, value) in fields.members {
            guard case .string(let text) = value else {
                throw JobRejection(.invalidField, "data.\(key) must be a string, not \(value.typeName) (provider data values are strings)")
            }
            data[key] = text
        }
        return data
    }

    private func decodeTargets(_ value: JSONValue) throws(JobRejection) -> [Target] {
        guard case .array(let elements) = value else {
            throw JobRejection(.invalidField, "targets must be an array, not \(value.typeName)")
        }
        guard !elements.isEmpty else { throw JobRejection(.invalidField, "targets must not be empty") }
        guard elements.count <= limits.maximumTargets else {
            throw JobRejection(.invalidField, "targets has \(elements.count) entries, the limit is \(limits.maximumTargets)")
        }
        var targets: [Target] = []
        var bindingIds = Set<String>()
        for (index, element) in elements.enumerated() {
            guard case .object(let members) = element else {
                throw JobRejection(.invalidField, "targets[\(index)] must be an object, not \(element.typeName)")
            }
            let target = try decodeTarget(Fields(members: members, path: "targets[\(index)]."))
            guard bindingIds.insert(target.bindingId).inserted else {
                throw JobRejection(.invalidField, "targets[\(index)].bindingId \"\(target.bindingId)\" appears twice")
            }
            targets.append(target)
        }
        return targets
    }

    private func decodeTarget(_ fields: Fields) throws(JobRejection) -> Target {
        var fields = fields
        let path = fields.path
        let bindingId = try fields.requiredString("bindingId", maximumLength: limits.maximumIdentifierLength)
        if let notation = ["rfc8599", "xmpush"].first(where: { fields.value($0) != nil }) {
            return try decodeSIPBindingTarget(fields, bindingId: bindingId, notation: notation)
        }
        let providerName = try fields.requiredString("provider", maximumLength: 32)
        guard let provider = ProviderID(rawValue: providerName) else {
            throw JobRejection(.unknownProvider,
                               "\(path)provider \"\(providerName)\" is not one of \(ProviderID.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var target = Target(bindingId: bindingId, provider: provider)
        target.app = try fields.optionalString("app", maximumLength: limits.maximumIdentifierLength)
        target.token = try fields.optionalString("token", maximumLength: 4096)
        target.environment = try fields.optionalString("environment", maximumLength: 16)
        target.pushType = try fields.optionalString("pushType", maximumLength: 32)
        target.endpoint = try fields.optionalString("endpoint", maximumLength: 2048)
        if let keys = try fields.optionalObject("keys") {
            var keyFields = keys
            target.keys = WebPushKeys(p256dh: try keyFields.requiredString("p256dh", maximumLength: 256),
                                      auth: try keyFields.requiredString("auth", maximumLength: 256))
            try keyFields.rejectUnknown(allowed: ["p256dh", "auth"])
        }
        target.tokenType = try fields.optionalString("tokenType", maximumLength: 16)
        target.platform = try fields.optionalString("platform", maximumLength: 16)
        try fields.rejectUnknown(allowed: Self.targetFields)
        try validateProviderFields(target, path: path)
        return target
    }

    /// A target given as an RFC 8599 or X-MPUSH binding string: decoded into the native
    /// fields, then held to the same provider rules (an unbound one has no token to check).
    private func decodeSIPBindingTarget(_ fields: Fields, bindingId: String, notation: String) throws(JobRejection) -> Target {
        var fields = fields
        let path = fields.path
        if let mixed = fields.members.first(where: { !Self.sipBindingCompanions.contains($0.key) && $0.key != notation }) {
            throw JobRejection(.invalidField, mixed.key == "rfc8599" || mixed.key == "xmpush"
                ? "\(path)rfc8599 and xmpush cannot both be given: one binding per target"
                : "\(path)\(mixed.key) cannot be combined with \(notation): the binding string carries provider, app and token")
        }
        let text = try fields.requiredString(notation, maximumLength: 4096)
        let binding: SIPPushBinding
        do {
            binding = notation == "rfc8599" ? try SIPPushBinding.rfc8599(text) : try SIPPushBinding.xmpush(text)
        } catch {
            throw JobRejection(.invalidField, "\(path)\(notation) \(error.description)")
        }
        var target = Target(bindingId: bindingId, provider: binding.provider, app: binding.app, token: binding.token,
                            environment: binding.environment, pushType: binding.pushType, isUnbound: binding.isUnbound)
        target.platform = binding.platform
        if binding.provider == .webpush {
            target.endpoint = binding.token
            target.token = nil
        }
        if let keys = try fields.optionalObject("keys") {
            guard binding.provider == .webpush else {
                throw JobRejection(.invalidField, "\(path)keys cannot be combined with \(notation) for \(binding.provider.rawValue): only webpush bindings carry keys")
            }
            var keyFields = keys
            target.keys = WebPushKeys(p256dh: try keyFields.requiredString("p256dh", maximumLength: 256),
                                      auth: try keyFields.requiredString("auth", maximumLength: 256))
            try keyFields.rejectUnknown(allowed: ["p256dh", "auth"])
        }
        if !target.isUnbound { try validateProviderFields(target, path: "\(path)\(notation): ") }
        return target
    }

    private func validateProviderFields(_ target: Target, path: String) throws(JobRejection) {
        func invalid(_ message: String) -> JobRejection { JobRejection(.invalidField, "\(path)\(message)") }
        switch target.provider {
        case .apns:
            guard let token = target.token else { throw invalid("token is required for apns") }
            guard token.count >= 16, token.count.isMultiple(of: 2), token.utf8.allSatisfy(\.isHexDigit) else {
                throw invalid("token must be an even number (≥ 16) of hex digits for apns")
            }
            if let environment = target.environment, !Self.apnsEnvironments.contains(environment) {
                throw invalid("environment must be production or sandbox")
            }
            if let pushType = target.pushType, !Self.apnsPushTypes.contains(pushType) {
                throw invalid("pushType \"\(pushType)\" is not an APNs push type")
            }
        case .fcm:
            guard let token = target.token, !token.isEmpty else { throw invalid("token is required for fcm") }
        case .webpush:
            guard let endpoint = target.endpoint, !endpoint.isEmpty else { throw invalid("endpoint is required for webpush") }
            guard target.keys != nil else { throw invalid("keys (p256dh, auth) are required for webpush") }
        case .proxy:
            if let pushType = target.pushType, !Self.proxyPushTypes.contains(pushType) {
                throw invalid("pushType must be im or voip for proxy")
            }
            if let tokenType = target.tokenType {
                guard Self.proxyTokenTypes.contains(tokenType) else {
                    throw invalid("tokenType must be one of fcm, apns, apnsVoip, cookie")
                }
                guard target.token != nil else { throw invalid("token is required when tokenType is present") }
            }
            if let platform = target.platform, !Self.proxyPlatforms.contains(platform) {
                throw invalid("platform must be one of android, ios, web, node")
            }
        }
    }
}

/// Typed access to an object's members that records which were read, so unknown ones can be refused.
private struct Fields {
    let members: [(key: String, value: JSONValue)]
    let path: String

    init(members: [(key: String, value: JSONValue)], path: String) {
        self.members = members
        self.path = path
    }

    func value(_ name: String) -> JSONValue? {
        guard let value = members.first(where: { $0.key == name })?.value else { return nil }
        if case .null = value { return nil }
        return value
    }

    mutating func required(_ name: String) throws(JobRejection) -> JSONValue {
        guard let value = value(name) else { throw JobRejection(.invalidField, "\(path)\(name) is required") }
        return value
    }

    /// What a string field may contain. Identifiers, tokens, keys and endpoints can reach an HTTP
    /// header or URL (apns-collapse-id, apns-topic, the path, a template's header): a CR or LF there
    /// would end the header and start another, so they refuse every control character. Only
    /// notification text (shown to the user, always JSON-escaped) may carry line breaks.
    enum Content {
        case identifier, text
    }

    mutating func requiredString(_ name: String, maximumLength: Int) throws(JobRejection) -> String {
        guard let string = try optionalString(name, maximumLength: maximumLength), !string.isEmpty else {
            throw JobRejection(.invalidField, "\(path)\(name) is required and must be a non-empty string")
        }
        return string
    }

    mutating func optionalString(_ name: String, maximumLength: Int, content: Content = .identifier) throws(JobRejection) -> String? {
        guard let value = value(name) else { return nil }
        guard case .string(let string) = value else {
            throw JobRejection(.invalidField, "\(path)\(name) must be a string, not \(value.typeName)")
        }
        guard string.utf8.count <= maximumLength else {
            throw JobRejection(.invalidField, "\(path)\(name) is longer than \(maximumLength) bytes")
        }
        guard !string.utf8.contains(0) else {
            throw JobRejection(.invalidField, "\(path)\(name) contains a NUL character")
        }
        if content == .identifier, string.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw JobRejection(.invalidField, "\(path)\(name) contains a control character (CR, LF, tab, …): it can reach an HTTP header")
        }
        return string
    }

    mutating func optionalInteger(_ name: String, in range: ClosedRange<Int64>) throws(JobRejection) -> Int64? {
        guard let value = value(name) else { return nil }
        guard case .integer(let number) = value else {
            throw JobRejection(.invalidField, "\(path)\(name) must be an integer, not \(value.typeName)")
        }
        guard range.contains(number) else {
            throw JobRejection(.invalidField, "\(path)\(name) must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return number
    }

    mutating func optionalObject(_ name: String) throws(JobRejection) -> Fields? {
        guard let value = value(name) else { return nil }
        guard case .object(let members) = value else {
            throw JobRejection(.invalidField, "\(path)\(name) must be an object, not \(value.typeName)")
        }
        return Fields(members: members, path: "\(path)\(name).")
    }

    func rejectUnknown(allowed: Set<String>) throws(JobRejection) {
        if let unknown = members.first(where: { !allowed.contains($0.key) }) {
            throw JobRejection(.invalidField, "\(path)\(unknown.key) is not a field of the v1 contract")
        }
    }
}

private extension UInt8 {
    var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
}
