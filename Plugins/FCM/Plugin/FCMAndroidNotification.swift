import PushCore

/// `message.android.notification` (Firebase's `Message` REST reference, `AndroidNotification`) from the
/// job's notification: the fields Android shows besides the title and body in `message.notification`.
enum FCMAndroidNotification {
    static func hasMembers(_ notification: Notification) -> Bool {
        notification.sound != nil || notification.badge != nil || notification.channelId != nil || notification.tag != nil
            || notification.color != nil || notification.icon != nil || notification.clickAction != nil
            || notification.locKey != nil || notification.titleLocKey != nil
    }

    static func write(_ notification: Notification, into writer: inout JSONWriter) {
        writer.beginObject()
        let strings: [(String, String?)] = [
            ("channel_id", notification.channelId), ("tag", notification.tag), ("color", notification.color),
            ("icon", notification.icon), ("click_action", notification.clickAction), ("sound", notification.sound?.name),
            ("title_loc_key", notification.titleLocKey), ("body_loc_key", notification.locKey),
        ]
        for (name, value) in strings { if let value { writer.member(name, value) } }
        if let arguments = notification.titleLocArgs {
            writer.key("title_loc_args")
            writer.value(arguments)
        }
        if let arguments = notification.locArgs {
            writer.key("body_loc_args")
            writer.value(arguments)
        }
        if let badge = notification.badge { writer.member("notification_count", badge) }
        writer.endObject()
    }
}
