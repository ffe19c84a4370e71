#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import MooseJWT
public import Logging

/// The one object an app holds: made from an issuer (or explicit endpoints), a client and a
/// storage, it logs in with any flow, hands out valid access tokens (one refresh however many ask),
/// attaches them to requests, and logs out in the right order. With `dpop:` every login binds its
/// tokens to a new DPoP key (RFC 9449) kept with the session; the middleware then sends proofs.
///
/// ```swift
/// let moose = TokenManager(issuer: "https://id.example.com", clientID: "my-app",
///                          storage: EncryptedSessionStorage(store: store), transport: URLSessionTransport())
/// let user = try await moose.login(with: .loopback { url in SystemBrowser().open(url) })
/// let api = APIClient(transport: transport, middlewares: [moose.middleware])
/// let token = try await moose.accessToken()
/// let result = await moose.logout()          // revoke, end-session URL, wipe — always wipes
/// ```
///
/// Discovery runs once, on first use. The session lives in `storage` under `key`, so several
/// processes (or machines, with a shared storage) share it and its single refresh. The lower-level
/// types (`Discovery`, the flows, `RefreshCoordinator`, `IDTokenValidator`) stay public for apps that
/// need them.
public final class TokenManager: Sendable {
    /// How to log in.
    public enum LoginMethod: Sendable {
        /// Authorization code + PKCE through a user agent made for each login, whose redirect URI is
        /// known once it is made: MooseOAuthSystem's `.loopback(port:timeout:open:)` (a listener on
        /// 127.0.0.1, RFC 8252) is one.
        case prepared(any UserAgentPreparation)
        /// Authorization code + PKCE through an agent of the app's own (an in-app browser session)
        /// with the redirect URI it was registered with.
        case userAgent(any ExternalUserAgent, redirectURI: URL)
        /// The device authorization grant (RFC 8628): `present` shows the user code and URL.
        case device(present: @Sendable (DeviceAuthorization) async -> Void)
        /// The client credentials grant (a confidential client acting for itself).
        case clientCredentials
        /// A workload's own identity token exchanged for tokens (the manager's `workload`: token
        /// exchange or the JWT bearer grant), with no secret; every renewal is a new grant with a fresh
        /// identity token.
        case workload
    }

    /// The issuer.
    public let issuer: String
    /// The client id.
    public let clientID: String
    /// The storage key of this manager's session.
    public let key: String
    /// Where the session lives.
    public let storage: any SessionStorage
    /// The coordinator every token goes through.
    public let coordinator: RefreshCoordinator
    private let state: ClientState
    private let engine: SessionEngine

    /// The RFC 8707 resource the tokens are for (sent on login and every refresh), if any.
    public let resource: String?
    /// How a workload logs in and renews (`login(with: .workload)`), if this manager is a workload's.
    public let workload: WorkloadGrant?
    /// How this manager logs in and renews, stored with every login's session (with the grant of
    /// that login) so another process can open it (`open(key:storage:transport:)`).
    public let plan: SessionPlan

    /// A manager for `clientID` at `issuer` (discovered on first use), keeping its session in
    /// `storage` under `key`. With `resource`, every login and refresh names that RFC 8707 resource
    /// (for a resource that publishes RFC 9728 metadata, `ResourceTokenManager` discovers the rest).
    ///
    /// The manager adopts and renews only a session its own client made: a session under `key` made by
    /// another client or at another provider (a `moose login` profile of the same name, another app's)
    /// fails with `invalidConfiguration`, naming both — never handed out, never renewed with this
    /// client's credentials. A `login(with:)` replaces it.
    ///
    /// - Parameters:
    ///   - issuer: the provider's issuer URL; discovery runs once, on first use.
    ///   - clientID: the client registered there.
    ///   - authentication: how the client authenticates at the token endpoint (`.none` for a public
    ///     client; a secret, or `private_key_jwt`).
    ///   - storage: where the session lives (`EncryptedSessionStorage`, `InMemorySessionStorage`, PostgreSQL).
    ///   - key: the session's name in `storage` (default `"default"`): one app with several accounts or
    ///     providers uses one key for each; the `moose` CLI's profiles are keys too (`moose login
    ///     --profile work` writes the key `work`).
    ///   - transport: what sends the requests (`URLSessionTransport`, `CurlTransport`, AsyncHTTPClient's).
    ///   - scopes: what a login asks for (default `openid profile email`).
    ///   - endpoints: endpoints set by hand, each replacing the discovered one (a provider without
    ///     discovery, or one that lists a wrong endpoint); default: none, everything discovered.
    ///   - dpop: bind every login's tokens to a new DPoP key of this algorithm (RFC 9449); `nil` (the
    ///     default): bearer tokens.
    ///   - resource: the RFC 8707 resource URI named on every login and refresh; `nil` (the default):
    ///     none is named.
    ///   - workload: how a workload logs in (`login(with: .workload)`) and renews its session — also
    ///     one made by `moose login --workload` or another process, when issuer and client match;
    ///     `nil` (the default): `login(with: .workload)` fails with `invalidConfiguration`.
    ///   - logger: where request lines go (debug level, credentials redacted); `nil` (the default): nowhere.
    ///   - configuration: the coordinator's tuning (the validity margin, the lease, retries, reachability);
    ///     the defaults of `RefreshCoordinator.Configuration()` otherwise.
    public convenience init(
        issuer: String, clientID: String, authentication: ClientAuthentication = .none, storage: any SessionStorage,
        key: String = "default", transport: any HTTPTransport, scopes: [String] = ["openid", "profile", "email"],
        endpoints: EndpointOverrides = EndpointOverrides(), dpop: JWTAlgorithm? = nil, resource: String? = nil,
        workload: WorkloadGrant? = nil,
        logger: Logger? = nil, configuration: RefreshCoordinator.Configuration = RefreshCoordinator.Configuration()
    ) {
        var plan = SessionPlan(name: key, issuer: issuer, clientID: clientID, scopes: scopes, endpoints: endpoints)
        plan.dpop = dpop?.rawValue
        plan.resource = resource
        if case .none = authentication {} else { plan.client.credential = .heldByApp }
        // The app's own workload grant, not stored: another process cannot renew the session.
        if workload != nil { plan.grant = .workload(SessionPlan.Workload(source: nil)) }
        self.init(
            plan: plan, authentication: plan.client.credential == .heldByApp ? authentication : nil, storage: storage,
            key: key,
            transport: transport, workload: workload, idTokenKeys: nil, logger: logger, configuration: configuration)
    }

    /// A manager that logs in and renews as `plan` says — its client's authentication read from the
    /// plan's references (a secret file or variable, a private key file), its workload source, audience,
    /// resource and DPoP algorithm — and stores `plan` with every login's session, so any other process
    /// opens and renews that session with `open(key:storage:transport:)`.
    ///
    /// The references are read now (a missing one fails here) and again whenever the client is made
    /// for a refresh, a renewal or a logout (`SessionPlan.client(metadata:transport:registration:authentication:)`):
    /// a secret file rotated by a secret manager is picked up without a restart. A session whose client
    /// was registered (RFC 7591) authenticates with the registration kept with it.
    ///
    /// - Parameters:
    ///   - plan: how to log in and renew (`SessionPlan`).
    ///   - storage: where the session lives.
    ///   - key: its key; `nil` (the default): the plan's `name` (the plan is renamed to the key).
    ///   - transport: what sends the requests; the plan's CA file and public-key pins are applied to it
    ///     (`SessionPlan.transport(over:)`): a plan that names them needs a `TrustConfigurableTransport`
    ///     such as `CurlTransport`, and a session is never renewed without them.
    ///   - idTokenKeys: where the ID-token validator's JWKS cache keeps its last document between runs,
    ///     given the provider's `jwks_uri` once it is discovered (MooseSQLiteStorage:
    ///     `{ .secretStore(store, for: $0) }`); `nil` (the default): in memory, fetched on first use.
    ///   - commands: what runs a workload's `command:` source (MooseOAuthSystem's
    ///     `WorkloadIdentity.command`); `nil` (the default): a plan with one is `invalidConfiguration`.
    ///   - logger: where request lines go (debug level, credentials redacted); `nil` (the default): nowhere.
    ///   - configuration: the coordinator's tuning; the defaults of `RefreshCoordinator.Configuration()` otherwise.
    /// - Throws: `OAuthError` with `invalidConfiguration` when a reference cannot be resolved (an unset
    ///   variable, an unreadable or oversized key or secret file, a key that cannot sign `private_key_jwt`,
    ///   an unknown DPoP algorithm or workload source, a `command:` source without `commands`) or when
    ///   the plan says the client's credentials are held by the app that made it
    ///   (`SessionPlan.Credential.heldByApp`: no file or variable), or when the plan has a CA file or
    ///   pins and `transport` cannot apply them.
    public convenience init(
        plan: SessionPlan, storage: any SessionStorage, key: String? = nil, transport: any HTTPTransport,
        idTokenKeys: (@Sendable (URL) -> JWKSCache.Persistence)? = nil, commands: WorkloadIdentity.Commands? = nil,
        logger: Logger? = nil, configuration: RefreshCoordinator.Configuration = RefreshCoordinator.Configuration()
    ) throws {
        // Every reference is read once now, so a plan that cannot be followed fails here, not at the first refresh.
        _ = try plan.dpopAlgorithm()
        _ = try plan.clientAuthentication()
        var named = plan
        named.name = key ?? plan.name
        // The plan's trust (CA file, pins) is the library's to apply: every login, renewal and logout of
        // this session goes over `trusted`, or the manager is not made.
        let trusted = try named.transport(over: transport)
        self.init(
            plan: named, authentication: nil, storage: storage, key: named.name, transport: trusted,
            // The workload's identity source is not the provider: the app's own transport reaches it.
            workload: try plan.workloadGrant(transport: transport, commands: commands), idTokenKeys: idTokenKeys,
            logger: logger,
            configuration: configuration)
    }

    /// The manager for the session already under `key` in `storage`, whatever made it (`moose login`,
    /// another app, a fleet's replica): it renews the session as the plan stored with it says
    /// (`SessionPlan`); a session written before plans existed renews as the least plan it implies
    /// (its issuer and client, a public client).
    ///
    /// ```swift
    /// let manager = try await TokenManager.open(key: "ci", storage: storage, transport: transport)
    /// let token = try await manager.accessToken()
    /// ```
    ///
    /// - Parameters:
    ///   - key: the session's name in `storage` (a `moose login --profile` name is one).
    ///   - storage: where the session already lives.
    ///   - transport: what sends the requests; the session plan's CA file and public-key pins are
    ///     applied to it (`SessionPlan.transport(over:)`), never left out.
    ///   - idTokenKeys: where the JWKS cache keeps its last document between runs, given the provider's
    ///     `jwks_uri`; `nil` (the default): in memory.
    ///   - commands: what runs a workload session's `command:` source (MooseOAuthSystem's
    ///     `WorkloadIdentity.command`); `nil` (the default): such a session is `invalidConfiguration`.
    ///   - logger: where request lines go (debug level, credentials redacted); `nil` (the default): nowhere.
    ///   - configuration: the coordinator's tuning; the defaults of `RefreshCoordinator.Configuration()` otherwise.
    /// - Returns: a manager whose `plan` is the session's (named `key`); nothing is sent to the provider
    ///   yet. For a row a logout kept the plan in (`logout(…, keepingPlan: true)`), a manager whose
    ///   `login(with:)` logs in as that plan says; its `accessToken()` throws `needsLogin` until then.
    /// - Throws: `OAuthError` with `needsLogin` when there is no session under `key`; `sessionDamaged`
    ///   for a row that fails authentication; `storeUnavailable` when the storage cannot be read;
    ///   `invalidConfiguration` when its plan cannot be followed here (the client's credentials held by
    ///   the app that made it, an unset variable, an unreadable key file, a workload session whose
    ///   identity source was that app's own `WorkloadGrant` or is a command without `commands`, a CA
    ///   file or pins that `transport` cannot apply — it is not a `TrustConfigurableTransport`).
    public static func open(
        key: String, storage: any SessionStorage, transport: any HTTPTransport,
        idTokenKeys: (@Sendable (URL) -> JWKSCache.Persistence)? = nil, commands: WorkloadIdentity.Commands? = nil,
        logger: Logger? = nil, configuration: RefreshCoordinator.Configuration = RefreshCoordinator.Configuration()
    ) async throws -> TokenManager {
        let stored: StoredSession?
        do {
            stored = try await storage.load(key)
        } catch let error as OAuthError where error.code == OAuthError.sessionDamaged {
            throw error
        } catch {
            throw OAuthError(OAuthError.storeUnavailable, "cannot read the session under \(key)", underlying: error)
        }
        guard let session = stored?.session else {
            throw OAuthError(OAuthError.needsLogin, "there is no session under \(key): log in first")
        }
        let plan = SessionPlan.of(session, key: key)
        if case .workload(let workload) = plan.grant, workload.source == nil {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the session under \(key) is a workload's whose identity source is its app's own (a WorkloadGrant value, "
                    + "not stored): open it with TokenManager(…, workload:)")
        }
        return try TokenManager(
            plan: plan, storage: storage, key: key, transport: transport, idTokenKeys: idTokenKeys, commands: commands,
            logger: logger, configuration: configuration)
    }

    private init(
        plan: SessionPlan, authentication: ClientAuthentication?, storage: any SessionStorage, key: String,
        transport: any HTTPTransport, workload: WorkloadGrant?,
        idTokenKeys: (@Sendable (URL) -> JWKSCache.Persistence)?,
        logger: Logger?,
        configuration: RefreshCoordinator.Configuration
    ) {
        let issuer = plan.issuer, clientID = plan.clientID
        self.issuer = issuer
        self.clientID = clientID
        self.key = key
        self.storage = storage
        self.resource = plan.resource
        self.plan = plan
        let state = ClientState(
            plan: plan, authentication: authentication, transport: transport, idTokenKeys: idTokenKeys, logger: logger,
            clock: configuration.clock)
        self.state = state
        engine = SessionEngine(key: key, storage: storage, configuration: configuration)
        coordinator = engine.coordinator(
            client: { session in try await state.prepare(for: session) },
            renew: { session, client in
                // A workload session renews by a new workload grant (a client-credentials one by the engine's
                // own step), as the session's plan says.
                guard let workload, case .workload = SessionPlan.of(session, key: key).grant else { return nil }
                return try await workload.tokens(client: client, scopes: session.tokens.scopes)
            },
            admitting: { session in
                try SessionEngine.requireOwner(session, key: key, issuer: issuer, clientID: clientID)
                try Self.requireTrust(of: session, key: key, plan: plan)
            })
        self.workload = workload
    }

    /// A session whose own plan names a CA file or pins is renewed only by a manager whose plan names
    /// the same: an app's plan without the pins `moose login --pin-public-key` gave the session never
    /// renews it unpinned (`open(key:…)` takes the session's own plan).
    static func requireTrust(of session: OAuthSession, key: String, plan: SessionPlan) throws {
        guard let stored = SessionPlan.stored(in: session, key: key), let trust = try? stored.trust() else { return }
        guard (try? plan.trust()) == trust else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the session under \(key) trusts its provider by its own CA file or public-key pins, which this "
                    + "manager's plan does not name: open it with TokenManager.open(key:…) (its own plan), or log in again"
            )
        }
    }

    /// Events for UIs (refreshed, refresh failed, needs a new login, logged out).
    public var events: AsyncStream<RefreshEvent> { coordinator.events }

    /// The provider's metadata (discovered once).
    ///
    /// - Returns: the discovered document with the manager's `endpoints` applied, kept for the
    ///   manager's lifetime after the first success.
    /// - Throws: `OAuthError` from discovery: `discovery` (no usable document), `issuerMismatch`,
    ///   `insecureEndpoint` (plain `http` to another machine), `invalidConfiguration` (an issuer that is
    ///   not an http(s) URL), `transient` or `tls` when the provider cannot be reached.
    public func metadata() async throws -> ProviderMetadata { try await state.metadata() }

    /// Logs in with `method`, stores the session (replacing any), and returns who is signed in.
    ///
    /// - Parameters:
    ///   - method: the grant, with what it needs (a browser opener, a device-code presenter…).
    ///   - parameters: the scopes, RFC 8707 resources and extra request parameters; `nil` (the
    ///     default): the manager's `scopes` and `resource`. A client-credentials login adds the plan's
    ///     `audience` to them.
    ///   - pushedAuthorization: whether a browser login pushes its request first (RFC 9126 PAR);
    ///     default `.whenAdvertised` (`.never` for a provider whose PAR endpoint refuses this client).
    /// - Returns: the new session's summary (its key, who signed in, scopes, expiry; never a token).
    /// - Throws: `OAuthError`: the discovery errors of `metadata()` on first use; `invalidConfiguration`
    ///   (`.workload` without a `WorkloadGrant`, `openid` as the only client-credentials scope, a
    ///   provider that requires PAR, a loopback port that cannot be bound); from the user's side
    ///   `accessDenied`, `timedOut` (loopback) or `expiredToken` (device); from the provider's
    ///   `invalidGrant`, `invalidClient`, `server`, `invalidResponse`, `unsafeValue`, `transient`, `tls`;
    ///   the security checks' `stateMismatch`, `issuerMismatchInResponse`, `invalidIDToken`;
    ///   `workloadIdentity` when the platform gives no identity token; `storeUnavailable` when the
    ///   tokens came but the session could not be stored. Whatever a `.loopback` login's `open` throws.
    @discardableResult
    public func login(
        with method: LoginMethod, parameters: AuthorizationParameters? = nil,
        pushedAuthorization: PushedAuthorizationPolicy = .whenAdvertised
    ) async throws -> SessionSummary {
        let prepared = try await state.prepare()
        var client = prepared.client
        let validator = prepared.validator
        client.pushedAuthorization = pushedAuthorization
        let parameters = parameters ?? AuthorizationParameters(scopes: state.scopes)
        let tokens = try await method.tokens(
            client: client, validator: validator, parameters: parameters, audience: plan.audience, workload: workload)
        // The plan stored with the session names this login's grant; the plan's own data (a fixed port,
        // a workload's source) stays when it is the plan's grant.
        var plan = self.plan
        let kind = method.grantKind
        if plan.grant.kind != kind { plan.grant = SessionPlan.Grant(kind) }
        var attributes = plan.stored()
        // For older readers, which renew such a session from these attributes.
        if let audience = plan.audience, kind.renewsWithoutAPerson {
            attributes[SessionEngine.audienceAttribute] = audience
        }
        let session = try await engine.completeLogin(
            tokens, client: client, grant: kind, attributes: attributes, coordinator: coordinator)
        return SessionSummary(key: key, session: session)
    }

    /// A token valid for `minimumValidity` seconds, refreshed once for all concurrent callers.
    ///
    /// - Parameter minimumValidity: seconds the token must still be valid, capped at the configured
    ///   share of its lifetime (`RefreshCoordinator.Configuration.maximumMarginFraction`); `nil` (the
    ///   default): the configuration's `minimumValidity` (30 s unless set).
    /// - Throws: `OAuthError`, as `RefreshCoordinator.accessToken(minimumValidity:)`: `needsLogin` (no
    ///   session, or its refresh token was refused earlier), `invalidGrant` (refused now), `sessionDamaged`,
    ///   `invalidConfiguration` (the session under `key` is another client's or provider's),
    ///   `storeUnavailable`, `offline`, `refreshLimit`, `transient`, `renewalRefused` (a workload or
    ///   client-credentials renewal refused), the discovery errors of `metadata()` when a refresh is the
    ///   first use; `CancellationError` when the caller's task is cancelled (the shared refresh goes on).
    public func accessToken(minimumValidity: TimeInterval? = nil) async throws -> AccessToken {
        try await coordinator.accessToken(minimumValidity: minimumValidity)
    }

    /// Who is signed in (never a token), or `nil` without a session (also after a logout that kept
    /// the plan).
    ///
    /// Read from the storage as it is, without the ownership check `accessToken()` makes.
    ///
    /// - Throws: `OAuthError.sessionDamaged` for a row that cannot be opened; the storage's own error
    ///   when it cannot be read.
    public func summary() async throws -> SessionSummary? {
        guard let stored = try await storage.load(key), !stored.session.isLoggedOut else { return nil }
        return SessionSummary(key: key, session: stored.session)
    }

    /// The UserInfo claims (OIDC Core §5.3), checked against the ID token's `sub`.
    ///
    /// - Returns: the UserInfo response's JSON object, every member as the provider sent it.
    /// - Throws: `OAuthError`: the errors of `accessToken()`; `missingEndpoint` when the provider has
    ///   no UserInfo endpoint; `subjectMismatch` when its `sub` is not the ID token's; `invalidResponse`
    ///   for a body that is not a JSON object with a `sub`; `server` (4xx) or `transient` (5xx, unreachable).
    public func userInfo() async throws -> JSONObject {
        let client = try await state.client()
        let token = try await accessToken()
        let subject = try await storage.load(key)?.session.subject
        return try await client.userInfo(token: token, expectedSubject: subject)
    }

    /// The client a one-shot grant (`exchange(…)`) uses: the plan's, as for a new login.
    func clientForOneShotGrant() async throws -> OAuthClient { try await state.client() }

    /// Logs out in the right order: revoke the refresh token, then the access token (RFC 7009),
    /// build the end-session URL, then wipe the local session — always, even when revocation or
    /// discovery fails (the failure is in the result).
    ///
    /// - Parameters:
    ///   - postLogoutRedirectURI: where the provider sends the browser after the end-session URL is
    ///     opened (it must be registered there); `nil` (the default): none is sent.
    ///   - keepingPlan: leave the session's plan (never a secret) under `key`, with no tokens, so the
    ///     next `login(with:)` — here, or after `TokenManager.open(key:…)` in any process sharing the
    ///     storage — logs in the same way again; default `false`: the row is deleted.
    /// - Returns: what was revoked, the end-session URL to open in a browser (`nil` for a session
    ///   renewed without a person, or a provider without `end_session_endpoint`), whether there was a
    ///   session and whether its plan was kept, and the revocation or wipe error, if any.
    @discardableResult
    public func logout(postLogoutRedirectURI: URL? = nil, keepingPlan: Bool = false) async -> LogoutResult {
        let state = self.state
        return await engine.logout(
            coordinator: coordinator, postLogoutRedirectURI: postLogoutRedirectURI, keepingPlan: keepingPlan
        ) { session in
            try await state.prepare(for: session).client
        }
    }
}

/// The provider's metadata and its JWKS cache, made once on first use; the client made from the plan
/// at every use (`SessionPlan.client(metadata:transport:registration:authentication:)`), and the
/// ID-token validator with it (its HMAC secret is the client's of the moment).
actor ClientState {
    nonisolated let plan: SessionPlan
    /// The app's own credentials; `nil`: the plan's references (or a session's registration), read at every use.
    let authentication: ClientAuthentication?
    let transport: any HTTPTransport
    let idTokenKeys: (@Sendable (URL) -> JWKSCache.Persistence)?
    let logger: Logger?
    /// The coordinator's clock (`nil`: the system's): ID tokens and the key set's age are judged by
    /// the same time as the access tokens' expiry, so a test clock moves them all.
    let clock: (@Sendable () -> Date)?
    private var cached: (metadata: ProviderMetadata, jwks: JWKSCache?)?

    nonisolated var scopes: [String] { plan.scopes }

    init(
        plan: SessionPlan, authentication: ClientAuthentication?, transport: any HTTPTransport,
        idTokenKeys: (@Sendable (URL) -> JWKSCache.Persistence)?, logger: Logger?, clock: (@Sendable () -> Date)? = nil
    ) {
        self.clock = clock
        self.plan = plan
        self.authentication = authentication
        self.transport = transport
        self.idTokenKeys = idTokenKeys
        self.logger = logger
    }

    /// The discovered metadata (with the plan's endpoints), fetched once.
    func metadata() async throws -> ProviderMetadata { try await discovered().metadata }

    private func discovered() async throws -> (metadata: ProviderMetadata, jwks: JWKSCache?) {
        if let cached { return cached }
        let metadata = try await Discovery(transport: transport).metadata(
            for: plan.issuer, overrides: plan.provider.endpoints)
        let now = clock ?? { Date() }
        let jwks = metadata.jwksURI.map { url in
            JWKSCache(url: url, transport: transport, persistence: idTokenKeys?(url), now: now)
        }
        if let cached { return cached } // another call discovered it meanwhile: one cache for all
        cached = (metadata, jwks)
        return (metadata, jwks)
    }

    /// The client for `session` (its registration counts) or for a new login, and its validator.
    func prepare(for session: OAuthSession? = nil) async throws -> (client: OAuthClient, validator: IDTokenValidator?) {
        let (metadata, jwks) = try await discovered()
        var client = try plan.client(
            metadata: metadata, transport: transport, registration: session?.registration,
            authentication: authentication)
        client.logger = logger
        // Expiries are computed by the coordinator's clock, which decides when they have passed.
        if let clock { client.clock = clock }
        let validator = jwks.map { jwks in
            SessionEngine.idTokenValidator(
                metadata: metadata, clientID: client.clientID, authentication: client.authentication, jwks: jwks,
                clock: clock ?? { Date() })
        }
        return (client, validator)
    }

    func client() async throws -> OAuthClient { try await prepare().client }
}
