import PushCore
import Testing

@Suite("Civil dates (proleptic Gregorian) as days since 1970-01-01")
struct CivilDateTests {
    @Test("a date and its day count convert into each other, for every day of years 0…9999 in steps")
    func roundTrip() {
        var days: Int64 = -719_528  // 0000-01-01
        while days <= 2_932_896 {  // 9999-12-31
            let date = CivilDate.date(daysSinceEpoch: days)
            #expect(CivilDate.daysSinceEpoch(year: Int(date.year), month: Int(date.month), day: Int(date.day)) == days)
            days += 97
        }
    }

    @Test("known days: the epoch, a leap day, the last day of 9999")
    func knownDays() {
        #expect(CivilDate.daysSinceEpoch(year: 1970, month: 1, day: 1) == 0)
        #expect(CivilDate.daysSinceEpoch(year: 2000, month: 2, day: 29) == 11_016)
        #expect(CivilDate.date(daysSinceEpoch: 11_016) == (2000, 2, 29))
        #expect(CivilDate.date(daysSinceEpoch: 2_932_896) == (9999, 12, 31))
    }

    @Test(
        "a day the calendar does not have is no date; a day count beyond the years 0…9999 is clamped, never trapped on",
        arguments: [(1900, 2, 29), (2023, 2, 29), (2024, 4, 31), (2024, 13, 1), (2024, 0, 1), (10_000, 1, 1), (-1, 12, 31), (2024, 1, 0)])
    func outside(_ date: (Int, Int, Int)) {
        #expect(CivilDate.daysSinceEpoch(year: date.0, month: date.1, day: date.2) == nil)
    }

    @Test("extreme day counts clamp to 0000-01-01 and 9999-12-31")
    func clamped() {
        #expect(CivilDate.date(daysSinceEpoch: .min) == (0, 1, 1))
        #expect(CivilDate.date(daysSinceEpoch: .max) == (9999, 12, 31))
    }
}
