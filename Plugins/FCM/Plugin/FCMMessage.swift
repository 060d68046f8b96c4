import PushCore
import PushPluginAPI

/// The `messages:send` body for one delivery.
///
/// Calls, cancels and wake-ups are data-only on Android (Mizu `fcm_removenotification`): the app must
/// run its own code (ring, stop ringing) instead of the system showing a notification.
/// Calls and cancels always go at Android priority `high` (normal priority "may be delayed" for a backgrounded
/// app) and carry the job's data (its `callId`).
/// Android notifications carry the sound (`android.notification.sound`) and the badge
/// (`android.notification.notification_count`). Tokens of iOS apps get an `apns` block: a push
/// that shows nothing is a background push (`content-available: 1`, apns-priority 5, as Apple and
/// Firebase's Message.data reference require); a call or cancel is a visible alert at apns-priority 10 with
/// `content-available: 1` (a background push is delivered at Apple's discretion, too late to ring), and one with
/// nothing to show is not sent (`FCMProvider`). Web tokens get a `webpush` block with TTL and Urgency.
enum FCMMessage {
    /// Firebase ("About FCM messages"): "Maximum payload for both message types is 4096 bytes"; a notification
    /// message's payload is its "predefined set of user-visible keys" and optional data, a data message's "only your
    /// user-defined custom key-value pairs". Measured by `payload(of:)`.
    static let largestPayloadBytes = 4096

    /// The bytes FCM's limit is about, from a message body: the compact JSON of `message.data`, `message.notification`
    /// and `message.android.notification` (the user-visible keys). The token, the platform blocks' headers, TTL and
    /// priority are not payload. Firebase does not say how it counts the pairs; their JSON is at least what it
    /// carries. A body within the limit as a whole is within it in its parts, so it is returned unparsed.
    static func payload(of body: [UInt8]) -> [UInt8] {
        guard body.count > largestPayloadBytes, let message = (try? JSONParser.parse(body))?["message"] else { return body }
        var writer = JSONWriter(capacity: body.count)
        for member in [message["data"], message["notification"], message["android"]?["notification"]] {
            if let member { writer.value(member) }
        }
        return writer.bytes
    }

    static func isDataOnly(_ kind: JobKind) -> Bool { kind == .call || kind == .cancel || kind == .wake }

    /// Calls and cancels: they must reach the device now, on every platform.
    static func isCallOrCancel(_ kind: JobKind) -> Bool { kind == .call || kind == .cancel }

    /// A call or cancel to an iOS token that has nothing to show (no title, body, sound or badge): only a background
    /// push could carry it, and Apple delivers those at its discretion ("don't try to send more than two or three per
    /// hour"), so it is not sent: calls to iOS need APNs VoIP.
    static func needsVoIPOnApple(_ job: Job) -> Bool { isCallOrCancel(job.kind) && !job.hasVisibleNotification }

    /// The platform a target says itself: its own `platform`, iOS for a VoIP binding; nil when it does not say
    /// (`FCMConfiguration.platform(of:)` adds what the app configuration says).
    static func platform(of target: Target) -> String? { target.details(FCMTarget.self)?.resolvedPlatform }

    /// Firebase's Message.data reference: "The key should not be a reserved word ("from", "message_type",
    /// or any word starting with "google" or "gcm")". FCM answers INVALID_ARGUMENT to such a key.
    static func isReservedDataKey(_ key: String) -> Bool {
        key == "from" || key == "message_type" || key.hasPrefix("google") || key.hasPrefix("gcm")
    }

    /// The first reserved key of `data` (in key order), if any.
    static func reservedDataKey(in data: [String: String]) -> String? {
        data.keys.filter(isReservedDataKey).min()
    }

    /// A push to an iOS token that shows nothing: wake-ups, and other kinds without title, body, sound or badge.
    static func showsNothingOnApple(_ job: Job) -> Bool { job.kind == .wake || !job.hasVisibleNotification }

    /// `apns-push-type` and `apns-priority` of the `apns` block: background and 5 for a push that shows nothing
    /// (Firebase's Message.data reference allows only priority 5 for data-only pushes to iOS); alert and 10 for a
    /// call or cancel, whatever the job's priority (it must ring, or stop ringing, now); else alert by priority.
    static func apnsHeaders(_ job: Job) -> (pushType: String, priority: String) {
        if showsNothingOnApple(job) { return ("background", "5") }
        return ("alert", job.priority == .normal && !isCallOrCancel(job.kind) ? "5" : "10")
    }

    /// The message with the job's notification for the platform the target says, `overrides.fcm` merged last.
    static func body(_ delivery: Delivery) -> [UInt8] {
        PayloadOverride.apply(
            delivery.job.overrides[.fcm],
            to: body(
                delivery, platform: platform(of: delivery.target),
                notification: delivery.job.notification))
    }

    /// The message with `notification` (the job's, or one shortened to fit), before overrides.
    /// - Parameters:
    ///   - platform: the token's platform (`ios`, `web`, else none), which chooses the `apns` or `webpush` block.
    ///   - includingToken: false leaves the device token out of the body.
    static func body(
        _ delivery: Delivery, platform: String?, notification jobNotification: Notification?,
        includingToken: Bool = true
    ) -> [UInt8] {
        let job = delivery.job
        let target = delivery.target
        let ttl = delivery.remainingTTLSeconds
        let dataOnly = isDataOnly(job.kind)
        let showsNothing = showsNothingOnApple(job)
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.key("message")
        writer.beginObject()
        if includingToken { writer.member("token", target.details(FCMTarget.self)?.token ?? "") }
        if !job.data.isEmpty {
            writer.key("data")
            writer.beginObject()
            for (key, value) in job.data.sorted(by: { $0.key < $1.key }) { writer.member(key, value) }
            writer.endObject()
        }
        // Android shows a notification only for text; a sound or badge alone stays a data message there.
        let notification = dataOnly ? nil : jobNotification.flatMap { $0.hasText || $0.image != nil ? $0 : nil }
        if let notification, notification.title != nil || notification.body != nil || notification.image != nil {
            writer.key("notification")
            writer.beginObject()
            if let title = notification.title { writer.member("title", title) }
            if let body = notification.body { writer.member("body", body) }
            if let image = notification.image { writer.member("image", image) }
            writer.endObject()
        }
        writer.key("android")
        writer.beginObject()
        // A call must ring and a cancel stop the ringing now, whatever the job's priority says.
        writer.member("priority", job.priority == .high || isCallOrCancel(job.kind) ? "high" : "normal")
        writer.member("ttl", "\(ttl)s")
        if let collapseKey = job.collapseKey { writer.member("collapse_key", collapseKey) }
        if let notification, FCMAndroidNotification.hasMembers(notification) {
            writer.key("notification")
            FCMAndroidNotification.write(notification, into: &writer)
        }
        writer.endObject()
        switch platform {
        case "ios":
            writer.key("apns")
            writer.beginObject()
            writer.key("headers")
            writer.beginObject()
            let (pushType, priority) = apnsHeaders(job)
            writer.member("apns-priority", priority)
            writer.member("apns-push-type", pushType)
            writer.member("apns-expiration", job.deadline.isNowOrNever ? "0" : String(job.deadline.expiresAt / 1000))
            if let collapseKey = job.collapseKey { writer.member("apns-collapse-id", AppleCollapseId.header(for: collapseKey)) }
            writer.endObject()
            writer.key("payload")
            writer.beginObject()
            writer.key("aps")
            writer.beginObject()
            if showsNothing {
                writer.member("content-available", Int64(1))
            } else if let notification = jobNotification {
                // Title and body travel in `message.notification`; an alert with a subtitle or localized
                // text is written whole, since FCM's notification has no place for those. A call or cancel has no
                // `message.notification` (Android's push is data-only): its alert is written whole here, and
                // `content-available` hands the data to the app's code as well.
                if dataOnly { writer.member("content-available", Int64(1)) }
                AppleNotificationMembers.write(
                    notification, into: &writer,
                    includeAlert: dataOnly || AppleNotificationMembers.needsOwnAlert(notification))
            }
            writer.endObject()
            writer.endObject()
            writer.endObject()
        case "web":
            writer.key("webpush")
            writer.beginObject()
            writer.key("headers")
            writer.beginObject()
            writer.member("TTL", String(ttl))
            writer.member("Urgency", job.priority == .high ? "high" : "normal")
            writer.endObject()
            writer.endObject()
        default:
            break
        }
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }
}
