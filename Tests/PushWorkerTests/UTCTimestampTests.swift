import Foundation
import PushCore
import PushWorker
import Testing

@Suite("JSON log timestamps")
struct UTCTimestampTests {
    @Test(
        "ts is UTC with milliseconds, the same text Foundation's ISO 8601 formatter gives",
        arguments: [
            Int64(0), 999, 951_782_400_000, 951_868_799_999, 1_703_980_800_000, 1_795_487_286_700, 4_107_542_399_001,
            253_402_300_799_999,
        ])
    func matchesFoundation(_ milliseconds: Int64) {
        let expected = ISO8601DateFormatter.string(
            from: Date(timeIntervalSince1970: Double(milliseconds) / 1000), timeZone: .gmt,
            formatOptions: [.withInternetDateTime, .withFractionalSeconds])
        #expect(UTCTimestamp.iso8601(millisecondsSinceEpoch: milliseconds) == expected)
    }

    @Test("every day of four years, leap days included, matches the calendar")
    func everyDay() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .gmt
        for day in Int64(10_956)..<Int64(12_418) {  // 2000-01-01 … 2003-12-31
            let milliseconds = day * 86_400_000 + 45_296_789
            let parts = calendar.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
            let expected = String(format: "%04d-%02d-%02dT12:34:56.789Z", parts.year!, parts.month!, parts.day!)
            #expect(UTCTimestamp.iso8601(millisecondsSinceEpoch: milliseconds) == expected)
        }
    }
}
