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
        var parts: [String] = []
        for (name, size) in units where remaining >= size {
            parts.append("\(remaining / size)\(name)")
            remaining %= size
            if parts.count == 2 { break }
        }
        return parts.joined(separator: " ")
    }
}
