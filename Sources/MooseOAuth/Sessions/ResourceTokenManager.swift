#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import Logging
import MooseJWT

/// OAuth for one protected resource — an MCP server, or any API publishing RFC 9728 metadata —
/// made from nothing but its URL, a client identity and a storage: it discovers the resource's
/// authorization server (RFC 9728, then RFC 8414 / OpenID Connect, path-aware), registers the
/// client when it has to (pre-registered, else a Client ID Metadata Document where the server takes
/// one, else RFC 7591 dynamic registration, kept sealed in the storage), logs in with the
/// authorization code flow (PKCE S256 — refusing a server that does not advertise it — `state`, RFC
/// 9207 `iss`, RFC 8707 `resource` on every request), keeps the session under issuer + resource, and
/// hands out tokens through one `RefreshCoordinator` (one refresh however many callers and processes).
///
/// ```swift
/// let manager = try ResourceTokenManager(resource: "https://mcp.example.com/mcp", storage: storage,
///                                        transport: URLSessionTransport())
/// try await manager.login(with: .loopback { url in SystemBrowser().open(url) })
/// let token = try await manager.accessToken()      // Authorization: Bearer …, for that resource only
/// ```
///
/// Logins are single-flight (concurrent callers share one browser round trip); so is discovery. The
/// MooseMCP adapter drives this type from the MCP SDK's challenges; `moose login --resource` uses it too.
public final class ResourceTokenManager: Sendable {
    /// Which client logs in: a pre-registered one, else (in this order, per the MCP authorization
    /// specification) a Client ID Metadata Document where the server advertises support, else RFC
    /// 7591 dynamic registration.
    public struct ClientIdentity: Sendable {
        /// A client id registered beforehand (with `authentication`): used as is, no registration.
        public var clientID: String?
        /// The pre-registered client's authentication.
        public var authentication: ClientAuthentication
        /// The `https` URL of the app's Client ID Metadata Document, used as the client id where the
        /// server sets `client_id_metadata_document_supported`.
        public var metadataDocumentURL: URL?
        /// The RFC 7591 registration to make when nothing above applies (redirect URIs are filled in
        /// by the login when left empty); `nil`: never register.
        public var registration: ClientRegistrationRequest?

        /// An identity; see the type's documentation for the order.
        public init(
            clientID: String? = nil, authentication: ClientAuthentication = .none, metadataDocumentURL: URL? = nil,
            registration: ClientRegistrationRequest? = ClientRegistrationRequest(clientName: "Moose")
        ) {
            self.clientID = clientID
            self.authentication = authentication
            self.metadataDocumentURL = metadataDocumentURL
            self.registration = registration
        }

        /// A client registered beforehand.
        public static func preRegistered(_ clientID: String, authentication: ClientAuthentication = .none)
            -> ClientIdentity
        {
            ClientIdentity(clientID: clientID, authentication: authentication, registration: nil)
        }

        /// RFC 7591 dynamic registration as a native public client named `clientName`.
        public static func dynamic(clientName: String = "Moose", scopes: [String]? = nil) -> ClientIdentity {
            ClientIdentity(registration: ClientRegistrationRequest(clientName: clientName, scopes: scopes))
        }

        /// A Client ID Metadata Document at `url`, falling back to dynamic registration as `clientName`
        /// where the server does not take documents (`nil`: no fallback).
        public static func metadataDocument(_ url: URL, fallbackClientName: String? = "Moose") -> ClientIdentity {
            ClientIdentity(
                metadataDocumentURL: url,
                registration: fallbackClientName.map { ClientRegistrationRequest(clientName: $0) })
        }
    }

    /// The resource, canonical (lower-case scheme and host, no fragment).
    public let resource: String
    /// Where the session (and the client registration) lives.
    public let storage: any SessionStorage
    private let engine: ResourceEngine
    private let published: PublishedContext

    /// A manager for `resource`. `key` overrides the storage key (the CLI uses its profile name);
    /// `scopes` overrides what a login asks for (else a challenge's `scope`, else the resource's
    /// `scopes_supported`, else none). `requireS256` (the MCP rule) refuses an authorization server
    /// whose metadata does not list PKCE S256.
    ///
    /// - Throws: `OAuthError.invalidConfiguration` or `insecureEndpoint` for a resource that is not an
    ///   absolute `https` (or loopback `http`) URL without fragment.
    public init(
        resource: String, client: ClientIdentity = ClientIdentity(), storage: any SessionStorage, key: String? = nil,
        transport: any HTTPTransport, scopes: [String]? = nil, requireS256: Bool = true, logger: Logger? = nil,
        configuration: RefreshCoordinator.Configuration = RefreshCoordinator.Configuration()
    ) throws {
        let canonical = try ResourceIdentifier.canonical(resource)
        self.resource = canonical
        self.storage = storage
        let published = PublishedContext()
        self.published = published
        engine = ResourceEngine(
            settings: ResourceEngine.Settings(
                resource: canonical, given: resource, identity: client, storage: storage, key: key,
                transport: transport, scopes: scopes,
                requireS256: requireS256, logger: logger, configuration: configuration)
        ) { context in
            published.value.withLock { $0 = context }
        }
    }

    /// What discovery found, once it ran (synchronous: a lock read).
    public var context: ResourceContext? { published.value.withLock { $0 } }

    /// The cached token when valid for `minimumValidity` seconds (default: the coordinator's) — a lock
    /// read, callable from any context; `nil` before discovery ran, without a session, or when it
    /// needs a refresh.
    public func cachedAccessToken(minimumValidity: TimeInterval? = nil) -> AccessToken? {
        published.value.withLock { $0?.coordinator }?.cachedAccessToken(minimumValidity: minimumValidity)
    }

    /// Discovers the resource's metadata and authorization server (once; again when `challenge` names
    /// another `resource_metadata` URL than the one used), and opens the stored session, if any.
    @discardableResult
    public func discover(challenge: ResourceChallenge? = nil) async throws -> ResourceContext {
        try await engine.context(metadataURL: challenge?.resourceMetadata)
    }

    /// A token valid for `minimumValidity` seconds, refreshed once for all callers when needed.
    ///
    /// - Throws: `OAuthError.needsLogin` without a usable session (then `login(with:)`).
    public func accessToken(minimumValidity: TimeInterval? = nil) async throws -> AccessToken {
        if let cached = cachedAccessToken(minimumValidity: minimumValidity) { return cached }
        return try await discover().coordinator.accessToken(minimumValidity: minimumValidity)
    }

    /// For a 401: refreshes only if `rejected` is still the current token, else returns the newer one.
    public func refresh(rejecting rejected: AccessToken) async throws -> AccessToken {
        try await discover().coordinator.refresh(rejecting: rejected)
    }

    /// Logs in (the authorization code flow through `method`: `.loopback` (MooseOAuthSystem), `.prepared` or `.userAgent`) for
    /// `scopes` (default: see `init`), registering the client first when it must, and stores the
    /// session (and registration) under the context's key. Concurrent calls share one login.
    @discardableResult
    public func login(
        with method: TokenManager.LoginMethod, scopes: [String]? = nil,
        challenge: ResourceChallenge? = nil
    ) async throws -> SessionSummary {
        try await engine.login(method: method, scopes: scopes, challenge: challenge)
    }

    /// The stored session (never handed to anyone but the caller), or `nil`.
    public func session() async throws -> OAuthSession? {
        let context = try await discover()
        return try await storage.load(context.key)?.session
    }

    /// Who is signed in, or `nil`.
    public func summary() async throws -> SessionSummary? {
        let context = try await discover()
        guard let stored = try await storage.load(context.key), stored.session.state == .active else { return nil }
        return SessionSummary(key: context.key, session: stored.session)
    }

    /// Revokes what can be revoked, then wipes the session — always (the registration goes with it).
    @discardableResult
    public func logout() async -> LogoutResult { await engine.logout() }
}
