#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseCrypto
import MooseJWT

/// The tokens a grant produced (RFC 6749 §5.1), with the expiry measured from when the request was sent.
///
/// `description` never shows a token: only a short SHA-256 fingerprint of each.
public struct TokenSet: Sendable, Codable, Hashable, CustomStringConvertible {
    /// The access token.
    public var accessToken: String
    /// The token type, normalised (`Bearer`, `DPoP`…; compared case-insensitively, RFC 6749 §5.1).
    public var tokenType: String
    /// The refresh token, if any.
    public var refreshToken: String?
    /// The ID token (a JWT), if any.
    public var idToken: String?
    /// When the access token expires, if the server said (`expires_in`, counted from `requestedAt`).
    public var expiresAt: Date?
    /// The granted scopes (the response's `scope`, else the requested ones).
    public var scopes: [String]
    /// When the request that produced these tokens was sent.
    public var requestedAt: Date
    /// The provider's clock minus ours when the tokens arrived (from the HTTP `Date` header), if known.
    public var serverClockOffset: TimeInterval?
    /// The DPoP key these tokens are bound to (RFC 9449), kept with them so it is stored, refreshed
    /// and logged out together with them; `nil` for bearer tokens.
    public var dpopKey: DPoPKey?
    /// The RFC 8707 resource these tokens were requested for (the access token's audience, when the
    /// server honours resource indicators); `nil` when none was named. A refresh names it again.
    public var resource: String?
    /// What a token exchange issued (RFC 8693 §2.2.1 `issued_token_type`: an access token, a JWT,
    /// an ID token…); `nil` for every other grant.
    public var issuedTokenType: String?

    /// `true` when the server bound the tokens to a DPoP key (`token_type` `DPoP`, RFC 9449 §5):
    /// they are sent only with proofs, and never refreshed without the key.
    public var isDPoPBound: Bool { tokenType.utf8.count == 4 && tokenType.lowercased() == "dpop" }

    /// The longest access-token lifetime believed from `expires_in`: one year. A provider that says
    /// more (or `1e300`) is taken as saying one year, so every later date computation stays exact.
    public static let maximumLifetime: TimeInterval = 365 * 86_400

    /// The lifetime to believe from an `expires_in` value: negative or NaN → 0 (already expired),
    /// more than `maximumLifetime` (or infinite) → `maximumLifetime`.
    public static func clampedLifetime(_ seconds: Double) -> TimeInterval {
        guard !seconds.isNaN else { return 0 }
        return min(max(seconds, 0), maximumLifetime)
    }

    /// A token set.
    public init(
        accessToken: String, tokenType: String = "Bearer", refreshToken: String? = nil, idToken: String? = nil,
        expiresAt: Date? = nil, scopes: [String] = [], requestedAt: Date = Date(), resource: String? = nil
    ) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.expiresAt = expiresAt
        self.scopes = scopes
        self.requestedAt = requestedAt
        self.resource = resource
    }

    /// `true` when the access token is valid for at least `minimumValidity` more seconds at `now`.
    /// A token without an expiry is taken as valid.
    public func isValid(for minimumValidity: TimeInterval = 0, at now: Date = Date()) -> Bool {
        guard let expiresAt else { return true }
        return expiresAt.timeIntervalSince(now) >= minimumValidity
    }

    /// The default largest share of a token's lifetime a margin may ask for
    /// (`RefreshCoordinator.Configuration.maximumMarginFraction`, `moose token --min-validity`).
    public static let defaultMaximumMarginFraction: Double = 0.25

    /// The access token's lifetime as the server gave it (`expiresAt` − `requestedAt`, never
    /// negative), or `nil` when the server gave no expiry.
    public var lifetime: TimeInterval? {
        guard let expiresAt else { return nil }
        let seconds = expiresAt.timeIntervalSince(requestedAt)
        return seconds.isNaN ? 0 : max(seconds, 0)
    }

    /// The margin to ask of this token: `requested`, but at most `fraction` of the token's own
    /// lifetime — so a provider that issues tokens living less than the margin (30 s tokens against
    /// a 30 s margin) does not make every freshly issued token count as "about to expire".
    public func margin(_ requested: TimeInterval, cappedAt fraction: Double) -> TimeInterval {
        Self.margin(requested, lifetime: lifetime, cappedAt: fraction)
    }

    /// The one margin rule, for any token: `requested`, but at most `fraction` of `lifetime` (`nil`:
    /// `requested` as it is).
    static func margin(_ requested: TimeInterval, lifetime: TimeInterval?, cappedAt fraction: Double) -> TimeInterval {
        guard let lifetime, fraction.isFinite, fraction >= 0 else { return requested }
        return min(requested, lifetime * min(fraction, 1))
    }

    /// The ID token's expiry (its `exp`), read without verifying the signature — it was validated
    /// when the tokens were stored; `nil` without an ID token or a readable `exp`.
    public var idTokenExpiresAt: Date? {
        guard let idToken, let claims = try? JWT(compact: idToken).claims else { return nil }
        return claims.expiresAt
    }

    /// Whether the ID token is valid long enough — the rule of `isValidLongEnough(_:maximumMarginFraction:at:)`
    /// applied to the ID token's own `exp`, its lifetime taken as `exp` − `iat`. `false` without an ID
    /// token or a readable `exp` (an ID token's expiry is required: OIDC Core §2).
    ///
    /// - Parameters:
    ///   - minimumValidity: seconds the ID token must still be valid, capped at `maximumMarginFraction`
    ///     of its lifetime.
    ///   - maximumMarginFraction: the largest share of its lifetime the margin may ask for.
    ///   - now: the time to judge at.
    public func isIDTokenValidLongEnough(
        _ minimumValidity: TimeInterval, maximumMarginFraction: Double = defaultMaximumMarginFraction,
        at now: Date = Date()
    ) -> Bool {
        guard let idToken, let claims = try? JWT(compact: idToken).claims, let expiry = claims.expiresAt else {
            return false
        }
        let lifetime = claims.issuedAt.flatMap { expiry > $0 ? expiry.timeIntervalSince($0) : nil }
        let margin = Self.margin(minimumValidity, lifetime: lifetime, cappedAt: maximumMarginFraction)
        return expiry.timeIntervalSince(now) >= margin
    }

    /// Whether the access token is valid long enough: for `minimumValidity` seconds, capped at
    /// `maximumMarginFraction` of its own lifetime. The one "valid long enough" rule — the
    /// coordinator's (`RefreshCoordinator.accessToken(minimumValidity:)`) and `moose token`'s.
    public func isValidLongEnough(
        _ minimumValidity: TimeInterval, maximumMarginFraction: Double = defaultMaximumMarginFraction,
        at now: Date = Date()
    ) -> Bool {
        isValid(for: margin(minimumValidity, cappedAt: maximumMarginFraction), at: now)
    }

    /// The first 6 hex digits of a token's SHA-256: enough to tell tokens apart in logs, useless to an attacker.
    public static func fingerprint(_ token: String) -> String {
        DigestAlgorithm.sha256.hash(Array(token.utf8)).prefix(3).map { byte in
            let hex = String(byte, radix: 16)
            return hex.count == 1 ? "0" + hex : hex
        }.joined()
    }

    /// Fingerprints only.
    public var description: String {
        var parts = ["access_token #\(Self.fingerprint(accessToken))", "type \(tokenType)"]
        if let refreshToken { parts.append("refresh_token #\(Self.fingerprint(refreshToken))") }
        if idToken != nil { parts.append("id_token") }
        if let expiresAt { parts.append("expires \(Int64(saturating: expiresAt.timeIntervalSince1970))") }
        if !scopes.isEmpty { parts.append("scope \(scopes.joined(separator: " "))") }
        if let dpopKey { parts.append("dpop jkt \(dpopKey.thumbprint)") }
        if let resource { parts.append("resource \(resource)") }
        return "TokenSet(" + parts.joined(separator: ", ") + ")"
    }
}
