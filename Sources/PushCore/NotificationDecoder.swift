/// Reads and checks the job's `notification` object (contract v1): types, enum values, ranges, lengths.
/// Identifier-like fields (keys, names, ids, URLs) refuse control characters; only shown text may carry
/// line breaks.
struct NotificationDecoder {
    /// Longest title, subtitle or body: the job's own size limit.
    let textLimit: Int
    static let identifierLimit = 256
    static let urlLimit = 2048
    static let localizationArgumentLimit = 32
    /// Made once: an array made per decode is an allocation per job.
    static let interruptionLevels = Notification.InterruptionLevel.allCases.map(\.rawValue)

    func decode(_ fields: inout Fields) throws(JobRejection) -> Notification {
        var notification = Notification()
        notification.title = try fields.optionalString("title", maximumLength: textLimit, content: .text)
        notification.subtitle = try fields.optionalString("subtitle", maximumLength: textLimit, content: .text)
        notification.body = try fields.optionalString("body", maximumLength: textLimit, content: .text)
        notification.sound = try decodeSound(&fields)
        notification.badge = try fields.optionalInteger("badge", in: 0...Int64(Int32.max))
        notification.threadId = try fields.optionalString("threadId", maximumLength: Self.identifierLimit)
        notification.category = try fields.optionalString("category", maximumLength: Self.identifierLimit)
        if let level = try fields.optionalChoice("interruptionLevel", of: Self.interruptionLevels) {
            notification.interruptionLevel = Notification.InterruptionLevel(rawValue: level)
        }
        notification.relevanceScore = try fields.optionalNumber("relevanceScore", in: 0...1)
        notification.image = try fields.optionalString("image", maximumLength: Self.urlLimit)
        notification.channelId = try fields.optionalString("channelId", maximumLength: Self.identifierLimit)
        notification.tag = try fields.optionalString("tag", maximumLength: Self.identifierLimit)
        notification.color = try decodeColor(&fields)
        notification.icon = try fields.optionalString("icon", maximumLength: Self.identifierLimit)
        notification.clickAction = try fields.optionalString("clickAction", maximumLength: Self.urlLimit)
        notification.locKey = try fields.optionalString("locKey", maximumLength: Self.identifierLimit)
        notification.locArgs = try fields.optionalStrings(
            "locArgs", maximumCount: Self.localizationArgumentLimit,
            maximumLength: textLimit, content: .text)
        notification.titleLocKey = try fields.optionalString("titleLocKey", maximumLength: Self.identifierLimit)
        notification.titleLocArgs = try fields.optionalStrings(
            "titleLocArgs", maximumCount: Self.localizationArgumentLimit,
            maximumLength: textLimit, content: .text)
        notification.mutableContent = try fields.optionalBool("mutableContent")
        return notification
    }

    /// A name, or `{"name", "critical"?, "volume"?}` (volume 0…1).
    private func decodeSound(_ fields: inout Fields) throws(JobRejection) -> Notification.Sound? {
        guard let value = fields.value("sound") else {
            return try fields.optionalString("sound", maximumLength: Self.identifierLimit).map { .init(name: $0) }
        }
        switch value {
        case .object:
            guard var sound = try fields.optionalObject("sound") else { return nil }
            let decoded = Notification.Sound(
                name: try sound.requiredString("name", maximumLength: Self.identifierLimit),
                isCritical: try sound.optionalBool("critical") ?? false,
                volume: try sound.optionalNumber("volume", in: 0...1))
            try sound.rejectUnread()
            return decoded
        default:
            return try fields.optionalString("sound", maximumLength: Self.identifierLimit).map { .init(name: $0) }
        }
    }

    /// `#rrggbb`, the form Android's notification color takes.
    private func decodeColor(_ fields: inout Fields) throws(JobRejection) -> String? {
        guard let color = try fields.optionalString("color", maximumLength: 7) else { return nil }
        let bytes = Array(color.utf8)
        guard bytes.count == 7, bytes[0] == UInt8(ascii: "#"), bytes.dropFirst().allSatisfy(\.isHexDigit) else {
            throw fields.invalid("color", "must be #rrggbb")
        }
        return color
    }
}

/// Reads and checks the job's `liveActivity` object (contract v1).
enum LiveActivityDecoder {
    static func decode(_ fields: Fields) throws(JobRejection) -> LiveActivity {
        var fields = fields
        guard
            let event = LiveActivity.Event(
                rawValue: try fields.optionalChoice("event", of: LiveActivity.Event.allCases.map(\.rawValue)) ?? "")
        else {
            throw fields.invalid("event", "is required (start, update or end)")
        }
        guard let contentState = try fields.optionalObject("contentState") else {
            throw fields.invalid("contentState", "is required: the activity's content as an object")
        }
        let dates = 0...LiveActivity.latestDate
        var activity = LiveActivity(
            event: event, contentState: contentState.json,
            timestamp: try fields.optionalInteger("timestamp", in: dates),
            staleDate: try fields.optionalInteger("staleDate", in: dates),
            dismissalDate: try fields.optionalInteger("dismissalDate", in: dates),
            attributesType: try fields.optionalString("attributesType", maximumLength: NotificationDecoder.identifierLimit))
        activity.attributes = try fields.optionalObject("attributes").map(\.json)
        activity.inputPushToken = try fields.optionalBool("inputPushToken")
        if event == .start, activity.attributesType == nil || activity.attributes == nil {
            throw fields.invalid("a start event needs attributesType and attributes")
        }
        try fields.rejectUnread()
        return activity
    }
}
