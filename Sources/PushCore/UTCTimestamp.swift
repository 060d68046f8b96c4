/// A time as RFC 3339 in UTC with milliseconds, `2026-11-24T02:39:36.820Z`: the `ts` of a JSON log line, the
/// `ce_time` of an outcome. Written digit by
/// digit: Foundation's `ISO8601DateFormatter.string(from:timeZone:formatOptions:)` builds a formatter on
/// every call, which made logging one line per delivery cost more CPU than the delivery itself.
public enum UTCTimestamp {
    public static func iso8601(millisecondsSinceEpoch milliseconds: Int64) -> String {
        String(decoding: iso8601Bytes(millisecondsSinceEpoch: milliseconds), as: UTF8.self)
    }

    /// The same text as UTF-8 bytes (a Kafka header's value, without a `String` in between).
    public static func iso8601Bytes(millisecondsSinceEpoch milliseconds: Int64) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        appendISO8601(millisecondsSinceEpoch: milliseconds, to: &bytes)
        return bytes
    }

    /// The same text appended to `bytes` (several values written in one buffer).
    public static func appendISO8601(millisecondsSinceEpoch milliseconds: Int64, to bytes: inout [UInt8]) {
        let (days, millisecondOfDay) = floorDivision(milliseconds, 86_400_000)
        let (year, month, day) = CivilDate.date(daysSinceEpoch: days)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(month, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(day, 2)
        bytes.append(UInt8(ascii: "T"))
        digits(millisecondOfDay / 3_600_000, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(millisecondOfDay / 60_000 % 60, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(millisecondOfDay / 1000 % 60, 2)
        bytes.append(UInt8(ascii: "."))
        digits(millisecondOfDay % 1000, 3)
        bytes.append(UInt8(ascii: "Z"))
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let remainder = value % divisor
        return remainder < 0 ? (value / divisor - 1, remainder + divisor) : (value / divisor, remainder)
    }
}
