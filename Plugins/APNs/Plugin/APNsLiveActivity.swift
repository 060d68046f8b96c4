import PushCore
import PushPluginAPI

/// The `aps` members of a Live Activity push (Apple, "Starting and updating Live Activities with
/// ActivityKit push notifications"): `timestamp`, `event`, `content-state`, optionally `stale-date`,
/// `dismissal-date` (end), `attributes-type` and `attributes` (start), an `alert` whose `sound` sits
/// inside it, and `relevance-score`.
enum APNsLiveActivity {
    static func write(_ activity: LiveActivity, notification: Notification?, createdAt: Int64, into writer: inout JSONWriter) {
        writer.member("timestamp", activity.timestamp ?? createdAt / 1000)
        writer.member("event", activity.event.rawValue)
        writer.key("content-state")
        writer.value(activity.contentState)
        if let staleDate = activity.staleDate { writer.member("stale-date", staleDate) }
        if let dismissalDate = activity.dismissalDate { writer.member("dismissal-date", dismissalDate) }
        if activity.event == .start, let type = activity.attributesType, let attributes = activity.attributes {
            writer.member("attributes-type", type)
            writer.key("attributes")
            writer.value(attributes)
        }
        guard let notification else { return }
        if notification.title != nil || notification.body != nil || notification.locKey != nil || notification.titleLocKey != nil {
            AppleNotificationMembers.writeAlert(notification, withSubtitle: false, into: &writer) { writer in
                if let sound = notification.sound { writer.member("sound", sound.name) }
            }
        }
        if let score = notification.relevanceScore { writer.key("relevance-score"); writer.value(score) }
    }
}
