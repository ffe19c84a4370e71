#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
public import MooseJWT
import Logging

/// Who is signed in, for a UI: never a token.
public struct SessionSummary: Sendable, Hashable {
    /// The storage key.
    public let key: String
    /// The issuer.
    public let issuer: String
    /// The ID token's `sub` (opaque).
    public let subject: String?
    /// `preferred_username`, `email` and `name` from the ID token, when it had them.
    public let preferredUsername: String?
    /// The user's email, when known.
    public let email: String?
    /// The user's name, when known.
    public let name: String?
    /// Whether the session is usable or needs a new login.
    public let state: OAuthSession.State
    /// When the access token expires, if known.
    public let expiresAt: Date?
    /// The granted scopes.
    public let scopes: [String]
    /// The RFC 8707 resource the session is for, if any.
    public let resource: String?

    /// The name a person knows: `preferred_username`, then `email`, then `name`, then `sub`.
    public var displayName: String? { preferredUsername ?? email ?? name ?? subject }

    /// Who the session acts as, in words for one line of a UI: `client CLIENT_ID` when a
    /// client-credentials grant renews it, `workload KIND` when a workload's does (the identity
    /// source's kind — `github`, `gitlab`, `env`, `file`, `command` — never its variable, path or
    /// command line; `client CLIENT_ID` when the source is its app's own), else the person
    /// (`displayName`); `nil` when nothing says.
    public let principal: String?

    /// A summary of `session`.
    public init(key: String, session: OAuthSession) {
        self.key = key
        issuer = session.issuer
        subject = session.subject
        preferredUsername = session.attributes[Self.usernameAttribute]
        email = session.attributes[Self.emailAttribute]
        name = session.attributes[Self.nameAttribute]
        state = session.state
        expiresAt = session.tokens.expiresAt
        scopes = session.tokens.scopes
        resource = session.resource
        let plan = SessionPlan.of(session, key: key)
        if plan.grant == .clientCredentials {
            principal = "client \(session.clientID)"
        } else if let source = plan.grant.workload?.source {
            principal = "workload " + String(source.prefix { $0 != ":" })
        } else if plan.grant.kind.renewsWithoutAPerson {
            principal = "client \(session.clientID)" // a workload whose source is its app's own
        } else {
            principal = preferredUsername ?? email ?? name ?? subject
        }
    }

    static let usernameAttribute = "moose.preferred_username"
    static let emailAttribute = "moose.email"
    static let nameAttribute = "moose.name"

    /// The display claims of a (validated) ID token, as session attributes.
    public static func attributes(from claims: JWTClaims?) -> [String: String] {
        attributes(from: claims?.fields ?? [:])
    }

    /// The display claims (`preferred_username`, `email`, `name`) of an ID token's claims or a
    /// UserInfo response, as session attributes: strings only, at most 256 characters each.
    public static func attributes(from object: JSONObject) -> [String: String] {
        var attributes: [String: String] = [:]
        for (claim, attribute) in [
            ("preferred_username", usernameAttribute), ("email", emailAttribute), ("name", nameAttribute)
        ] {
            if let value = object[claim]?.stringValue, !value.isEmpty, value.count <= 256 {
                attributes[attribute] = value
            }
        }
        return attributes
    }

    /// The names a person knows, from the ID token — or, when it carries none of them, from the
    /// UserInfo endpoint (OIDC Core §5.3, `sub` checked against the ID token's). UserInfo is best
    /// effort: a login never fails because of it.
    ///
    /// UserInfo is asked only when there is a user to ask about: never after a `client_credentials`
    /// grant (the client acts for itself, RFC 6749 §4.4), nor for tokens with neither an ID token nor
    /// the `openid` scope (UserInfo serves OpenID Connect access tokens only, OIDC Core §5.3).
    ///
    /// - Parameters:
    ///   - idTokenClaims: the claims of the login's ID token, if it had one (already validated).
    ///   - tokens: what the login's grant returned.
    ///   - client: the client that logged in (UserInfo is asked at its provider's endpoint).
    ///   - grant: the grant that issued `tokens`, when the caller knows it (`.clientCredentials`).
    /// - Returns: the display names found, as session attributes (`attributes(from:)`); empty for none.
    public static func displayAttributes(
        idTokenClaims: JWTClaims?, tokens: TokenSet, client: OAuthClient,
        grant: SessionPlan.Grant.Kind? = nil
    ) async -> [String: String] {
        let fromIDToken = attributes(from: idTokenClaims)
        guard fromIDToken.isEmpty, asksUserInfo(tokens: tokens, grant: grant), client.metadata.userinfoEndpoint != nil
        else { return fromIDToken }
        // Without an ID token (a device login whose provider sends none) UserInfo still names the
        // holder of this access token; with one, its `sub` must match.
        guard let info = try? await client.userInfo(tokens: tokens, expectedSubject: idTokenClaims?.subject) else {
            return fromIDToken
        }
        return attributes(from: info)
    }

    /// Whether `tokens` may name a user at UserInfo: not a client's own tokens, and OpenID Connect's.
    static func asksUserInfo(tokens: TokenSet, grant: SessionPlan.Grant.Kind?) -> Bool {
        if grant == .clientCredentials { return false }
        return tokens.idToken != nil || tokens.scopes.contains("openid")
    }
}
