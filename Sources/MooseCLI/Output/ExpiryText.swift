import MooseJWT
import MooseOAuth

/// How long the access token of `tokens` is still valid, or how long ago it expired, in words.
func expiryText(_ tokens: TokenSet) -> String {
    guard let expiresAt = tokens.expiresAt else { return "no expiry given" }
    let left = expiresAt.timeIntervalSinceNow
    return left > 0 ? "valid for \(DurationText.describe(left))" : "expired \(DurationText.describe(-left)) ago"
}
