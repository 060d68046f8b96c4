/// What the user sees or hears (the job's `notification`, contract v1). Each provider's plugin maps the
/// fields it has a place for and leaves the others out (docs/contracts.md, "Notification fields").
public struct Notification: Sendable, Equatable {
    public var title: String?
    public var subtitle: String?
    public var body: String?
    public var sound: Sound?
    public var badge: Int64?
    /// Groups a conversation's notifications.
    public var threadId: String?
    /// The actions offered with the notification (reply, decline…), as the app registered them.
    public var category: String?
    public var interruptionLevel: InterruptionLevel?
    /// How the system ranks this notification in a summary, 0…1.
    public var relevanceScore: Double?
    /// An image URL.
    public var image: String?
    /// The notification channel the app created (Android 8+).
    public var channelId: String?
    /// A later notification with the same tag replaces this one.
    public var tag: String?
    /// `#rrggbb`.
    public var color: String?
    public var icon: String?
    /// What opens when the user taps the notification.
    public var clickAction: String?
    /// Localized text: the app's string key for the body and its arguments.
    public var locKey: String?
    public var locArgs: [String]?
    public var titleLocKey: String?
    public var titleLocArgs: [String]?
    /// Let the app's code change the notification before it is shown.
    public var mutableContent: Bool?

    public init(title: String? = nil, subtitle: String? = nil, body: String? = nil, sound: Sound? = nil, badge: Int64? = nil,
                threadId: String? = nil, category: String? = nil, interruptionLevel: InterruptionLevel? = nil,
                relevanceScore: Double? = nil, image: String? = nil, channelId: String? = nil, tag: String? = nil,
                color: String? = nil, icon: String? = nil, clickAction: String? = nil, locKey: String? = nil,
                locArgs: [String]? = nil, titleLocKey: String? = nil, titleLocArgs: [String]? = nil, mutableContent: Bool? = nil) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.sound = sound
        self.badge = badge
        self.threadId = threadId
        self.category = category
        self.interruptionLevel = interruptionLevel
        self.relevanceScore = relevanceScore
        self.image = image
        self.channelId = channelId
        self.tag = tag
        self.color = color
        self.icon = icon
        self.clickAction = clickAction
        self.locKey = locKey
        self.locArgs = locArgs
        self.titleLocKey = titleLocKey
        self.titleLocArgs = titleLocArgs
        self.mutableContent = mutableContent
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
        case passive, active, timeSensitive = "time-sensitive", critical
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
                if let volume = sound.volume { writer.key("volume"); writer.value(volume) }
                writer.endObject()
            }
        }
        if let badge { writer.member("badge", badge) }
        for (name, value) in [("threadId", threadId), ("category", category), ("interruptionLevel", interruptionLevel?.rawValue)] {
            if let value { writer.member(name, value) }
        }
        if let relevanceScore { writer.key("relevanceScore"); writer.value(relevanceScore) }
        for (name, value) in [("image", image), ("channelId", channelId), ("tag", tag), ("color", color), ("icon", icon),
                              ("clickAction", clickAction), ("locKey", locKey)] {
            if let value { writer.member(name, value) }
        }
        if let locArgs { writer.key("locArgs"); writer.value(locArgs) }
        if let titleLocKey { writer.member("titleLocKey", titleLocKey) }
        if let titleLocArgs { writer.key("titleLocArgs"); writer.value(titleLocArgs) }
        if let mutableContent { writer.member("mutableContent", mutableContent) }
        writer.endObject()
    }
}
