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
        guard let date = HTTPDate.secondsSince1970(value, now: now) else { return nil }
        let milliseconds = Int64(clamping: ((Double(date) - now.timeIntervalSince1970) * 1000).rounded(.up))
        return Duration.milliseconds(max(0, milliseconds)).clamped(to: maximum)
    }
}

/// An HTTP-date (RFC 9110 §5.6.7) read byte by byte: IMF-fixdate, or the obsolete RFC 850 and
/// asctime forms a recipient must still accept. Anything else is no date. Foundation's
/// `DateFormatter` is not used: it traps on some non-ASCII input, and the text is the sender's.
public enum HTTPDate {
    private static let dayNames = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let longDayNames = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since 1970 (UTC) of an HTTP-date, or nil when it is not one.
    public static func secondsSince1970(_ text: String, now: Date = Date()) -> Int64? {
        let bytes = Array(text.utf8)
        var fixdate = Reader(bytes), rfc850 = Reader(bytes), asctime = Reader(bytes)
        return imfFixdate(&fixdate) ?? rfc850Date(&rfc850, now: now) ?? asctimeDate(&asctime)
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT`
    private static func imfFixdate(_ reader: inout Reader) -> Int64? {
        guard reader.word(in: dayNames) != nil, reader.literal(", "),
            let day = reader.digits(2), reader.literal(" "), let month = reader.word(in: monthNames), reader.literal(" "),
            let year = reader.digits(4), reader.literal(" "), let time = timeOfDay(&reader), reader.literal(" GMT"), reader.isAtEnd
        else { return nil }
        return epochSeconds(year: year, month: month + 1, day: day, time: time)
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`: a two-digit year more than 50 years ahead is the past century's.
    private static func rfc850Date(_ reader: inout Reader, now: Date) -> Int64? {
        guard reader.word(in: longDayNames) != nil, reader.literal(", "),
            let day = reader.digits(2), reader.literal("-"), let month = reader.word(in: monthNames), reader.literal("-"),
            let shortYear = reader.digits(2), reader.literal(" "), let time = timeOfDay(&reader), reader.literal(" GMT"), reader.isAtEnd
        else { return nil }
        let currentYear = Calendar(identifier: .gregorian).dateComponents(in: .gmt, from: now).year ?? 1970
        var year = currentYear - currentYear % 100 + shortYear
        if year > currentYear + 50 { year -= 100 }
        return epochSeconds(year: year, month: month + 1, day: day, time: time)
    }

    /// `Sun Nov  6 08:49:37 1994`
    private static func asctimeDate(_ reader: inout Reader) -> Int64? {
        guard reader.word(in: dayNames) != nil, reader.literal(" "), let month = reader.word(in: monthNames), reader.literal(" ")
        else { return nil }
        let day: Int
        if reader.literal(" ") {
            guard let digit = reader.digits(1) else { return nil }
            day = digit
        } else {
            guard let digits = reader.digits(2) else { return nil }
            day = digits
        }
        guard reader.literal(" "), let time = timeOfDay(&reader), reader.literal(" "), let year = reader.digits(4), reader.isAtEnd
        else { return nil }
        return epochSeconds(year: year, month: month + 1, day: day, time: time)
    }

    /// `08:49:37`: hour 0…23, minute 0…59, second 0…60 (a leap second).
    private static func timeOfDay(_ reader: inout Reader) -> Int64? {
        guard let hour = reader.digits(2), reader.literal(":"), let minute = reader.digits(2), reader.literal(":"),
            let second = reader.digits(2), hour <= 23, minute <= 59, second <= 60
        else { return nil }
        return Int64(hour * 3600 + minute * 60 + second)
    }

    private static func epochSeconds(year: Int, month: Int, day: Int, time: Int64) -> Int64? {
        CivilDate.daysSinceEpoch(year: year, month: month, day: day).map { $0 * 86_400 + time }
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var isAtEnd: Bool { index == bytes.count }

        mutating func literal(_ text: StaticString) -> Bool {
            let expected = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
            guard bytes.count - index >= expected.count, bytes[index..<index + expected.count].elementsEqual(expected) else { return false }
            index += expected.count
            return true
        }

        /// The index of the name (case-sensitive, as RFC 9110 §5.6.7 spells them) that comes next.
        mutating func word(in names: [String]) -> Int? {
            for (position, name) in names.enumerated() {
                let utf8 = Array(name.utf8)
                if bytes.count - index >= utf8.count, bytes[index..<index + utf8.count].elementsEqual(utf8) {
                    index += utf8.count
                    return position
                }
            }
            return nil
        }

        mutating func digits(_ count: Int) -> Int? {
            guard bytes.count - index >= count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += count
            return value
        }
    }
}
