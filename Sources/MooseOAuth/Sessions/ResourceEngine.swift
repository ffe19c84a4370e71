#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
import Logging
import MooseJWT
import Synchronization

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
        if let current,
            metadataURL.map({ $0.absoluteString.utf8.elementsEqual(current.metadataURL.absoluteString.utf8) }) ?? true
        {
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
        let located = try await Discovery.locateProtectedResource(
            settings.given, metadataURL: metadataURL, transport: settings.transport)
        let protected = located.metadata
        // The first server listed (RFC 9728 §2 leaves the choice to the client).
        guard let issuer = protected.authorizationServers.first else {
            throw OAuthError(
                OAuthError.discovery,
                "the protected resource metadata of \(protected.resource) lists no authorization server")
        }
        let server = try await Discovery.fetch(issuer: issuer, transport: settings.transport)
        let key = settings.key ?? OAuthSession.storageKey(issuer: server.issuer, resource: protected.resource)
        // Only a session for this very server and resource is used: tokens go to their own resource only.
        var current: OAuthSession? = nil
        if let stored = try? await settings.storage.load(key)?.session, stored.state == .active,
            stored.issuer.utf8.elementsEqual(server.issuer.utf8),
            stored.resource.map({ $0.utf8.elementsEqual(protected.resource.utf8) }) == true
        {
            current = stored
        }
        let refresher = ResourceRefresher(settings: settings, metadata: server, resource: protected.resource)
        let coordinator = SessionEngine(key: key, storage: settings.storage, configuration: settings.configuration)
            .coordinator(current: current) { session in try refresher.client(for: session) }
        return ResourceContext(
            resource: protected.resource, protectedResource: protected, metadataURL: located.url,
            authorizationServer: server, key: key, coordinator: coordinator)
    }

    func login(method: TokenManager.LoginMethod, scopes: [String]?, challenge: ResourceChallenge?) async throws
        -> SessionSummary
    {
        if let loggingIn { return try await loggingIn.value }
        let task = Task { try await self.performLogin(method: method, scopes: scopes, challenge: challenge) }
        loggingIn = task
        defer { loggingIn = nil }
        return try await task.value
    }

    private func performLogin(
        method: TokenManager.LoginMethod, scopes requested: [String]?,
        challenge: ResourceChallenge?
    ) async throws -> SessionSummary {
        let context = try await self.context(metadataURL: challenge?.resourceMetadata)
        let server = context.authorizationServer
        // Refused before anything reaches the server: no registration, no browser.
        if settings.requireS256 { try server.requireS256() }
        // A loopback listener binds here, and says what to register (RFC 8252 §7.3: the port-less URI
        // too, for a random port).
        guard let ready = try await method.readyUserAgent() else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "a protected resource login uses the authorization code flow: log in with .loopback or .userAgent")
        }
        let stored = try await loadStored(context.key)
        let identity = try await clientIdentity(
            context: context, stored: stored, redirectURI: ready.redirectURI.absoluteString,
            registrationURIs: ready.registrationURIs)
        // Scopes: the caller's, else the challenge's, else configured, else what the resource lists.
        let scopes =
            requested ?? challenge?.scopes ?? settings.scopes ?? context.protectedResource.scopesSupported ?? []
        let plan = settings.plan(
            key: context.key, issuer: server.issuer, clientID: identity.clientID, resource: context.resource,
            scopes: scopes, registered: identity.registration != nil)
        var client = try plan.client(
            metadata: server, transport: settings.transport, registration: identity.registration,
            authentication: settings.authentication(registration: identity.registration))
        client.requiresAdvertisedS256 = settings.requireS256
        client.logger = settings.logger
        let validator = scopes.contains("openid") ? SessionEngine.idTokenValidator(for: client) : nil
        let tokens: TokenSet
        do {
            tokens = try await method.tokens(
                client: client, validator: validator,
                parameters: AuthorizationParameters(scopes: scopes, resources: [context.resource]), audience: nil,
                workload: nil, ready: ready)
        } catch let error as OAuthError where error.code == OAuthError.invalidClient && identity.reused {
            // The server no longer knows this registration: the next login registers again.
            registrationRefused = true
            throw error
        }
        var issued = tokens
        issued.resource = context.resource
        let session = try await SessionEngine(
            key: context.key, storage: settings.storage, configuration: settings.configuration
        )
        .completeLogin(
            issued, client: client, attributes: plan.stored(in: stored?.session.attributes ?? [:]),
            registration: identity.registration,
            coordinator: context.coordinator)
        // Publish the new token at once: callers reading the synchronous snapshot see it.
        _ = try? await context.coordinator.accessToken(minimumValidity: 0)
        return SessionSummary(key: context.key, session: session)
    }

    /// The stored session before a login: a damaged row reads as none (the login replaces it).
    private func loadStored(_ key: String) async throws -> StoredSession? {
        do { return try await settings.storage.load(key) } catch let error as OAuthError
            where error.code == OAuthError.sessionDamaged
        {
            return nil
        } catch {
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
    private func clientIdentity(
        context: ResourceContext, stored: StoredSession?, redirectURI: String,
        registrationURIs: [String]
    ) async throws -> Identity {
        let server = context.authorizationServer
        let identity = settings.identity
        if let clientID = identity.clientID {
            return Identity(clientID: clientID, authentication: identity.authentication)
        }
        if !registrationRefused, let registration = stored?.session.registration,
            registration.issuer.utf8.elementsEqual(server.issuer.utf8), registration.allows(redirectURI: redirectURI),
            !registration.secretHasExpired()
        {
            return Identity(
                clientID: registration.clientID, authentication: registration.authentication,
                registration: registration,
                reused: true)
        }
        if let document = identity.metadataDocumentURL, server.clientIDMetadataDocumentSupported == true {
            guard ClientIDMetadataDocument.isValidClientID(document) else {
                throw OAuthError(
                    OAuthError.invalidConfiguration,
                    "a Client ID Metadata Document URL must be https with a path (\(document.redactedForLogs))")
            }
            let registration = RegisteredClient(
                issuer: server.issuer, clientID: document.absoluteString, redirectURIs: registrationURIs)
            return Identity(clientID: document.absoluteString, authentication: .none, registration: registration)
        }
        guard var request = identity.registration else {
            throw OAuthError(
                OAuthError.registration,
                "no client id is configured for \(server.issuer), and registering one is turned off")
        }
        guard server.registrationEndpoint != nil else {
            throw OAuthError(
                OAuthError.registration,
                "\(server.issuer) offers neither dynamic client registration (registration_endpoint, RFC 7591) nor Client ID Metadata Documents; configure a client id registered there"
            )
        }
        if request.redirectURIs.isEmpty { request.redirectURIs = registrationURIs }
        let registration = try await ClientRegistration.register(
            request, with: server, transport: settings.transport, logger: settings.logger)
        registrationRefused = false
        // Keep it at once (sealed like tokens) unless a usable session is stored: a login that does
        // not finish then costs no second registration. A concurrent writer wins the compare-and-set.
        if stored?.session.state != .active {
            _ = try? await settings.storage.save(
                OAuthSession.registrationOnly(registration, resource: context.resource), key: context.key,
                expectedGeneration: stored?.generation, lease: nil)
        }
        return Identity(
            clientID: registration.clientID, authentication: registration.authentication, registration: registration)
    }

    func logout() async -> LogoutResult {
        guard let context = try? await self.context(metadataURL: nil) else {
            return await wipeWithoutDiscovery()
        }
        let refresher = ResourceRefresher(
            settings: settings, metadata: context.authorizationServer, resource: context.resource)
        return await SessionEngine(key: context.key, storage: settings.storage, configuration: settings.configuration)
            .logout(coordinator: context.coordinator) { session in try refresher.client(for: session).client }
    }
}

extension ResourceEngine {
    /// Logout when the resource's metadata (or its authorization server's) cannot be fetched: nothing
    /// can be revoked, but the local session is wiped all the same — the configured key, else every
    /// stored session for this resource (the one its last context named first; `resource` compared
    /// byte for byte).
    func wipeWithoutDiscovery() async -> LogoutResult {
        var result = LogoutResult()
        result.revocationError = OAuthError(
            OAuthError.transient,
            "the resource's metadata could not be fetched: nothing was revoked at the provider")
        var keys: [String] = settings.key.map { [$0] } ?? []
        if keys.isEmpty, let all = try? await settings.storage.keys() {
            for key in all {
                guard let session = try? await settings.storage.load(key)?.session,
                    session.resource.map({ $0.utf8.elementsEqual(settings.resource.utf8) }) == true
                else { continue }
                keys.append(key)
            }
        }
        for key in keys {
            do {
                if try await settings.storage.delete(key) { result.hadSession = true }
            } catch {
                result.wipeError = OAuthError(
                    OAuthError.storeUnavailable, "the session of \(key) could not be wiped", underlying: error)
            }
        }
        return result
    }
}

extension ResourceEngine.Settings {
    /// The plan of a resource session — its authorization server, client and resource — stored with the
    /// session (so `TokenManager.open(key:…)` renews it too) and the one source of its client
    /// (`SessionPlan.client(metadata:transport:registration:authentication:)`), as for every session.
    /// A pre-registered client whose credentials the app holds is marked so (`SessionPlan.Credential.heldByApp`).
    func plan(
        key: String, issuer: String, clientID: String, resource: String, scopes: [String], registered: Bool
    ) -> SessionPlan {
        var plan = SessionPlan(name: key, issuer: issuer, clientID: clientID, scopes: scopes)
        plan.resource = resource
        if !registered, authentication(registration: nil) != nil { plan.client.credential = .heldByApp }
        return plan
    }

    /// The app's own credentials for a pre-registered client; `nil` for a registered one (its
    /// registration authenticates it) or a public client.
    func authentication(registration: RegisteredClient?) -> ClientAuthentication? {
        guard registration == nil else { return nil }
        if case .none = identity.authentication { return nil }
        return identity.authentication
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
        let plan = settings.plan(
            key: "", issuer: metadata.issuer, clientID: session.clientID, resource: resource,
            scopes: session.tokens.scopes, registered: session.registration != nil)
        var client = try plan.client(
            metadata: metadata, transport: settings.transport, registration: session.registration,
            authentication: settings.authentication(registration: session.registration))
        client.logger = settings.logger
        let validator = session.tokens.idToken == nil ? nil : SessionEngine.idTokenValidator(for: client)
        return (client, validator)
    }
}
