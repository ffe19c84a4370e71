import MooseJWT
import MooseOAuth
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How long the access token of `tokens` is still valid, or how long ago it expired, in words.
func expiryText(_ tokens: TokenSet) -> String {
    guard let expiresAt = tokens.expiresAt else { return "no expiry given" }
    let left = expiresAt.timeIntervalSinceNow
    return left > 0 ? "valid for \(DurationText.describe(left))" : "expired \(DurationText.describe(-left)) ago"
}

extension JSONValue {
    /// A time member of the CLI's JSON output, in Unix seconds: JSON `null` when there is none.
    static func unixSeconds(_ date: Date?) -> JSONValue {
        guard let date else { return .null }
        return .number(JSONNumber(Int64(saturating: date.timeIntervalSince1970)))
    }
}
