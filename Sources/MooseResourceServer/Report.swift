#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseJWT

extension VerifiedPrincipal {
    /// The principal as one JSON object, for a script or an audit log of what was accepted:
    /// `valid` (`true`), `subject`, `client_id`, `issuer`, `audiences`, `scopes`, `checked_by` (`jwt`
    /// or `introspection`), `expires_at` (seconds since 1970, or `null`), `token_id` and
    /// `confirmation_thumbprint` (RFC 9449 §6.1's `cnf.jkt`; `null` when absent) and `claims` (every claim
    /// of the token, or of the introspection answer). Never the token itself.
    ///
    /// The values are the token's own text: escape them before they reach a terminal.
    public var jsonReport: JSONValue {
        var object: JSONObject = [
            "valid": true, "subject": .string(subject), "client_id": .string(clientID), "issuer": .string(issuer),
            "audiences": .array(audiences.map { .string($0) }), "scopes": .array(scopes.map { .string($0) }),
            "checked_by": .string(verification.rawValue)
        ]
        object["expires_at"] =
            expiresAt.map { .number(JSONNumber(Int64(saturating: $0.timeIntervalSince1970))) } ?? .null
        object["token_id"] = tokenID.map { .string($0) } ?? .null
        object["confirmation_thumbprint"] = confirmationThumbprint.map { .string($0) } ?? .null
        object["claims"] = .object(claims.fields)
        return .object(object)
    }

    /// The principal as lines for a person: that the token is accepted for `resource` (or, for an
    /// introspection answer without `aud`, that nothing said whom it is for), then its
    /// subject, client, scopes, expiry (and the time left at `now`), issuer and how it was checked.
    /// Never the token itself.
    ///
    /// The values are the token's own text: escape them before they reach a terminal.
    public func textReport(resource: String, now: Date = Date()) -> String {
        // An introspection answer without `aud` says the token is active, not whom it is for (RFC 7662
        // makes `aud` optional): said so, not "accepted for" the resource.
        let unscoped = verification == .introspection && audiences.isEmpty
        var lines = [
            unscoped
                ? "valid: the issuer says the token is active; its answer names no audience, so it was not "
                    + "checked to be for \(resource)"
                : "valid: the token is accepted for \(resource)",
            "  subject   \(subject)",
            "  client    \(clientID)",
            "  scopes    \(scopes.isEmpty ? "(none)" : scopes.joined(separator: " "))"
        ]
        if let expiresAt {
            let left = expiresAt.timeIntervalSince(now).rounded(.down)
            let remaining = left > 0 ? "valid for \(DurationText.describe(left))" : "within the leeway"
            lines.append("  expires   \(ISO8601.string(from: expiresAt)) (\(remaining))")
        } else {
            lines.append("  expires   not said (the introspection answer has no exp)")
        }
        lines.append("  issuer    \(issuer)")
        switch verification {
        case .signature: lines.append("  checked   signature and claims (RFC 9068), keys from jwks_uri")
        case .introspection: lines.append("  checked   by introspection at the issuer")
        }
        return lines.joined(separator: "\n")
    }
}

extension ResourceServerRefusal {
    /// The refusal as one JSON object, the counterpart of `VerifiedPrincipal.jsonReport`: `valid`
    /// (`false`), `error` (the code, such as `invalid_token`), `status` (the HTTP status) and `reason`
    /// (which check failed; never a token or a proof).
    public var jsonReport: JSONValue {
        let object: JSONObject = [
            "valid": false, "error": .string(code.description), "status": .number(JSONNumber(Int64(status))),
            "reason": .string(reason)
        ]
        return .object(object)
    }
}
