#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

/// Human-readable durations: `3m 12s`, `2h 5m`, `4d 3h`.
package enum DurationText {
    /// `seconds` as the two largest units (`1h 2m`), or `0s`. Total: beyond a million years (or not
    /// finite) it says so instead of trapping.
    package static func describe(_ seconds: TimeInterval) -> String {
        guard seconds.isFinite else { return "forever" }
        guard abs(seconds) < 3.2e13 else { return "over a million years" }
        var remaining = Int64(abs(seconds).rounded(.down))
        if remaining == 0 { return "0s" }
        let units: [(String, Int64)] = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)]
        // Concatenated by hand: a generic `joined` costs `moose inspect` ~5% of its instructions
        // in run-time metadata look-ups.
        var text = ""
        var count = 0
        for (name, size) in units where remaining >= size {
            if count > 0 { text += " " }
            text += (remaining / size).description
            text += name
            remaining %= size
            count += 1
            if count == 2 { break }
        }
        return text
    }

    /// The longest duration `parse` accepts: one year.
    package static let maximumParsed: TimeInterval = 365 * 86_400

    /// A duration as a person types it: whole or decimal seconds (`60`, `0.5`), or whole numbers with
    /// units, one or several (`90s`, `2m`, `1h`, `1d`, `1h30m`). `nil` for anything else, a negative
    /// value, or more than `maximumParsed`. Total over any text (at most 32 bytes are considered).
    package static func parse(_ text: String) -> TimeInterval? {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 32 else { return nil }
        if bytes.allSatisfy({ (0x30...0x39).contains($0) || $0 == 0x2E }), bytes.filter({ $0 == 0x2E }).count <= 1,
            bytes.first != 0x2E, bytes.last != 0x2E
        {
            guard let seconds = Double(text), seconds.isFinite, seconds >= 0, seconds <= maximumParsed else {
                return nil
            }
            return seconds
        }
        var total: Int64 = 0
        var number: Int64? = nil
        var lastUnit: Int64 = .max
        for byte in bytes {
            if (0x30...0x39).contains(byte) {
                let digit = Int64(byte - 0x30)
                let (times, overflowA) = (number ?? 0).multipliedReportingOverflow(by: 10)
                let (sum, overflowB) = times.addingReportingOverflow(digit)
                guard !overflowA, !overflowB, sum <= Int64(maximumParsed) else { return nil }
                number = sum
                continue
            }
            let unit: Int64
            switch byte {
            case UInt8(ascii: "s"): unit = 1
            case UInt8(ascii: "m"): unit = 60
            case UInt8(ascii: "h"): unit = 3_600
            case UInt8(ascii: "d"): unit = 86_400
            default: return nil
            }
            // Each unit once, largest first (`1h30m`, not `30m1h` or `1m1m`).
            guard let value = number, unit < lastUnit else { return nil }
            let (scaled, overflowA) = value.multipliedReportingOverflow(by: unit)
            let (sum, overflowB) = total.addingReportingOverflow(scaled)
            guard !overflowA, !overflowB, sum <= Int64(maximumParsed) else { return nil }
            total = sum
            number = nil
            lastUnit = unit
        }
        guard number == nil else { return nil } // digits after the last unit: "1h30"
        return TimeInterval(total)
    }
}
