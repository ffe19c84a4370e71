#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import Logging
import MooseJWT
import Synchronization

/// What a `ResourceTokenManager` found out about its resource: the RFC 9728 metadata, the
/// authorization server it chose, the storage key of the session and the coordinator of its tokens.
public struct ResourceContext: Sendable {
    /// The resource identifier, as its metadata spells it: sent as RFC 8707 `resource`.
    public let resource: String
    /// The resource's RFC 9728 metadata.
    public let protectedResource: ProtectedResourceMetadata
    /// Where that metadata came from.
    public let metadataURL: URL
    /// The authorization server's metadata (its `issuer` is the first of `authorization_servers`).
    public let authorizationServer: ProviderMetadata
    /// The storage key of the session: `OAuthSession.storageKey(issuer:resource:)` unless the
    /// manager was given its own.
    public let key: String
    /// The coordinator every token for this resource goes through.
    public let coordinator: RefreshCoordinator
}

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
/// try await manager.login(with: .loopback { url in openBrowser(url) })
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
        public init(clientID: String? = nil, authentication: ClientAuthentication = .none, metadataDocumentURL: URL? = nil,
                    registration: ClientRegistrationRequest? = ClientRegistrationRequest(clientName: "Moose")) {
            self.clientID = clientID
            self.authentication = authentication
            self.metadataDocumentURL = metadataDocumentURL
            self.registration = registration
        }

        /// A client registered beforehand.
        public static func preRegistered(_ clientID: String, authentication: ClientAuthentication = .none) -> ClientIdentity {
            ClientIdentity(clientID: clientID, authentication: authentication, registration: nil)
        }

        /// RFC 7591 dynamic registration as a native public client named `clientName`.
        public static func dynamic(clientName: String = "Moose", scopes: [String]? = nil) -> ClientIdentity {
            ClientIdentity(registration: ClientRegistrationRequest(clientName: clientName, scopes: scopes))
        }

        /// A Client ID Metadata Document at `url`, falling back to dynamic registration as `clientName`
        /// where the server does not take documents (`nil`: no fallback).
        public static func metadataDocument(_ url: URL, fallbackClientName: String? = "Moose") -> ClientIdentity {
            ClientIdentity(metadataDocumentURL: url, registration: fallbackClientName.map { ClientRegistrationRequest(clientName: $0) })
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
    public init(resource: String, client: ClientIdentity = ClientIdentity(), storage: any SessionStorage, key: String? = nil,
                transport: any HTTPTransport, scopes: [String]? = nil, requireS256: Bool = true, logger: Logger? = nil,
                configuration: RefreshCoordinator.Configuration = RefreshCoordinator.Configuration()) throws {
        let canonical = try ResourceIdentifier.canonical(resource)
        self.resource = canonical
        self.storage = storage
        let published = PublishedContext()
        self.published = published
        engine = ResourceEngine(settings: ResourceEngine.Settings(
            resource: canonical, given: resource, identity: client, storage: storage, key: key, transport: transport, scopes: scopes,
            requireS256: requireS256, logger: logger, configuration: configuration)) { context in
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

    /// Logs in (the authorization code flow through `method`: `.loopback` or `.userAgent`) for
    /// `scopes` (default: see `init`), registering the client first when it must, and stores the
    /// session (and registration) under the context's key. Concurrent calls share one login.
    @discardableResult
    public func login(with method: TokenManager.LoginMethod, scopes: [String]? = nil,
                      challenge: ResourceChallenge? = nil) async throws -> SessionSummary {
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

/// The context discovery published, for synchronous readers.
final class PublishedContext: Sendable {
    let value = Mutex<ResourceContext?>(nil)
}

/// The mutable part of a `ResourceTokenManager`: discovery and login, each single-flight.
actor ResourceEngine {
    struct Settings: Sendable {
        let resource: String
        let given: String
        let identity: ResourceTokenManager.ClientIdentity
        let storage: any SessionStorage
        let key: String?
        let transport: any HTTPTransport
        let scopes: [String]?
        let requireS256: Bool
        let logger: Logger?
        let configuration: RefreshCoordinator.Configuration
    }

    let settings: Settings
    private let publish: @Sendable (ResourceContext) -> Void
    private var current: ResourceContext?
    private var discovering: Task<ResourceContext, any Error>?
    private var loggingIn: Task<SessionSummary, any Error>?
    /// Set when the server refused a stored registration: the next login registers again.
    private var registrationRefused = false

    init(settings: Settings, publish: @escaping @Sendable (ResourceContext) -> Void) {
        self.settings = settings
        self.publish = publish
    }

    func context(metadataURL: URL?) async throws -> ResourceContext {
        if let current, metadataURL.map({ $0.absoluteString.utf8.elementsEqual(current.metadataURL.absoluteString.utf8) }) ?? true {
            return current
        }
        if let discovering { return try await discovering.value }
        let settings = self.settings
        let task = Task { try await Self.discover(settings, metadataURL: metadataURL) }
        discovering = task
        defer { discovering = nil }
        let found = try await task.value
        // The same server and session again (a challenge naming the metadata differently): keep the
        // coordinator, whose tokens and single flight callers already share.
        if let current, current.key.utf8.elementsEqual(found.key.utf8) { return current }
        current = found
        publish(found)
        return found
    }

    private static func discover(_ settings: Settings, metadataURL: URL?) async throws -> ResourceContext {
        let located = try await Discovery.locateProtectedResource(settings.given, metadataURL: metadataURL, transport: settings.transport)
        let protected = located.metadata
        // The first server listed (RFC 9728 §2 leaves the choice to the client).
        guard let issuer = protected.authorizationServers.first else {
            throw OAuthError(OAuthError.discovery, "the protected resource metadata of \(protected.resource) lists no authorization server")
        }
        let server = try await Discovery.fetch(issuer: issuer, transport: settings.transport)
        let key = settings.key ?? OAuthSession.storageKey(issuer: server.issuer, resource: protected.resource)
        // Only a session for this very server and resource is used: tokens go to their own resource only.
        var current: OAuthSession? = nil
        if let stored = try? await settings.storage.load(key)?.session, stored.state == .active,
           stored.issuer.utf8.elementsEqual(server.issuer.utf8),
           stored.resource.map({ $0.utf8.elementsEqual(protected.resource.utf8) }) == true {
            current = stored
        }
        let refresher = ResourceRefresher(settings: settings, metadata: server, resource: protected.resource)
        let coordinator = SessionEngine(key: key, storage: settings.storage, configuration: settings.configuration)
            .coordinator(current: current) { session in try refresher.client(for: session) }
        return ResourceContext(resource: protected.resource, protectedResource: protected, metadataURL: located.url,
                               authorizationServer: server, key: key, coordinator: coordinator)
    }

    func login(method: TokenManager.LoginMethod, scopes: [String]?, challenge: ResourceChallenge?) async throws -> SessionSummary {
        if let loggingIn { return try await loggingIn.value }
        let task = Task { try await self.performLogin(method: method, scopes: scopes, challenge: challenge) }
        loggingIn = task
        defer { loggingIn = nil }
        return try await task.value
    }

    private func performLogin(method: TokenManager.LoginMethod, scopes requested: [String]?,
                              challenge: ResourceChallenge?) async throws -> SessionSummary {
        let context = try await self.context(metadataURL: challenge?.resourceMetadata)
        let server = context.authorizationServer
        // Refused before anything reaches the server: no registration, no browser.
        if settings.requireS256 { try server.requireS256() }
        let agent: any ExternalUserAgent
        let redirectURI: URL
        var registrationURIs: [String]
        switch method {
        case .loopback(let port, let timeout, let open):
            let loopback = try LoopbackUserAgent(port: port, timeout: timeout, open: open)
            agent = loopback
            redirectURI = loopback.redirectURI
            // RFC 8252 §7.3: a loopback redirect matches with any port; also register the exact one
            // for servers that compare exactly (then a later login on another port registers again).
            registrationURIs = [redirectURI.absoluteString]
            if port == 0, var portless = URLComponents(url: redirectURI, resolvingAgainstBaseURL: false) {
                portless.port = nil
                if let text = portless.string { registrationURIs.insert(text, at: 0) }
            }
        case .userAgent(let custom, let uri):
            agent = custom
            redirectURI = uri
            registrationURIs = [uri.absoluteString]
        case .device, .clientCredentials:
            throw OAuthError(OAuthError.invalidConfiguration,
                             "a protected resource login uses the authorization code flow: log in with .loopback or .userAgent")
        }
        let stored = try await loadStored(context.key)
        let identity = try await clientIdentity(context: context, stored: stored, redirectURI: redirectURI.absoluteString,
                                                registrationURIs: registrationURIs)
        var client = OAuthClient(metadata: server, clientID: identity.clientID, authentication: identity.authentication,
                                 transport: settings.transport)
        client.resource = context.resource
        client.requiresAdvertisedS256 = settings.requireS256
        client.logger = settings.logger
        // Scopes: the caller's, else the challenge's, else configured, else what the resource lists.
        let scopes = requested ?? challenge?.scopes ?? settings.scopes ?? context.protectedResource.scopesSupported ?? []
        let validator = scopes.contains("openid") ? SessionEngine.idTokenValidator(for: client) : nil
        let flow = AuthorizationCodeFlow(client: client, redirectURI: redirectURI, userAgent: agent, idTokens: validator)
        let tokens: TokenSet
        do {
            tokens = try await flow.authorize(AuthorizationParameters(scopes: scopes, resources: [context.resource]))
        } catch let error as OAuthError where error.code == OAuthError.invalidClient && identity.reused {
            // The server no longer knows this registration: the next login registers again.
            registrationRefused = true
            throw error
        }
        var issued = tokens
        issued.resource = context.resource
        let session = try await SessionEngine(key: context.key, storage: settings.storage, configuration: settings.configuration)
            .completeLogin(issued, client: client, attributes: stored?.session.attributes ?? [:], registration: identity.registration,
                           coordinator: context.coordinator)
        // Publish the new token at once: callers reading the synchronous snapshot see it.
        _ = try? await context.coordinator.accessToken(minimumValidity: 0)
        return SessionSummary(key: context.key, session: session)
    }

    private func loadStored(_ key: String) async throws -> StoredSession? {
        do { return try await settings.storage.load(key) } catch {
            throw OAuthError(OAuthError.storeUnavailable, "cannot read the session of \(key)", underlying: error)
        }
    }

    struct Identity {
        var clientID: String
        var authentication: ClientAuthentication
        var registration: RegisteredClient?
        var reused = false
    }

    /// The client to log in as: pre-registered; a stored registration for this server that allows
    /// the redirect URI; a Client ID Metadata Document; a new RFC 7591 registration (stored at once).
    private func clientIdentity(context: ResourceContext, stored: StoredSession?, redirectURI: String,
                                registrationURIs: [String]) async throws -> Identity {
        let server = context.authorizationServer
        let identity = settings.identity
        if let clientID = identity.clientID {
            return Identity(clientID: clientID, authentication: identity.authentication)
        }
        if !registrationRefused, let registration = stored?.session.registration,
           registration.issuer.utf8.elementsEqual(server.issuer.utf8), registration.allows(redirectURI: redirectURI),
           !registration.secretHasExpired() {
            return Identity(clientID: registration.clientID, authentication: registration.authentication, registration: registration,
                            reused: true)
        }
        if let document = identity.metadataDocumentURL, server.clientIDMetadataDocumentSupported == true {
            guard ClientIDMetadataDocument.isValidClientID(document) else {
                throw OAuthError(OAuthError.invalidConfiguration,
                                 "a Client ID Metadata Document URL must be https with a path (\(document.redactedForLogs))")
            }
            let registration = RegisteredClient(issuer: server.issuer, clientID: document.absoluteString, redirectURIs: registrationURIs)
            return Identity(clientID: document.absoluteString, authentication: .none, registration: registration)
        }
        guard var request = identity.registration else {
            throw OAuthError(OAuthError.registration,
                             "no client id is configured for \(server.issuer), and registering one is turned off")
        }
        guard server.registrationEndpoint != nil else {
            throw OAuthError(OAuthError.registration,
                             "\(server.issuer) offers neither dynamic client registration (registration_endpoint, RFC 7591) nor Client ID Metadata Documents; configure a client id registered there")
        }
        if request.redirectURIs.isEmpty { request.redirectURIs = registrationURIs }
        let registration = try await ClientRegistration.register(request, with: server, transport: settings.transport, logger: settings.logger)
        registrationRefused = false
        // Keep it at once (sealed like tokens) unless a usable session is stored: a login that does
        // not finish then costs no second registration. A concurrent writer wins the compare-and-set.
        if stored?.session.state != .active {
            _ = try? await settings.storage.save(OAuthSession.registrationOnly(registration, resource: context.resource), key: context.key,
                                                 expectedGeneration: stored?.generation, lease: nil)
        }
        return Identity(clientID: registration.clientID, authentication: registration.authentication, registration: registration)
    }

    func logout() async -> LogoutResult {
        guard let context = try? await self.context(metadataURL: nil) else {
            var result = LogoutResult()
            result.revocationError = OAuthError(OAuthError.transient, "the resource's metadata could not be fetched: nothing to log out of")
            return result
        }
        let refresher = ResourceRefresher(settings: settings, metadata: context.authorizationServer, resource: context.resource)
        return await SessionEngine(key: context.key, storage: settings.storage, configuration: settings.configuration)
            .logout(coordinator: context.coordinator) { session in try refresher.client(for: session).client }
    }
}

/// The client of a resource session: the one the stored session says its tokens were issued to (its
/// registration, else the configured identity), naming the resource, with the ID-token validator
/// for it (`SessionEngine` runs the refresh step with them).
struct ResourceRefresher: Sendable {
    let settings: ResourceEngine.Settings
    let metadata: ProviderMetadata
    let resource: String

    /// The client and validator for `session` (handed over by the coordinator, read inside its lease).
    func client(for session: OAuthSession) throws -> (client: OAuthClient, validator: IDTokenValidator?) {
        guard session.issuer.utf8.elementsEqual(metadata.issuer.utf8) else {
            throw OAuthError(OAuthError.needsLogin, "there is no session of \(resource) at \(metadata.issuer): log in")
        }
        var client = OAuthClient(metadata: metadata, clientID: session.clientID,
                                 authentication: session.registration?.authentication ?? settings.identity.authentication,
                                 transport: settings.transport)
        client.resource = resource
        client.logger = settings.logger
        let validator = session.tokens.idToken == nil ? nil : SessionEngine.idTokenValidator(for: client)
        return (client, validator)
    }
}
