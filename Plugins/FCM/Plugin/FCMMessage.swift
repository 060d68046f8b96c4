import PushCore

/// The `messages:send` body for one delivery.
///
/// Calls, cancels and wake-ups are data-only (Mizu `fcm_removenotification`): the app must
/// run its own code (ring, stop ringing) instead of the system showing a notification.
/// Cancels always go at Android priority `high` and carry the job's data (its `callId`).
/// Android notifications carry the sound (`android.notification.sound`) and the badge
/// (`android.notification.notification_count`). Tokens of iOS apps get an `apns` block: a push
/// that shows nothing is a background push (`content-available: 1`, apns-priority 5, as Apple and
/// Firebase's Message.data reference require). Web tokens get a `webpush` block with TTL and Urgency.
enum FCMMessage {
    static func isDataOnly(_ kind: JobKind) -> Bool { kind == .call || kind == .cancel || kind == .wake }

    /// The platform of a target's token: its own `platform`, iOS for a VoIP binding; nil when unknown.
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

    /// A push to an iOS token that shows nothing: data-only kinds, and messages without title, body, sound or badge.
    static func showsNothingOnApple(_ job: Job) -> Bool { isDataOnly(job.kind) || !job.hasVisibleNotification }

    /// `apns-push-type` and `apns-priority` of the `apns` block: background and 5 for a push that shows nothing
    /// (Firebase's Message.data reference allows only priority 5 for data-only pushes to iOS), else alert by priority.
    static func apnsHeaders(_ job: Job) -> (pushType: String, priority: String) {
        showsNothingOnApple(job) ? ("background", "5") : ("alert", job.priority == .normal ? "5" : "10")
    }

    static func body(_ delivery: Delivery) -> [UInt8] {
        let job = delivery.job
        let target = delivery.target
        let ttl = delivery.remainingTTLSeconds
        let dataOnly = isDataOnly(job.kind)
        let showsNothing = showsNothingOnApple(job)
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.key("message")
        writer.beginObject()
        writer.member("token", target.details(FCMTarget.self)?.token ?? "")
        if !job.data.isEmpty {
            writer.key("data")
            writer.beginObject()
            for (key, value) in job.data.sorted(by: { $0.key < $1.key }) { writer.member(key, value) }
            writer.endObject()
        }
        let notification = dataOnly ? nil : job.notification.flatMap { $0.title != nil || $0.body != nil ? $0 : nil }
        if let notification {
            writer.key("notification")
            writer.beginObject()
            if let title = notification.title { writer.member("title", title) }
            if let body = notification.body { writer.member("body", body) }
            writer.endObject()
        }
        writer.key("android")
        writer.beginObject()
        // A cancel must stop the ringing now, whatever the job's priority says.
        writer.member("priority", job.priority == .high || job.kind == .cancel ? "high" : "normal")
        writer.member("ttl", "\(ttl)s")
        if let collapseKey = job.collapseKey { writer.member("collapse_key", collapseKey) }
        if let notification, notification.sound != nil || notification.badge != nil {
            writer.key("notification")
            writer.beginObject()
            if let sound = notification.sound { writer.member("sound", sound) }
            if let badge = notification.badge { writer.member("notification_count", badge) }
            writer.endObject()
        }
        writer.endObject()
        switch platform(of: target) {
        case "ios":
            writer.key("apns")
            writer.beginObject()
            writer.key("headers")
            writer.beginObject()
            let (pushType, priority) = apnsHeaders(job)
            writer.member("apns-priority", priority)
            writer.member("apns-push-type", pushType)
            writer.member("apns-expiration", job.deadline.isNowOrNever ? "0" : String(job.deadline.expiresAt / 1000))
            if let collapseKey = job.collapseKey, collapseKey.utf8.count <= 64 { writer.member("apns-collapse-id", collapseKey) }
            writer.endObject()
            writer.key("payload")
            writer.beginObject()
            writer.key("aps")
            writer.beginObject()
            if showsNothing {
                writer.member("content-available", Int64(1))
            } else {
                if let sound = job.notification?.sound { writer.member("sound", sound) }
                if let badge = job.notification?.badge { writer.member("badge", badge) }
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
