#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseSecretStore

/// A named configuration: which provider, which client, which scopes, which grant.
public struct Profile: Sendable, Codable, Hashable {
    /// The grant used to log in.
    public enum Grant: String, Sendable, Codable {
        /// Authorization code + PKCE with a loopback redirect.
        case authorizationCode = "authorization_code"
        /// Device authorization (RFC 8628).
        case deviceCode = "device_code"
        /// Client credentials.
        case clientCredentials = "client_credentials"
    }

    /// The profile's name (`default`).
    public var name: String
    /// The issuer.
    public var issuer: String
    /// The client id.
    public var clientID: String
    /// Scopes requested at login.
    public var scopes: [String]
    /// The grant.
    public var grant: Grant
    /// A file holding the client secret (confidential clients); the secret itself is never stored here.
    public var clientSecretFile: String?
    /// Endpoints configured by hand.
    public var endpoints: EndpointOverrides

    /// A profile.
    public init(name: String, issuer: String, clientID: String, scopes: [String], grant: Grant = .authorizationCode,
                clientSecretFile: String? = nil, endpoints: EndpointOverrides = EndpointOverrides()) {
        self.name = name
        self.issuer = issuer
        self.clientID = clientID
        self.scopes = scopes
        self.grant = grant
        self.clientSecretFile = clientSecretFile
        self.endpoints = endpoints
    }
}

/// A profile's session: its tokens and whether it is usable.
public struct Session: Sendable, Codable {
    /// Where a session stands.
    public enum State: String, Sendable, Codable {
        /// Tokens are usable (or refreshable).
        case active
        /// The refresh token was refused (`invalid_grant`): only a new login helps. Never retried.
        case needsReauthentication = "needs_reauthentication"
    }

    /// The profile.
    public var profile: Profile
    /// The tokens.
    public var tokens: TokenSet
    /// The state.
    public var state: State
    /// The ID token's `sub`, when known.
    public var subject: String?
    /// When the session was last written.
    public var updatedAt: Date

    /// A session.
    public init(profile: Profile, tokens: TokenSet, state: State = .active, subject: String? = nil, updatedAt: Date = Date()) {
        self.profile = profile
        self.tokens = tokens
        self.state = state
        self.subject = subject
        self.updatedAt = updatedAt
    }
}

/// Sessions kept in the secret store: one encrypted row per profile, written whole in one
/// transaction (tokens, state and profile land together or not at all).
public struct SessionStore: Sendable {
    /// The store.
    public let store: SecretStore
    /// The namespace used for sessions.
    public static let namespace = "moose.session"

    /// Sessions in `store`.
    public init(store: SecretStore) { self.store = store }

    /// The session of `profile`, if any.
    public func load(_ profile: String) throws -> Session? {
        guard let bytes = try store.get(namespace: Self.namespace, name: profile) else { return nil }
        return try JSONDecoder().decode(Session.self, from: Data(bytes))
    }

    /// Writes `session` (durably) as one row.
    public func save(_ session: Session) throws {
        var session = session
        session.updatedAt = Date()
        try store.put(Array(try JSONEncoder().encode(session)), namespace: Self.namespace, name: session.profile.name)
    }

    /// Writes `session` only while `lease` is still held (fencing): a refresher that lost its lease
    /// never overwrites a newer session.
    public func save(_ session: Session, holding lease: Lease) throws {
        var session = session
        session.updatedAt = Date()
        let bytes = Array(try JSONEncoder().encode(session))
        let name = session.profile.name
        try store.transaction { (tx) throws(SecretStoreError) in
            try tx.requireLease(lease)
            try tx.put(bytes, namespace: Self.namespace, name: name)
        }
    }

    /// Removes the profile's session; `true` if there was one.
    @discardableResult
    public func delete(_ profile: String) throws -> Bool {
        try store.delete(namespace: Self.namespace, name: profile)
    }

    /// Every profile with a session.
    public func profiles() throws -> [String] {
        try store.list(namespace: Self.namespace).map(\.name)
    }
}
