#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Logging

/// IMF-fixdate (RFC 9110 §5.6.7), the format of `Date` and `Retry-After`.
public enum HTTPDate {
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Parses an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT` (RFC 9110 §5.6.7); `nil` otherwise.
    /// Every field is bounded before any arithmetic: year 1–9999, day 1–31, hour 0–23, minute 0–59,
    /// second 0–60 (a hostile `Date: … 99999999 …` is refused, never trapped on).
    public static func parse(_ text: String) -> Date? {
        let parts = text.utf8.split(separator: 0x20)
        guard parts.count == 6, parts[5].elementsEqual("GMT".utf8),
            let day = digits(parts[1], count: 1...2), (1...31).contains(day),
            let month = months.firstIndex(where: { $0.utf8.elementsEqual(parts[2]) }),
            let year = digits(parts[3], count: 4...4), year >= 1
        else { return nil }
        let time = parts[4].split(separator: 0x3A, omittingEmptySubsequences: false)
        guard time.count == 3, let hour = digits(time[0], count: 2...2), let minute = digits(time[1], count: 2...2),
            let second = digits(time[2], count: 2...2), hour < 24, minute < 60, second <= 60
        else { return nil }
        let days = daysFromCivil(year, Int64(month + 1), day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second))
    }

    /// The decimal value of `bytes` when it is `count` ASCII digits, else `nil`.
    static func digits(_ bytes: some Collection<UInt8>, count: ClosedRange<Int>) -> Int64? {
        guard count.contains(bytes.count) else { return nil }
        var value: Int64 = 0
        for byte in bytes {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int64(byte - 0x30)
        }
        return value
    }

    /// Formats a date as IMF-fixdate. Total: dates before year 1 or after 9999 (or not finite) are
    /// clamped to those years' ends.
    public static func format(_ date: Date) -> String {
        let raw = date.timeIntervalSince1970
        let seconds = raw.isNaN ? 0 : Int64(min(max(raw, -62_135_596_800), 253_402_300_799))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = seconds - days * 86_400
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][Int(((days % 7) + 7) % 7)]
        let (y, m, d) = civilFromDays(days)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        // RFC 9110 §5.6.7: the year is four digits (year 1 is "0001"; found by tools/fuzz: an unpadded
        // year did not parse back).
        let year = String(y)
        let paddedYear = String(repeating: "0", count: max(0, 4 - year.count)) + year
        return
            "\(weekday), \(two(d)) \(months[Int(m) - 1]) \(paddedYear) \(two(rest / 3600)):\(two(rest % 3600 / 60)):\(two(rest % 60)) GMT"
    }

    static func daysFromCivil(_ year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        return era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
    }

    static func civilFromDays(_ days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
