/// Decodes and validates the job contract (v1) strictly: every rejection names the
/// field and the rule it broke, so the upstream team can fix its producer from the
/// dead-letter header alone. A target that breaks a rule is refused on its own
/// (`Target.refusal`, an outcome `rejected` with the rule); only a job none of whose
/// targets is valid goes to the dead-letter topic for it.
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

    /// Up to this many targets, a repeated `bindingId` is found by comparing each with the ones before.
    static let targetsCheckedByScanning = 16

    public let limits: JobLimits
    /// The providers whose targets jobs may name.
    public let formats: TargetFormats

    public init(limits: JobLimits = .default, formats: TargetFormats) {
        self.limits = limits
        self.formats = formats
    }

    /// - Parameter fallbackCreatedAt: the Kafka message timestamp (ms), used when the job has no `createdAt`.
    public func decode(_ bytes: [UInt8], fallbackCreatedAt: Int64) throws(JobRejection) -> Job {
        guard bytes.count <= limits.maximumBytes else {
            throw JobRejection(.tooLarge, "message is \(bytes.count) bytes, the limit is \(limits.maximumBytes)")
        }
        let document: JSONDocument
        do {
            document = try JSONDocument(parsing: bytes)
        } catch {
            throw JobRejection(.invalidJSON, error.description)
        }
        guard var fields = document.root.fields(path: "") else {
            throw JobRejection(.invalidJSON, "the job must be a JSON object, not \(document.root.typeName)")
        }
        let version = fields.take("v")
        guard version != nil || fields.wasRead("v") else {
            throw JobRejection(.unsupportedVersion, "v is required (supported: \(Self.supportedVersion))")
        }
        guard version?.integer == Self.supportedVersion else {
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
        var overrides: [ProviderID: JSONValue] = [:]
        if let object = try fields.optionalObject("overrides") { overrides = try decodeOverrides(object) }
        var liveActivity: LiveActivity?
        if let object = try fields.optionalObject("liveActivity") { liveActivity = try LiveActivityDecoder.decode(object) }
        let targets = try decodeTargets(fields.required("targets"))
        try fields.rejectUnread()

        return Job(
            id: id, createdAt: createdAt, ttl: ttl, kind: kind, priority: priority, userId: userId,
            collapseKey: collapseKey, dedupeKey: dedupeKey, notification: notification, data: data,
            body: body, overrides: overrides, liveActivity: liveActivity, targets: targets)
    }

    private func decodeNotification(_ fields: Fields) throws(JobRejection) -> Notification {
        var fields = fields
        let notification = try NotificationDecoder(textLimit: limits.maximumBytes).decode(&fields)
        try fields.rejectUnread()
        return notification
    }

    /// `overrides`: one JSON object per provider, by provider name; the provider's format checks its own.
    private func decodeOverrides(_ fields: Fields) throws(JobRejection) -> [ProviderID: JSONValue] {
        var overrides: [ProviderID: JSONValue] = [:]
        try fields.forEachMember { name, value throws(JobRejection) in
            guard let format = formats.byProvider[ProviderID(name)] else {
                throw fields.invalid(
                    name, "is not a provider: overrides are keyed by one of \(formats.providerNames.joined(separator: ", "))")
            }
            guard value.isObject else { throw fields.invalid(name, "must be an object, not \(value.typeName)") }
            let override = value.json
            try format.checkOverride(override)
            overrides[format.provider] = override
        }
        return overrides
    }

    private func decodeData(_ fields: Fields) throws(JobRejection) -> [String: String] {
        var data: [String: String] = [:]
        data.reserveCapacity(fields.count)
        try fields.forEachMember { key, value throws(JobRejection) in
            guard let text = value.string else {
                throw JobRejection(.invalidField, "data.\(key) must be a string, not \(value.typeName) (provider data values are strings)")
            }
            data[key] = text
        }
        return data
    }

    private func decodeTargets(_ value: JSONDocument.Value) throws(JobRejection) -> [Target] {
        guard value.isArray else {
            throw JobRejection(.invalidField, "targets must be an array, not \(value.typeName)")
        }
        guard value.count > 0 else { throw JobRejection(.invalidField, "targets must not be empty") }
        guard value.count <= limits.maximumTargets else {
            throw JobRejection(.invalidField, "targets has \(value.count) entries, the limit is \(limits.maximumTargets)")
        }
        var targets: [Target] = []
        targets.reserveCapacity(value.count)
        // A job's few targets are checked against the ones before by scanning: a set would cost an allocation a job.
        var bindingIds: Set<String>? = value.count > Self.targetsCheckedByScanning ? [] : nil
        for (index, element) in value.elements.enumerated() {
            guard let fields = element.fields(path: "targets[\(index)].") else {
                throw JobRejection(.invalidField, "targets[\(index)] must be an object, not \(element.typeName)")
            }
            let target = try decodeTarget(fields)
            let repeated =
                if bindingIds != nil { !bindingIds!.insert(target.bindingId).inserted } else {
                    targets.contains { $0.bindingId == target.bindingId }
                }
            guard !repeated else {
                throw JobRejection(.invalidField, "targets[\(index)].bindingId \"\(target.bindingId)\" appears twice")
            }
            targets.append(target)
        }
        if let first = targets.first?.refusal, targets.allSatisfy({ $0.refusal != nil }) {
            guard targets.count > 1 else { throw first }
            throw JobRejection(first.code, "\(first.message) (and every other target of the job is invalid too)")
        }
        return targets
    }

    /// A target: its `bindingId`, which keys its outcome, or the job is refused (a target without one, or with another
    /// target's, cannot be answered for); then the rest, where a mistake refuses this target alone
    /// (`Target.refusal`), so that one binding the producer cannot describe never costs the user's other devices
    /// their push.
    private func decodeTarget(_ fields: Fields) throws(JobRejection) -> Target {
        var fields = fields
        let bindingId = try fields.requiredString("bindingId", maximumLength: limits.maximumIdentifierLength)
        var named = ProviderID.unnamed
        do {
            return try decodeDeliverableTarget(&fields, bindingId: bindingId, named: &named)
        } catch {
            return Target(bindingId: bindingId, provider: named, refusal: error)
        }
    }

    /// - Parameter named: set to the provider the target names as soon as a linked plugin's format is found for it.
    private func decodeDeliverableTarget(_ fields: inout Fields, bindingId: String, named: inout ProviderID) throws(JobRejection) -> Target
    {
        let path = fields.path
        if let notation = SIPBinding.Notation.allCases.first(where: { fields.has($0.rawValue) }) {
            return try decodeSIPBindingTarget(fields, bindingId: bindingId, notation: notation, named: &named)
        }
        let providerName = try fields.requiredString("provider", maximumLength: 32)
        guard let format = formats.byProvider[ProviderID(providerName)] else {
            throw JobRejection(
                .unknownProvider,
                "\(path)provider \"\(providerName)\" is not one of \(formats.providerNames.joined(separator: ", "))")
        }
        named = format.provider
        let app = try fields.optionalString("app", maximumLength: limits.maximumIdentifierLength)
        let details = try format.decode(&fields)
        try Self.toleratePriorTargetMembers(&fields)
        try fields.rejectUnread()
        return Target(bindingId: bindingId, provider: format.provider, app: app, details: details)
    }

    /// Contract v1 gave every native target one set of members; a provider's format reads its own. The others,
    /// which a producer may send to every provider alike, are still accepted as before (checked for type and
    /// length, then ignored), so a job v1 accepted is never refused now.
    static let priorTargetMembers: [(name: String, maximumLength: Int)] = [
        ("token", 4096), ("environment", 16), ("pushType", 32), ("endpoint", 2048), ("tokenType", 16), ("platform", 16),
    ]

    private static func toleratePriorTargetMembers(_ fields: inout Fields) throws(JobRejection) {
        for (name, maximumLength) in priorTargetMembers where !fields.wasRead(name) {
            _ = try fields.optionalString(name, maximumLength: maximumLength)
        }
        if !fields.wasRead("keys"), var keys = try fields.optionalObject("keys") {
            _ = try keys.requiredString("p256dh", maximumLength: 256)
            _ = try keys.requiredString("auth", maximumLength: 256)
            try keys.rejectUnread()
        }
    }

    /// A target given as an RFC 8599 or X-MPUSH binding string: split by the core, given its meaning
    /// by the format of the provider it names.
    private func decodeSIPBindingTarget(
        _ fields: Fields, bindingId: String, notation: SIPBinding.Notation, named: inout ProviderID
    ) throws(JobRejection) -> Target {
        var fields = fields
        let path = fields.path
        if let other = SIPBinding.Notation.allCases.first(where: { $0 != notation && fields.has($0.rawValue) }) {
            throw JobRejection(
                .invalidField, "\(path)\(notation.rawValue) and \(other.rawValue) cannot both be given: one binding per target")
        }
        let text = try fields.requiredString(notation.rawValue, maximumLength: 4096)
        let binding = try SIPBinding.parse(text, notation: notation, path: path)
        if binding.isBareUnbind {
            try fields.rejectUnread("cannot be combined with \(notation.rawValue): the binding string carries provider, app and token")
            return Target(bindingId: bindingId, provider: SIPBinding.bareUnbindProvider, isUnbound: true)
        }
        let format = try formats.format(for: binding, fields)
        named = format.provider
        let (app, details) = try format.decode(binding, &fields)
        try fields.rejectUnread("cannot be combined with \(notation.rawValue): the binding string carries provider, app and token")
        return Target(bindingId: bindingId, provider: format.provider, app: app, details: details, isUnbound: binding.isUnbound)
    }
}
