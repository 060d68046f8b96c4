import PushCore

/// The `messages:send` body (HMS v1) for one delivery:
/// `{"validate_only": false, "message": {"data", "android": {"urgency", "category"?, "ttl", "collapse_key"?, "bi_tag",
/// "notification"?}, "token": [t]}}`.
///
/// A push with a title and a body (other than a call, cancel or wake-up) is a notification message: the system shows
/// `android.notification` even when the app's process is not running (a data message reaches only a running app).
/// Everything else is a data message (`message.data`) that the app's own code handles. Calls and cancels are
/// high-priority data messages (`urgency` HIGH, `category` VOIP), which Huawei lets an app send once it has been
/// granted the special permission for them; other kinds are HIGH when the job's priority is high. Every push carries
/// the data, which a notification message hands to the app when the user taps it.
///
/// A notification message carries its app's `category` (Huawei's self-classification, `HMSConfiguration.App.category`,
/// `IM` by default): since 2023 Huawei classes a notification message without one as information and marketing, shown
/// silently and limited to a few per device a day; with the app's self-classification right, the category is trusted.
enum HMSMessage {
    /// Huawei: "消息体最大不能超过4096Bytes（不包括Token）" — the body without the tokens.
    static let largestBodyBytes = 4096
    /// `android.ttl` at most "1296000s" (15 days).
    static let longestTTLSeconds: Int64 = 1_296_000
    /// `android.collapse_key`: -1 (keep every offline message), 0 (keep the newest) or a group 1…100.
    static let collapseKeys: ClosedRange<Int64> = -1...100

    static func isVoIP(_ kind: JobKind) -> Bool { kind == .call || kind == .cancel }

    /// Huawei's `AndroidNotification.click_action.type` 3: open the app's home page. Huawei requires a click action
    /// in every notification message ("Sending Downlink Messages", `ClickAction`: 1 the app's own intent or action,
    /// 2 a URL, 3 the app, 4 rich media).
    static let openAppClickAction: Int64 = 3

    /// The notification a push shows as a notification message: title and body both given (Huawei requires both in
    /// `AndroidNotification`), on a kind the app does not have to run code for. Nil: a data message.
    static func shownNotification(_ job: Job) -> Notification? {
        guard !isVoIP(job.kind), job.kind != .wake, let notification = job.notification,
            notification.title != nil, notification.body != nil
        else { return nil }
        return notification
    }

    /// HIGH for calls and cancels (a cancel must stop the ringing now), else the job's priority.
    static func urgency(_ job: Job) -> String {
        isVoIP(job.kind) || job.priority == .high ? "HIGH" : "NORMAL"
    }

    /// The remaining TTL in Huawei's format, within 1 s…15 days. At least 1 s: Huawei answers 80100004 to
    /// an expiry in the past, and documents nothing for "0s"; a now-or-never job gets one second.
    static func ttl(_ delivery: Delivery) -> String {
        "\(min(max(delivery.remainingTTLSeconds, 1), longestTTLSeconds))s"
    }

    /// The job's collapse key when it is one of Huawei's integer groups; a textual key has no HMS counterpart.
    static func collapseKey(_ job: Job) -> Int64? {
        guard let text = job.collapseKey, let value = Int64(text), collapseKeys.contains(value) else { return nil }
        return value
    }

    /// What the app receives: the job's opaque `body`, else its summary JSON.
    static func data(_ job: Job) -> String {
        job.body ?? String(decoding: job.summaryJSON(), as: UTF8.self)
    }

    /// The request body, `overrides.hms` merged last; `tokens` empty gives the body Huawei's 4096-byte limit is about.
    /// - Parameter category: the app's notification category, sent with notification messages.
    static func body(_ delivery: Delivery, tokens: [String], category: String? = nil) -> [UInt8] {
        PayloadOverride.apply(delivery.job.overrides[.hms], to: bodyBeforeOverride(delivery, tokens: tokens, category: category))
    }

    static func bodyBeforeOverride(_ delivery: Delivery, tokens: [String], category: String? = nil) -> [UInt8] {
        let job = delivery.job
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.member("validate_only", false)
        writer.key("message")
        writer.beginObject()
        writer.member("data", data(job))
        writer.key("android")
        writer.beginObject()
        writer.member("urgency", urgency(job))
        let shown = shownNotification(job)
        if isVoIP(job.kind) {
            writer.member("category", "VOIP")
        } else if shown != nil, let category {
            writer.member("category", category)
        }
        writer.member("ttl", ttl(delivery))
        if let collapseKey = collapseKey(job) { writer.member("collapse_key", collapseKey) }
        writer.member("bi_tag", delivery.deliveryKey)
        if let notification = shown, let title = notification.title, let body = notification.body {
            writer.key("notification")
            writer.beginObject()
            writer.member("title", title)
            writer.member("body", body)
            writer.key("click_action")
            writer.beginObject()
            writer.member("type", openAppClickAction)
            writer.endObject()
            writer.endObject()
        }
        writer.endObject()
        writer.key("token")
        writer.beginArray()
        for token in tokens { writer.value(token) }
        writer.endArray()
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }
}
