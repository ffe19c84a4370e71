#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseJWT

/// Who is calling, from an access token whose signature, issuer, audience, times and (for DPoP) proof
/// all checked out. Every property comes from the verified token; nothing unverified is exposed.
///
/// ```swift
/// let principal = try await server.verify(authorizationHeader: auth, dpopHeader: dpop, method: "GET", url: url)
/// principal.subject          // "alice"
/// principal.hasScopes(["api.read"])
/// ```
public struct VerifiedPrincipal: Sendable {
    /// How the token was presented.
    public enum Scheme: String, Sendable, Hashable {
        /// `Authorization: Bearer` (RFC 6750).
        case bearer = "Bearer"
        /// `Authorization: DPoP` with a proof (RFC 9449 §7).
        case dpop = "DPoP"
    }

    /// `sub`: the user (or, for client credentials, the client) the token is about.
    public let subject: String
    /// `client_id`: the client the token was issued to (RFC 9068 §2.2).
    public let clientID: String
    /// `iss`, equal to the configured issuer.
    public let issuer: String
    /// `aud`, which contains this resource's identifier.
    public let audiences: [String]
    /// The granted scopes (`scope`, space-separated, RFC 9068 §2.2.3), in token order.
    public let scopes: [String]
    /// `authorization_details` (RFC 9396) as the token carries it, for the application to judge.
    public let authorizationDetails: JSONValue?
    /// `exp`; `nil` only for an introspected token whose answer had none (RFC 7662 §2.2).
    public let expiresAt: Date?
    /// `iat`, when present.
    public let issuedAt: Date?
    /// `jti`, when present.
    public let tokenID: String?
    /// `cnf.jkt` (RFC 9449 §6.1): the thumbprint of the key the token is bound to; `nil` for a bearer token.
    public let confirmationThumbprint: String?
    /// `cnf` as the token carries it (for confirmation methods other than `jkt`).
    public let confirmation: JSONObject?
    /// How the token came.
    public let scheme: Scheme
    /// Every claim of the verified token.
    public let claims: JWTClaims
    /// How the token was checked: its signature and claims here, or by the issuer's introspection endpoint.
    public let verification: Verification

    /// How a token was checked.
    public enum Verification: String, Sendable, Hashable {
        /// A JWT access token: its signature with the issuer's keys, then its claims (RFC 9068 §4).
        case signature = "jwt"
        /// An opaque token: the issuer's introspection endpoint said it is active (RFC 7662 §2.2),
        /// then its answer's claims were checked as a JWT's would be.
        case introspection
    }

    /// `true` when every scope in `required` was granted (compared byte for byte).
    public func hasScopes(_ required: some Sequence<String>) -> Bool {
        required.allSatisfy { needed in scopes.contains { $0.utf8.elementsEqual(needed.utf8) } }
    }
}
