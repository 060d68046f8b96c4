/// Dates of the proleptic Gregorian calendar as days since 1970-01-01 and back (Howard Hinnant's
/// `days_from_civil` and `civil_from_days`), for years 0…9999, where nothing overflows.
public enum CivilDate {
    /// Days since 1970-01-01 of a date; nil for a year outside 0…9999, a month outside 1…12 or a day the month does not have.
    public static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int64? {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthLengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (0...9999).contains(year), (1...12).contains(month), day >= 1, day <= monthLengths[month - 1] else { return nil }
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return Int64(era * 146_097 + dayOfEra - 719_468)
    }

    /// The date of a day counted from 1970-01-01, its year clamped to 0…9999.
    public static func date(daysSinceEpoch days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let clamped = min(max(days, -719_528), 2_932_896)  // 0000-01-01 … 9999-12-31
        let shifted = clamped + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
