import PushCore

/// The members of Apple's `aps` dictionary that show a notification (Apple, "Generating a remote
/// notification", payload key reference), written from the job's notification. Used by every plugin that
/// builds an Apple payload: the APNs plugin, and FCM's `apns` block for iOS tokens.
public enum AppleNotificationMembers {
    /// Writes `alert`, `sound`, `badge`, `thread-id`, `category`, `interruption-level`, `relevance-score` and
    /// `mutable-content` into the open `aps` object.
    /// - Parameters:
    ///   - includeAlert: whether to write `alert` (FCM writes title and body in its own `notification`).
    ///   - mutableByDefault: `mutable-content` when the job does not say (alerts that carry data).
    public static func write(
        _ notification: Notification, into writer: inout JSONWriter,
        includeAlert: Bool = true, mutableByDefault: Bool = false
    ) {
        if includeAlert, notification.hasText { writeAlert(notification, into: &writer) }
        if let sound = notification.sound { writeSound(sound, into: &writer) }
        if let badge = notification.badge { writer.member("badge", badge) }
        if let threadId = notification.threadId { writer.member("thread-id", threadId) }
        if let category = notification.category { writer.member("category", category) }
        if let level = notification.interruptionLevel { writer.member("interruption-level", level.rawValue) }
        if let score = notification.relevanceScore {
            writer.key("relevance-score")
            writer.value(score)
        }
        if notification.mutableContent ?? mutableByDefault { writer.member("mutable-content", Int64(1)) }
    }

    /// Whether the notification has alert text an FCM `notification` (title and body) cannot carry.
    public static func needsOwnAlert(_ notification: Notification) -> Bool {
        notification.subtitle != nil || notification.locKey != nil || notification.titleLocKey != nil
    }

    /// Writes `alert`: `title`, `subtitle` (unless `withSubtitle` is false: a Live Activity's alert has none),
    /// `body` and the localization keys, then whatever `extra` adds to it.
    public static func writeAlert(
        _ notification: Notification, withSubtitle: Bool = true, into writer: inout JSONWriter,
        extra: (inout JSONWriter) -> Void = { _ in }
    ) {
        writer.key("alert")
        writer.beginObject()
        if let title = notification.title { writer.member("title", title) }
        if withSubtitle, let subtitle = notification.subtitle { writer.member("subtitle", subtitle) }
        if let body = notification.body { writer.member("body", body) }
        if let key = notification.titleLocKey { writer.member("title-loc-key", key) }
        if let arguments = notification.titleLocArgs {
            writer.key("title-loc-args")
            writer.value(arguments)
        }
        if let key = notification.locKey { writer.member("loc-key", key) }
        if let arguments = notification.locArgs {
            writer.key("loc-args")
            writer.value(arguments)
        }
        extra(&writer)
        writer.endObject()
    }

    /// A name, or for a critical alert or a volume the dictionary `{"critical": 1, "name", "volume"}`.
    static func writeSound(_ sound: Notification.Sound, into writer: inout JSONWriter) {
        writer.key("sound")
        guard !sound.isPlainName else { return writer.value(sound.name) }
        writer.beginObject()
        writer.member("critical", Int64(sound.isCritical ? 1 : 0))
        writer.member("name", sound.name)
        if let volume = sound.volume {
            writer.key("volume")
            writer.value(volume)
        }
        writer.endObject()
    }
}
