/// What the user sees or hears (the job's `notification`, contract v1). Each provider's plugin maps the
/// fields it has a place for and leaves the others out (docs/contracts.md, "Notification fields").
public struct Notification: Sendable, Equatable {
    public var title: String?
    public var body: String?
    public var sound: Sound?
    public var badge: Int64?
    /// The fields a chat notification seldom sets, in one shared box allocated only when one is set:
    /// a decoded job waiting in the pipeline then holds about 300 bytes less.
    private var less: Indirect<LessCommon>?

    private struct LessCommon: Sendable, Equatable {
        var subtitle: String?
        var threadId: String?
        var category: String?
        var interruptionLevel: InterruptionLevel?
        var relevanceScore: Double?
        var image: String?
        var channelId: String?
        var tag: String?
        var color: String?
        var icon: String?
        var clickAction: String?
        var locKey: String?
        var locArgs: [String]?
        var titleLocKey: String?
        var titleLocArgs: [String]?
        var mutableContent: Bool?
    }

    private mutating func setLessCommon<Value>(_ field: WritableKeyPath<LessCommon, Value?>, _ value: Value?) {
        if value == nil, less == nil { return }
        var fields = less?.value ?? LessCommon()
        fields[keyPath: field] = value
        less = fields == LessCommon() ? nil : Indirect(fields)
    }

    public var subtitle: String? {
        get { less?.value.subtitle }
        set { setLessCommon(\.subtitle, newValue) }
    }
    /// Groups a conversation's notifications.
    public var threadId: String? {
        get { less?.value.threadId }
        set { setLessCommon(\.threadId, newValue) }
    }
    /// The actions offered with the notification (reply, decline…), as the app registered them.
    public var category: String? {
        get { less?.value.category }
        set { setLessCommon(\.category, newValue) }
    }
    public var interruptionLevel: InterruptionLevel? {
        get { less?.value.interruptionLevel }
        set { setLessCommon(\.interruptionLevel, newValue) }
    }
    /// How the system ranks this notification in a summary, 0…1.
    public var relevanceScore: Double? {
        get { less?.value.relevanceScore }
        set { setLessCommon(\.relevanceScore, newValue) }
    }
    /// An image URL.
    public var image: String? {
        get { less?.value.image }
        set { setLessCommon(\.image, newValue) }
    }
    /// The notification channel the app created (Android 8+).
    public var channelId: String? {
        get { less?.value.channelId }
        set { setLessCommon(\.channelId, newValue) }
    }
    /// A later notification with the same tag replaces this one.
    public var tag: String? {
        get { less?.value.tag }
        set { setLessCommon(\.tag, newValue) }
    }
    /// `#rrggbb`.
    public var color: String? {
        get { less?.value.color }
        set { setLessCommon(\.color, newValue) }
    }
    public var icon: String? {
        get { less?.value.icon }
        set { setLessCommon(\.icon, newValue) }
    }
    /// What opens when the user taps the notification.
    public var clickAction: String? {
        get { less?.value.clickAction }
        set { setLessCommon(\.clickAction, newValue) }
    }
    /// Localized text: the app's string key for the body and its arguments.
    public var locKey: String? {
        get { less?.value.locKey }
        set { setLessCommon(\.locKey, newValue) }
    }
    public var locArgs: [String]? {
        get { less?.value.locArgs }
        set { setLessCommon(\.locArgs, newValue) }
    }
    public var titleLocKey: String? {
        get { less?.value.titleLocKey }
        set { setLessCommon(\.titleLocKey, newValue) }
    }
    public var titleLocArgs: [String]? {
        get { less?.value.titleLocArgs }
        set { setLessCommon(\.titleLocArgs, newValue) }
    }
    /// Let the app's code change the notification before it is shown.
    public var mutableContent: Bool? {
        get { less?.value.mutableContent }
        set { setLessCommon(\.mutableContent, newValue) }
    }

    public init(
        title: String? = nil, subtitle: String? = nil, body: String? = nil, sound: Sound? = nil, badge: Int64? = nil,
        threadId: String? = nil, category: String? = nil, interruptionLevel: InterruptionLevel? = nil,
        relevanceScore: Double? = nil, image: String? = nil, channelId: String? = nil, tag: String? = nil,
        color: String? = nil, icon: String? = nil, clickAction: String? = nil, locKey: String? = nil,
        locArgs: [String]? = nil, titleLocKey: String? = nil, titleLocArgs: [String]? = nil, mutableContent: Bool? = nil
    ) {
        self.title = title
        self.body = body
        self.sound = sound
        self.badge = badge
        let less = LessCommon(
            subtitle: subtitle, threadId: threadId, category: category, interruptionLevel: interruptionLevel,
            relevanceScore: relevanceScore, image: image, channelId: channelId, tag: tag, color: color, icon: icon,
            clickAction: clickAction, locKey: locKey, locArgs: locArgs, titleLocKey: titleLocKey,
            titleLocArgs: titleLocArgs, mutableContent: mutableContent)
        self.less = less == LessCommon() ? nil : Indirect(less)
    }

    /// A title, subtitle or body, given as text or as a localization key.
    public var hasText: Bool {
        title != nil || subtitle != nil || body != nil || locKey != nil || titleLocKey != nil
    }

    /// Whether it shows or sounds anything: text, a sound or a badge.
    public var isVisible: Bool { hasText || sound != nil || badge != nil }

    /// A sound by name, optionally a critical alert (which plays even when muted) at a volume 0…1.
    public struct Sound: Sendable, Equatable, ExpressibleByStringLiteral {
        public var name: String
        public var isCritical: Bool
        public var volume: Double?

        public init(name: String, isCritical: Bool = false, volume: Double? = nil) {
            self.name = name
            self.isCritical = isCritical
            self.volume = volume
        }

        public init(stringLiteral name: String) { self.init(name: name) }

        /// Only a name: the form providers take as a plain string.
        public var isPlainName: Bool { !isCritical && volume == nil }
    }

    /// How urgently the system presents the notification.
    public enum InterruptionLevel: String, Sendable, CaseIterable {
        case passive, active
        case timeSensitive = "time-sensitive"
        case critical
    }
}

extension Notification {
    /// The notification as the job wrote it (contract names, only the fields given), for payloads that
    /// carry the job whole (`Job.summaryJSON()`).
    func writeSummary(into writer: inout JSONWriter) {
        writer.beginObject()
        if let title { writer.member("title", title) }
        if let subtitle { writer.member("subtitle", subtitle) }
        if let body { writer.member("body", body) }
        if let sound {
            writer.key("sound")
            if sound.isPlainName {
                writer.value(sound.name)
            } else {
                writer.beginObject()
                writer.member("name", sound.name)
                writer.member("critical", sound.isCritical)
                if let volume = sound.volume {
                    writer.key("volume")
                    writer.value(volume)
                }
                writer.endObject()
            }
        }
        if let badge { writer.member("badge", badge) }
        for (name, value) in [("threadId", threadId), ("category", category), ("interruptionLevel", interruptionLevel?.rawValue)] {
            if let value { writer.member(name, value) }
        }
        if let relevanceScore {
            writer.key("relevanceScore")
            writer.value(relevanceScore)
        }
        for (name, value) in [
            ("image", image), ("channelId", channelId), ("tag", tag), ("color", color), ("icon", icon),
            ("clickAction", clickAction), ("locKey", locKey),
        ] {
            if let value { writer.member(name, value) }
        }
        if let locArgs {
            writer.key("locArgs")
            writer.value(locArgs)
        }
        if let titleLocKey { writer.member("titleLocKey", titleLocKey) }
        if let titleLocArgs {
            writer.key("titleLocArgs")
            writer.value(titleLocArgs)
        }
        if let mutableContent { writer.member("mutableContent", mutableContent) }
        writer.endObject()
    }
}
