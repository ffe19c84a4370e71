#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// What to check in a claim set once the signature is good.
public struct ClaimValidation: Sendable {
    /// The exact `iss` required (`nil`: not checked).
    public var issuer: String?
    /// Audiences this verifier accepts; `aud` must contain at least one, compared byte for byte.
    /// `nil`: none configured — then a token that *has* an `aud` is refused (RFC 7519 §4.1.3)
    /// unless `acceptsAnyAudience` is set.
    public var audiences: Set<String>?
    /// Accept a token whatever its `aud` says when `audiences` is `nil` — an explicit choice for
    /// tools that only look (`moose inspect --any-audience`), never a default.
    public var acceptsAnyAudience: Bool
    /// Clock-skew tolerance for `exp`, `nbf` and `iat`, in seconds.
    public var leeway: TimeInterval
    /// Claims that must be present (for example `["exp", "sub"]`).
    public var requiredClaims: Set<String>
    /// Whether to check `exp`, `nbf` and `iat` at all.
    public var checksTime: Bool
    /// The clock: returns "now". Inject a fixed time in tests and for reproducible output.
    public var clock: @Sendable () -> Date

    /// Validation settings; everything optional is off by default except the time checks.
    public init(
        issuer: String? = nil,
        audiences: Set<String>? = nil,
        leeway: TimeInterval = 0,
        acceptsAnyAudience: Bool = false,
        requiredClaims: Set<String> = [],
        checksTime: Bool = true,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.issuer = issuer
        self.audiences = audiences
        self.acceptsAnyAudience = acceptsAnyAudience
        self.leeway = leeway
        self.requiredClaims = requiredClaims
        self.checksTime = checksTime
        self.clock = clock
    }

    /// Checks `claims`, throwing the first failure. Order: required claims, `exp`, `nbf`, `iat`, `iss`, `aud`.
    public func validate(_ claims: JWTClaims) throws(JWTError) {
        if let first = failures(claims).first { throw first }
    }

    /// Every failed check, in the order `validate` applies them (for tools that report them all).
    public func failures(_ claims: JWTClaims) -> [JWTError] {
        var failures: [JWTError] = []
        for name in requiredClaims.sorted() where claims[name] == nil {
            failures.append(JWTError(JWTError.missingClaim, "required claim \"\(name)\" is missing", field: name))
        }
        if checksTime {
            let now = clock()
            if let exp = claims.expiresAt, now.timeIntervalSince1970 >= exp.timeIntervalSince1970 + leeway {
                failures.append(
                    JWTError(
                        JWTError.expired,
                        "token expired \(DurationText.describe(now.timeIntervalSince(exp))) ago (exp \(ISO8601.string(from: exp)), leeway \(DurationText.describe(leeway)))",
                        field: "exp"))
            }
            if let nbf = claims.notBefore, now.timeIntervalSince1970 + leeway < nbf.timeIntervalSince1970 {
                failures.append(
                    JWTError(
                        JWTError.notYetValid,
                        "token is not valid for another \(DurationText.describe(nbf.timeIntervalSince(now))) (nbf \(ISO8601.string(from: nbf)))",
                        field: "nbf"))
            }
            if let iat = claims.issuedAt, now.timeIntervalSince1970 + leeway < iat.timeIntervalSince1970 {
                failures.append(
                    JWTError(
                        JWTError.issuedInFuture,
                        "token was issued \(DurationText.describe(iat.timeIntervalSince(now))) in the future (iat \(ISO8601.string(from: iat)))",
                        field: "iat"))
            }
        }
        if let issuer {
            if let actual = claims.issuer {
                // Exact, code point for code point (RFC 7519 §2 StringOrURI): String == would equate
                // canonically equivalent spellings (NFC and NFD).
                if !actual.utf8.elementsEqual(issuer.utf8) {
                    failures.append(
                        JWTError(
                            JWTError.issuerMismatch, "issuer is \"\(actual)\", expected \"\(issuer)\"", field: "iss"))
                }
            } else {
                failures.append(
                    JWTError(JWTError.missingClaim, "claim \"iss\" is missing; expected \"\(issuer)\"", field: "iss"))
            }
        }
        if let audiences {
            if let actual = claims.audience {
                if !actual.contains(where: { value in audiences.contains { $0.utf8.elementsEqual(value.utf8) } }) {
                    failures.append(
                        JWTError(
                            JWTError.audienceMismatch,
                            "audience \(actual) does not include \(audiences.sorted().joined(separator: " or "))",
                            field: "aud"))
                }
            } else {
                failures.append(JWTError(JWTError.missingClaim, "claim \"aud\" is missing", field: "aud"))
            }
        } else if let actual = claims.audience, !acceptsAnyAudience {
            failures.append(
                JWTError(
                    JWTError.audienceNotChecked,
                    "token is meant for audience \(actual) and no audience was configured to check it against "
                        + "(RFC 7519 §4.1.3); configure this verifier's audience, or accept any audience explicitly",
                    field: "aud"))
        }
        return failures
    }
}
