import Foundation
import PushCore

/// Parses a `Retry-After` header (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
/// The value comes from whoever answers (for Web Push, any server a subscription names):
/// it is clamped to `RetryPolicy.maximumRetryAfter`, so no value can overflow later arithmetic.
public enum RetryAfter {
    public static func parse(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty, value.utf8.count <= 64 else { return nil }
        let maximum = RetryPolicy.maximumRetryAfter
        if value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            // delay-seconds = 1*DIGIT: any number of digits, so beyond Int64 means "longer than we wait".
            guard let seconds = Int64(value) else { return maximum }
            return Duration.seconds(seconds).clamped(to: maximum)
        }
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: value) {
                let milliseconds = Int64(clamping: (date.timeIntervalSince(now) * 1000).rounded(.up))
                return Duration.milliseconds(max(0, milliseconds)).clamped(to: maximum)
            }
        }
        return nil
    }
}
