import PushCore
import PushPluginAPI

/// The `aps` members of a Live Activity push (Apple, "Starting and updating Live Activities with
/// ActivityKit push notifications"): `timestamp`, `event`, `content-state`, optionally `stale-date`,
/// `dismissal-date` (end), `attributes-type` and `attributes` (start), an `alert` whose `sound` sits
/// inside it, and `relevance-score`. A start asks for the new activity's update token with `input-push-token: 1`
/// (unless the job says `inputPushToken: false`): without it the server never learns the token that updates and
/// ends the activity it started by push.
///
/// The alert has a `title` and a `body`, each a string or, localized, `{"loc-key": …, "loc-args": […]}`
/// (ActivityKit's localized-alert form); it has no `subtitle` and none of the flat `title-loc-key`/`loc-key`
/// members of an ordinary alert. A push that starts an activity must carry an alert (ActivityKit's start
/// payload; Apple's developer forum thread 799195: an alert without text or sound is a silent update whose
/// behavior is undefined).
enum APNsLiveActivity {
    /// Whether the notification has text for a Live Activity alert: a title or body, plain or localized.
    static func hasAlertText(_ notification: Notification) -> Bool {
        notification.title != nil || notification.body != nil || notification.locKey != nil || notification.titleLocKey != nil
    }

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
        if activity.asksForUpdateToken { writer.member("input-push-token", Int64(1)) }
        guard let notification else { return }
        if hasAlertText(notification) {
            writer.key("alert")
            writer.beginObject()
            writeText("title", notification.title, locKey: notification.titleLocKey, locArgs: notification.titleLocArgs, into: &writer)
            writeText("body", notification.body, locKey: notification.locKey, locArgs: notification.locArgs, into: &writer)
            if let sound = notification.sound { writer.member("sound", sound.name) }
            writer.endObject()
        }
        if let score = notification.relevanceScore {
            writer.key("relevance-score")
            writer.value(score)
        }
    }

    /// `title` or `body`: the localized form when the job gives a key (the device localizes it), else the text.
    private static func writeText(_ name: String, _ text: String?, locKey: String?, locArgs: [String]?, into writer: inout JSONWriter) {
        if let locKey {
            writer.key(name)
            writer.beginObject()
            writer.member("loc-key", locKey)
            if let locArgs {
                writer.key("loc-args")
                writer.value(locArgs)
            }
            writer.endObject()
        } else if let text {
            writer.member(name, text)
        }
    }
}
