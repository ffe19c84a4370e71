#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Bounds for NumericDate values (RFC 7519 §2) from outside: ±1e11 seconds around 1970 (years
/// −1200 to 5138) is far beyond any real token and small enough that every date computation and
/// format stays exact. Anything else — huge, negative-huge or not finite — is refused.
public enum NumericDate {
    /// The largest magnitude accepted, in seconds since 1970.
    public static let limit: Double = 1e11

    /// `true` when `seconds` is finite and within ±`limit`.
    public static func isInRange(_ seconds: Double) -> Bool { seconds.isFinite && abs(seconds) <= limit }
}

extension Int64 {
    /// `value` rounded toward zero and clamped to `Int64`'s range; NaN is 0. For numbers from
    /// outside, which must never trap a conversion.
    package init(saturating value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= 9.2e18 {
            self = .max
        } else if value <= -9.2e18 {
            self = .min
        } else {
            self = Int64(value)
        }
    }
}

/// A JSON claim set (RFC 7519 §4) with typed access to the registered claims.
///
/// ```swift
/// let claims = jwt.claims
/// claims.subject                 // "alice"
/// claims.audience                // ["api", "web"]
/// claims.expiresAt               // Date?
/// claims["scope"]?.stringValue   // a custom claim
/// ```
public struct JWTClaims: Sendable, Hashable {
    /// Every claim, in document order.
    public let fields: JSONObject

    /// Wraps a claim set, checking the registered claims' types (RFC 7519 §4.1).
    ///
    /// - Throws: `JWTError.invalidClaim` when, say, `exp` is a string or `aud` an object.
    public init(_ fields: JSONObject) throws(JWTError) {
        self.fields = fields
        for name in ["iss", "sub", "jti"] {
            if let value = fields[name], value.stringValue == nil {
                throw JWTError(
                    JWTError.invalidClaim, "claim \"\(name)\" must be a string, found \(value.typeName)", field: name)
            }
        }
        for name in ["exp", "nbf", "iat"] {
            if let value = fields[name] {
                guard let number = value.doubleValue else {
                    throw JWTError(
                        JWTError.invalidClaim,
                        "claim \"\(name)\" must be a NumericDate (seconds since 1970), found \(value.typeName)",
                        field: name)
                }
                guard NumericDate.isInRange(number) else {
                    throw JWTError(
                        JWTError.invalidClaim,
                        "claim \"\(name)\" is outside the NumericDate range Moose accepts (±\(Int64(NumericDate.limit)) s around 1970)",
                        field: name)
                }
            }
        }
        if let aud = fields["aud"] {
            switch aud {
            case .string: break
            case .array(let values) where values.allSatisfy({ $0.stringValue != nil }): break
            default:
                throw JWTError(
                    JWTError.invalidClaim, "claim \"aud\" must be a string or an array of strings", field: "aud")
            }
        }
    }

    /// The claim named `name`.
    public subscript(name: String) -> JSONValue? { fields[name] }

    /// `iss`: who issued the token.
    public var issuer: String? { fields["iss"]?.stringValue }
    /// `sub`: whom the token is about.
    public var subject: String? { fields["sub"]?.stringValue }
    /// `aud`: the intended audiences; a single string becomes a one-element array (RFC 7519 §4.1.3).
    public var audience: [String]? {
        switch fields["aud"] {
        case .string(let single): [single]
        case .array(let values): values.compactMap(\.stringValue)
        default: nil
        }
    }
    /// `exp`: expiration time.
    public var expiresAt: Date? { date("exp") }
    /// `nbf`: not before.
    public var notBefore: Date? { date("nbf") }
    /// `iat`: issued at.
    public var issuedAt: Date? { date("iat") }
    /// `jti`: the token's unique identifier.
    public var jwtID: String? { fields["jti"]?.stringValue }

    private func date(_ name: String) -> Date? {
        guard let seconds = fields[name]?.doubleValue else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }

    /// `true` when `exp` is at or before `now - leeway` (RFC 7519 §4.1.4). A token without `exp` never expires.
    public func isExpired(at now: Date = Date(), leeway: TimeInterval = 0) -> Bool {
        guard let expiresAt else { return false }
        return now.timeIntervalSince1970 >= expiresAt.timeIntervalSince1970 + leeway
    }

    /// Seconds left until `exp` (negative once expired); `nil` without `exp`.
    public func timeToExpiry(from now: Date = Date()) -> TimeInterval? {
        guard let expiresAt else { return nil }
        return expiresAt.timeIntervalSince(now)
    }
}
