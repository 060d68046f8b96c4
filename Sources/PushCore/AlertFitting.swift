/// Shortens a notification's text until a provider's payload fits its size limit: the body first, then
/// the title, each cut on a UTF-8 character boundary and ended with "…". Only a payload that is still too
/// large with neither body nor title does not fit.
public enum AlertFitting {
    public static let ellipsis = "…"

    public struct Fitted: Sendable, Equatable {
        public var payload: [UInt8]
        /// The notification the payload was built from (shortened or not), for building it again with more.
        public var notification: Notification?
        /// Whether the text was shortened (the outcome's `truncated`).
        public var truncated: Bool

        public init(payload: [UInt8], notification: Notification?, truncated: Bool) {
            self.payload = payload
            self.notification = notification
            self.truncated = truncated
        }
    }

    /// - Parameters:
    ///   - limit: the provider's largest payload, in bytes.
    ///   - build: the payload for a notification (the job's, or a shortened copy).
    /// - Returns: nil when even an empty body and title do not fit.
    public static func fit(
        _ notification: Notification?, limit: Int,
        build: (Notification?) -> [UInt8]
    ) -> Fitted? {
        var payload = build(notification)
        guard payload.count > limit else { return Fitted(payload: payload, notification: notification, truncated: false) }
        guard var shortened = notification else { return nil }
        while payload.count > limit {
            let excess = payload.count - limit
            if let body = shortened.body, !body.isEmpty {
                // A payload may carry the body twice (Huawei: in the data and in the notification): an excess as large as
                // the body is not a reason to drop all of it, so the body is halved and measured again.
                let bytes = body.utf8.count
                shortened.body = truncate(body, removing: excess < bytes ? excess : bytes / 2)
            } else if let title = shortened.title, !title.isEmpty {
                shortened.title = truncate(title, removing: excess)
            } else {
                return nil
            }
            payload = build(shortened)
        }
        return Fitted(payload: payload, notification: shortened, truncated: true)
    }

    /// A payload that does not fit even with an empty body and title.
    public struct PayloadTooLarge: Error, Equatable {
        /// Its size with the job's notification as given, override merged.
        public let size: Int
    }

    /// `fit` for a payload the job's `override` (RFC 7396, `PayloadOverride`) is merged into last: the
    /// override is merged at most twice per payload — to measure, and into the shortened payload —
    /// however many shortening steps there are, since an override is outside input and may be large.
    /// Shortening works on the payload before the override with the limit lowered by what the
    /// override adds, which is exact when the override leaves the notification's text alone; an
    /// override that replaces that text itself is not shortened, so then the payload must fit as the
    /// override gives it.
    /// - Parameter build: the payload for a notification, before the override.
    public static func fit(
        _ notification: Notification?, limit: Int, override: JSONValue?,
        build: (Notification?) -> [UInt8]
    ) -> Result<Fitted, PayloadTooLarge> {
        let plain = build(notification)
        let merged = PayloadOverride.apply(override, to: plain)
        guard merged.count > limit else { return .success(Fitted(payload: merged, notification: notification, truncated: false)) }
        let added = merged.count - plain.count
        guard var fitted = fit(notification, limit: limit - added, build: build) else {
            return .failure(PayloadTooLarge(size: merged.count))
        }
        fitted.payload = PayloadOverride.apply(override, to: fitted.payload)
        guard fitted.payload.count <= limit else { return .failure(PayloadTooLarge(size: merged.count)) }
        return .success(fitted)
    }

    /// `text` at least `excess` bytes shorter (room for the ellipsis included), or empty.
    static func truncate(_ text: String, removing excess: Int) -> String {
        let keep = text.utf8.count - (excess + ellipsis.utf8.count)
        guard keep > 0 else { return "" }
        return text.utf8Prefix(keep) + ellipsis
    }
}

extension String {
    /// The longest prefix of at most `maximumBytes` UTF-8 bytes that ends on a character (scalar) boundary.
    public func utf8Prefix(_ maximumBytes: Int) -> String {
        let bytes = Array(utf8)
        guard bytes.count > maximumBytes else { return self }
        var end = max(maximumBytes, 0)
        // A continuation byte (10xxxxxx) is never a scalar's first byte.
        while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return String(decoding: bytes[..<end], as: UTF8.self)
    }
}
