import Foundation

/// Parses a `Retry-After` header (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
public enum RetryAfter {
    public static func parse(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int64(value), seconds >= 0 { return .seconds(seconds) }
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: value) {
                return .milliseconds(max(0, Int64((date.timeIntervalSince(now) * 1000).rounded(.up))))
            }
        }
        return nil
    }
}
