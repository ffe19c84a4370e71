#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP

/// A signed-in session: whose tokens these are (issuer and client), the tokens, and whether they
/// are still usable. What a `SessionStorage` keeps under a key (a profile name, an account id…).
///
/// ```swift
/// let session = OAuthSession(issuer: metadata.issuer, clientID: "my-app", tokens: tokens)
/// try await storage.replace(session, key: "default")
/// ```
public struct OAuthSession: Sendable, Codable, Hashable {
    /// Where a session stands.
    public enum State: String, Sendable, Codable {
        /// Tokens are usable (or refreshable).
        case active
        /// The refresh token was refused (`invalid_grant`): only a new login helps. Never retried.
        case needsReauthentication = "needs_reauthentication"
    }

    /// The issuer the tokens came from.
    public var issuer: String
    /// The client they were issued to.
    public var clientID: String
    /// The tokens.
    public var tokens: TokenSet
    /// The state.
    public var state: State
    /// The ID token's `sub`, when known.
    public var subject: String?
    /// App-defined, non-secret values kept in the same row as the tokens (written and read
    /// together). The CLI keeps its profile settings here.
    public var attributes: [String: String]
    /// When the session was last written.
    public var updatedAt: Date
    /// The RFC 8707 resource (an MCP server, an API) the session's tokens are for; `nil`: none named.
    /// With `issuer`, what the session is about (`storageKey(issuer:resource:)`).
    public var resource: String?
    /// The client registration (RFC 7591, or a Client ID Metadata Document) the tokens were issued
    /// to, kept sealed with them — its `client_secret` and `registration_access_token` included — so
    /// the next login and every refresh use the same client. `nil` for pre-registered clients.
    public var registration: RegisteredClient?

    /// A session.
    public init(
        issuer: String, clientID: String, tokens: TokenSet, state: State = .active, subject: String? = nil,
        attributes: [String: String] = [:], updatedAt: Date = Date(), resource: String? = nil,
        registration: RegisteredClient? = nil
    ) {
        self.issuer = issuer
        self.clientID = clientID
        self.tokens = tokens
        self.state = state
        self.subject = subject
        self.attributes = attributes
        self.updatedAt = updatedAt
        self.resource = resource
        self.registration = registration
    }

    /// Whether this row holds no session, only what a logout kept (`TokenManager.logout(…, keepingPlan:
    /// true)`): no tokens, no client registration, `needsReauthentication`. It is never handed out nor
    /// renewed; a login replaces it, as the plan kept in its attributes says (`SessionPlan.of(_:key:)`).
    public var isLoggedOut: Bool {
        state == .needsReauthentication && tokens.accessToken.isEmpty && tokens.refreshToken == nil
            && registration == nil
    }

    /// Whether this row holds only a client registration kept from a login that did not finish
    /// (`registrationOnly(_:resource:)`): no tokens yet, never handed out, and the next login uses the
    /// registration. Nobody was logged in: "not logged in yet", not "needs a new login".
    public var isRegistrationOnly: Bool {
        state == .needsReauthentication && tokens.accessToken.isEmpty && tokens.refreshToken == nil
            && registration != nil
    }

    /// The storage key Moose uses for the session of `resource` at `issuer` (the two separated by a
    /// space, which neither URL can contain): one session per authorization server and resource.
    public static func storageKey(issuer: String, resource: String) -> String { issuer + " " + resource }

    /// A session holding only a client registration, before its first login: `needsReauthentication`
    /// with no tokens (never handed out), so the registration survives a login that did not finish.
    public static func registrationOnly(_ registration: RegisteredClient, resource: String?) -> OAuthSession {
        OAuthSession(
            issuer: registration.issuer, clientID: registration.clientID, tokens: TokenSet(accessToken: ""),
            state: .needsReauthentication, resource: resource, registration: registration)
    }

    enum CodingKeys: String, CodingKey {
        case issuer, clientID, tokens, state, subject, attributes, updatedAt, resource, registration
        case profile // written by Moose 0.1: issuer and client inside an embedded CLI profile
    }

    /// The session attribute naming the grant a login used when a refresh cannot come from a refresh
    /// token (`client_credentials`, `workload`: a "refresh" is a new grant), written for older readers;
    /// renewal follows the session's plan (`SessionPlan.of(_:key:)`). `SessionEngine.grantAttribute`.
    public static let grantAttribute = "moose.grant"

    /// The attribute under which sessions written by Moose 0.1 keep their embedded profile (JSON).
    public static let legacyProfileAttribute = "moose.cli.profile"

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        tokens = try container.decode(TokenSet.self, forKey: .tokens)
        state = try container.decode(State.self, forKey: .state)
        subject = try container.decodeIfPresent(String.self, forKey: .subject)
        updatedAt = try container.decodeIfPresent(Date.self, forKey: .updatedAt) ?? Date(timeIntervalSince1970: 0)
        resource = try container.decodeIfPresent(String.self, forKey: .resource)
        registration = try container.decodeIfPresent(RegisteredClient.self, forKey: .registration)
        var attributes = try container.decodeIfPresent([String: String].self, forKey: .attributes) ?? [:]
        if let issuer = try container.decodeIfPresent(String.self, forKey: .issuer) {
            self.issuer = issuer
            clientID = try container.decode(String.self, forKey: .clientID)
        } else {
            // Moose 0.1 embedded the CLI's profile; read issuer and client from it and keep the rest.
            let legacy = try container.decode(LegacyProfile.self, forKey: .profile)
            issuer = legacy.issuer
            clientID = legacy.clientID
            if attributes[Self.legacyProfileAttribute] == nil,
                let raw = try? container.decode(RawJSON.self, forKey: .profile).text
            {
                attributes[Self.legacyProfileAttribute] = raw
            }
        }
        self.attributes = attributes
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(issuer, forKey: .issuer)
        try container.encode(clientID, forKey: .clientID)
        try container.encode(tokens, forKey: .tokens)
        try container.encode(state, forKey: .state)
        try container.encodeIfPresent(subject, forKey: .subject)
        if !attributes.isEmpty { try container.encode(attributes, forKey: .attributes) }
        try container.encode(updatedAt, forKey: .updatedAt)
        try container.encodeIfPresent(resource, forKey: .resource)
        try container.encodeIfPresent(registration, forKey: .registration)
    }

    private struct LegacyProfile: Decodable {
        let issuer: String
        let clientID: String
    }

    /// Any JSON value, re-encoded as text (to carry a legacy profile over unchanged).
    private struct RawJSON: Decodable {
        let text: String
        init(from decoder: any Decoder) throws {
            let value = try JSON(from: decoder)
            text = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        }
    }
}
