#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
import MooseJWT

/// A session's life, written once: what happens after a login's grant (name the user, store the
/// session, tell the coordinator), how a stored session is refreshed (the one refresh step, with
/// the one ID-token validator factory), and the logout sequence (revoke, end-session URL, wipe —
/// always). `TokenManager`, `ResourceTokenManager` and every `moose` command stand on it; a new
/// kind of login (a service's, a workload's) is one more grant handed to `completeLogin`, never a
/// copy of these steps.
///
/// ```swift
/// let engine = SessionEngine(key: "default", storage: storage)
/// let coordinator = engine.coordinator { session in (client, SessionEngine.idTokenValidator(for: client)) }
/// let tokens = try await AuthorizationCodeFlow(client: client, redirectURI: uri, userAgent: agent, idTokens: validator)
///     .authorize(AuthorizationParameters(scopes: ["openid"]))
/// let session = try await engine.completeLogin(tokens, client: client, coordinator: coordinator)
/// let result = await engine.logout(coordinator: coordinator) { _ in client }
/// ```
public struct SessionEngine: Sendable {
    /// The session attribute naming the grant a login used when a refresh cannot come from a refresh
    /// token (`client_credentials`, `workload`: a "refresh" is a new grant). Still written for older
    /// readers; renewal follows the session's plan (`SessionPlan.grant`), and only
    /// `SessionPlan.implied(by:key:)` reads it, for a session stored without a plan.
    public static let grantAttribute = OAuthSession.grantAttribute
    /// The session attribute naming the `audience` a client-credentials or workload grant asked for.
    /// Still written for older readers; renewal takes the plan's `audience`, and only
    /// `SessionPlan.implied(by:key:)` reads it, for a session stored without a plan.
    public static let audienceAttribute = "moose.audience"

    /// The storage key of the session.
    public let key: String
    /// Where the session lives.
    public let storage: any SessionStorage
    /// The coordinator's tuning.
    public let configuration: RefreshCoordinator.Configuration

    /// An engine for the session under `key` in `storage`.
    ///
    /// - Parameters:
    ///   - key: the session's name in `storage` (one key, one session).
    ///   - storage: where the session lives, shared by every process that uses the same key.
    ///   - configuration: the tuning of the coordinators it makes; defaults otherwise.
    public init(
        key: String, storage: any SessionStorage,
        configuration: RefreshCoordinator.Configuration = RefreshCoordinator.Configuration()
    ) {
        self.key = key
        self.storage = storage
        self.configuration = configuration
    }

    // MARK: - ID tokens

    /// The ID-token validator for `client` — the one factory every login and refresh uses: the
    /// provider's advertised signing algorithms (RS256 when it names none); the HMAC ones (HS256/384/512,
    /// keyed with the client secret, OIDC Core §10.1) only for a client that authenticates with a
    /// secret, never for a public client. `nil` when the provider publishes no JWKS.
    ///
    /// - Parameters:
    ///   - client: the client whose metadata (issuer, `jwks_uri`, algorithms), id and authentication count.
    ///   - persistence: where the JWKS cache keeps its last document between runs; `nil` (the default):
    ///     in memory only, fetched on first use.
    public static func idTokenValidator(for client: OAuthClient, persistence: JWKSCache.Persistence? = nil)
        -> IDTokenValidator?
    {
        idTokenValidator(
            metadata: client.metadata, clientID: client.clientID, authentication: client.authentication,
            transport: client.transport, persistence: persistence)
    }

    /// The ID-token validator for `clientID` at the provider `metadata` describes (see `idTokenValidator(for:)`).
    public static func idTokenValidator(
        metadata: ProviderMetadata, clientID: String, authentication: ClientAuthentication,
        transport: any HTTPTransport, persistence: JWKSCache.Persistence? = nil
    ) -> IDTokenValidator? {
        guard let jwksURI = metadata.jwksURI else { return nil }
        return idTokenValidator(
            metadata: metadata, clientID: clientID, authentication: authentication,
            jwks: JWKSCache(url: jwksURI, transport: transport, persistence: persistence))
    }

    /// The validator of `idTokenValidator(metadata:clientID:authentication:transport:persistence:)`
    /// on a JWKS cache the caller keeps (one per provider, shared by the validators of every client
    /// authentication it makes: the HMAC secret is the client's of the moment).
    static func idTokenValidator(
        metadata: ProviderMetadata, clientID: String, authentication: ClientAuthentication, jwks: JWKSCache,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) -> IDTokenValidator {
        var algorithms = Set(
            (metadata.idTokenSigningAlgValuesSupported ?? ["RS256"]).compactMap(JWTAlgorithm.init(rawValue:)))
        var secret: String? = nil
        switch authentication {
        case .clientSecretBasic(let value), .clientSecretPost(let value): secret = value
        default: algorithms.subtract([.hs256, .hs384, .hs512])
        }
        return IDTokenValidator(
            issuer: metadata.issuer, clientID: clientID, jwks: jwks,
            algorithms: algorithms.isEmpty ? [.rs256] : algorithms, clientSecret: secret, clock: clock)
    }

    // MARK: - Refresh

    /// The one refresh step, for the stored session the coordinator read inside its lease: the
    /// refresh grant (RFC 6749 §6) naming the session's resource, validating a new ID token with
    /// `validator` — or, for a session without a refresh token whose plan's grant is client
    /// credentials (`SessionPlan.of(_:key:)`), a new grant for the same scopes naming the plan's audience.
    ///
    /// - Parameters:
    ///   - session: the stored session, read inside the refresh lease.
    ///   - client: the client that refreshes (its token endpoint, authentication, DPoP, resource).
    ///   - validator: checks a new ID token; `nil`: none is checked. A new ID token that fails is
    ///     dropped (the previous one kept), never thrown.
    /// - Returns: the new tokens, carrying the session's resource; the refresh token may have rotated.
    /// - Throws: `OAuthError` from the token endpoint: `invalidGrant` (also for a session with no
    ///   refresh token and no repeatable grant), `needsLogin` (DPoP-bound tokens without their key),
    ///   `invalidClient`, `server`, `invalidResponse`, `unsafeValue`, `transient`, `tls`,
    ///   `missingEndpoint` or `insecureEndpoint`.
    public static func refresh(_ session: OAuthSession, client: OAuthClient, validator: IDTokenValidator?) async throws
        -> TokenSet
    {
        let tokens = session.tokens
        // The plan says how the session was obtained (its name is not used here).
        let plan = tokens.refreshToken == nil ? SessionPlan.of(session, key: "") : nil
        if let plan, case .clientCredentials = plan.grant {
            var client = client
            client.resource = tokens.resource ?? session.resource ?? client.resource
            // The scopes granted last time; `openid` among them (a provider's default scope) is not asked
            // for again: this grant issues no ID token.
            var parameters = AuthorizationParameters(scopes: tokens.scopes.filter { $0 != "openid" })
            if let audience = plan.audience { parameters.extra.append(("audience", audience)) }
            var fresh = try await ClientCredentialsFlow(client: client).authorize(parameters)
            fresh.resource = fresh.resource ?? client.resource
            return fresh
        }
        var fresh = try await client.refresh(tokens, validatingWith: validator)
        fresh.resource = fresh.resource ?? tokens.resource ?? session.resource
        return fresh
    }

    /// The coordinator for this session, refreshing with `client`'s answer for the stored session
    /// (its client and ID-token validator: a registration kept with the session, a secret file…).
    /// `current` seeds its cache when the caller already read the session.
    ///
    /// `renew` is for sessions renewed by a grant of their own instead of a refresh token (a
    /// workload's token exchange or JWT bearer grant: a fresh identity token each time): called,
    /// inside the same single flight, for a stored session with no refresh token; it returns `nil`
    /// to leave the session to the usual step. A session with a refresh token always uses it.
    ///
    /// `admitting` checks every session the coordinator reads from the storage before it adopts or
    /// renews it, and throws to refuse it (`TokenManager` refuses a session of another provider or
    /// client: see `SessionEngine.requireOwner`).
    ///
    /// - Parameters:
    ///   - current: the session when the caller already read it; `nil` (the default): read on first use.
    ///   - client: the client and ID-token validator for a stored session, called on every refresh;
    ///     what it throws fails that refresh.
    ///   - renew: the grant of a session renewed without a refresh token; `nil` (the default): the
    ///     usual step (`refresh(_:client:validator:)`) for every session.
    ///   - admitting: refuses a stored session by throwing; `nil` (the default): every session is admitted.
    /// - Returns: a coordinator for `key` in `storage` with this engine's configuration.
    public func coordinator(
        current: OAuthSession? = nil,
        client: @escaping @Sendable (OAuthSession) async throws -> (client: OAuthClient, validator: IDTokenValidator?),
        renew: (@Sendable (OAuthSession, OAuthClient) async throws -> TokenSet?)? = nil,
        admitting: (@Sendable (OAuthSession) throws -> Void)? = nil
    )
        -> RefreshCoordinator
    {
        RefreshCoordinator(
            key: key, storage: storage, configuration: configuration, current: current, admitting: admitting,
            refreshingSession: { session in
                let (client, validator) = try await client(session)
                if session.tokens.refreshToken == nil, let renew, var fresh = try await renew(session, client) {
                    fresh.resource = fresh.resource ?? session.tokens.resource ?? session.resource
                    return fresh
                }
                return try await Self.refresh(session, client: client, validator: validator)
            })
    }

    /// Refuses `session` unless it was made by `clientID` at `issuer` (compared byte for byte, a
    /// trailing `/` aside): a manager for one client must neither hand out nor renew — with its own
    /// credentials, under the other's name — a session another client made under the same key (a
    /// `moose login` profile, another app's). `invalidConfiguration`, naming both.
    ///
    /// - Parameters:
    ///   - session: the stored session to check.
    ///   - key: its storage key, for the message only.
    ///   - issuer: the manager's issuer (a trailing `/` on either side is ignored).
    ///   - clientID: the manager's client id (compared exactly).
    /// - Throws: `OAuthError.invalidConfiguration` naming both clients and providers.
    public static func requireOwner(_ session: OAuthSession, key: String, issuer: String, clientID: String) throws {
        func trimmed(_ text: String) -> Substring { text.hasSuffix("/") ? text.dropLast() : Substring(text) }
        guard trimmed(session.issuer).utf8.elementsEqual(trimmed(issuer).utf8),
            session.clientID.utf8.elementsEqual(clientID.utf8)
        else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the session under \(key) belongs to client \(session.clientID) at \(session.issuer); this manager is for "
                    + "client \(clientID) at \(issuer): open it with that issuer and client, log in again to replace it, or use another key"
            )
        }
    }

    // MARK: - Login

    /// Completes a login whose grant gave `tokens` (already validated by the flow): names the user
    /// (the ID token's `preferred_username`, `email`, `name` — else UserInfo's — then `sub`), stores
    /// the session under `key` (replacing any), and tells `coordinator` so its next call reads it.
    /// The refresh token of the session it replaced — an earlier login, or another login of the same
    /// key finishing at the same moment — is revoked when it is this provider's and client's, so no
    /// valid refresh token is left behind without a holder.
    ///
    /// - Parameters:
    ///   - tokens: what the login's grant returned, already validated by its flow.
    ///   - client: the client that made the login; its issuer and id are stored with the session, and
    ///     it revokes the replaced refresh token.
    ///   - grant: the login's grant, recorded under `grantAttribute` for older readers when a renewal
    ///     repeats it (`Grant.Kind.renewsWithoutAPerson`: client credentials, a workload's); it also
    ///     keeps UserInfo from being asked after a client-credentials grant. `nil` (the default), or a
    ///     grant renewed with the refresh token: nothing recorded. Renewal follows the plan in
    ///     `attributes` (`SessionPlan.stored(in:)`).
    ///   - attributes: attributes to keep with the session (a CLI profile's settings); the display
    ///     names found here win over older ones.
    ///   - registration: the client registration the tokens were issued to, kept sealed with them;
    ///     `nil` (the default): a pre-registered client.
    ///   - coordinator: told with `didLogIn()` so its next call reads the new session; `nil`: none.
    /// - Returns: the session as stored.
    /// - Throws: `OAuthError.storeUnavailable` when the session cannot be stored (the grant itself
    ///   succeeded); a failed revocation of the replaced refresh token is ignored.
    @discardableResult
    public func completeLogin(
        _ tokens: TokenSet, client: OAuthClient, grant: SessionPlan.Grant.Kind? = nil,
        attributes: [String: String] = [:],
        registration: RegisteredClient? = nil, coordinator: RefreshCoordinator? = nil
    ) async throws -> OAuthSession {
        let claims = tokens.idToken.flatMap { try? JWT(compact: $0).claims }
        var kept = attributes.merging(
            await SessionSummary.displayAttributes(
                idTokenClaims: claims, tokens: tokens, client: client,
                grant: grant)
        ) { $1 }
        if let grant, grant.renewsWithoutAPerson { kept[Self.grantAttribute] = grant.rawValue }
        let session = OAuthSession(
            issuer: client.metadata.issuer, clientID: client.clientID, tokens: tokens, subject: claims?.subject,
            attributes: kept, resource: tokens.resource ?? client.resource, registration: registration)
        let replaced: OAuthSession?
        do {
            replaced = try await store(session)
        } catch {
            throw OAuthError(
                OAuthError.storeUnavailable, "the login succeeded but its session could not be stored under \(key)",
                underlying: error)
        }
        // The refresh token this login replaced (an earlier login, or one finishing at the same moment
        // in another process) would stay valid at the provider with no one holding it: revoke it, when
        // it belongs to this provider and client (best effort; the new session stands either way).
        if let old = replaced, let oldToken = old.tokens.refreshToken,
            !oldToken.utf8.elementsEqual((tokens.refreshToken ?? "").utf8),
            old.issuer.utf8.elementsEqual(session.issuer.utf8), old.clientID.utf8.elementsEqual(session.clientID.utf8)
        {
            try? await client.revoke(oldToken, hint: "refresh_token")
        }
        await coordinator?.didLogIn()
        return session
    }

    /// Writes `session` by compare-and-set and returns the session it replaced (`nil`: none, or a row
    /// that could not be read — overwritten, since a login is the way out of a damaged session).
    private func store(_ session: OAuthSession) async throws -> OAuthSession? {
        for _ in 0..<8 {
            let current: StoredSession?
            do {
                current = try await storage.load(key)
            } catch {
                _ = try await storage.replace(session, key: key)
                return nil
            }
            do {
                _ = try await storage.save(session, key: key, expectedGeneration: current?.generation, lease: nil)
                return current?.session
            } catch let error as OAuthError where error.code == OAuthError.storageConflict {
                continue // another writer came between: read what is there now
            }
        }
        _ = try await storage.replace(session, key: key)
        return nil
    }

    // MARK: - Logout

    /// The row a logout that keeps the plan leaves of `session`: its plan (`SessionPlan.of(_:key:)`),
    /// issuer, client and resource, with no tokens and no registration (`OAuthSession.isLoggedOut`).
    /// A stored plan that reads is kept as it was written, byte for byte — a newer Moose's fields this
    /// one does not know survive an older process's logout; any other plan is written now.
    static func loggedOut(keeping session: OAuthSession, key: String) -> OAuthSession {
        let attributes: [String: String]
        if let text = session.attributes[SessionPlan.attribute],
            (try? JSONDecoder().decode(SessionPlan.self, from: Data(text.utf8))) != nil
        {
            attributes = [SessionPlan.attribute: text]
        } else {
            attributes = SessionPlan.of(session, key: key).stored()
        }
        return OAuthSession(
            issuer: session.issuer, clientID: session.clientID, tokens: TokenSet(accessToken: ""),
            state: .needsReauthentication, attributes: attributes, resource: session.resource)
    }

    /// Logs out in the right order: revokes the refresh token, then the access token (RFC 7009), and
    /// builds the RP-initiated logout URL — with the client `client` gives for the stored session —
    /// then wipes the session from the storage, always, even when the provider could not be reached
    /// (the failure is in the result), and tells `coordinator` (its listeners get `loggedOut`).
    ///
    /// - Parameters:
    ///   - coordinator: told with `didLogOut()` (its listeners get `loggedOut`); `nil`: none.
    ///   - postLogoutRedirectURI: sent with the end-session URL (it must be registered); `nil`
    ///     (the default): none.
    ///   - keepingPlan: leave the session's plan (`SessionPlan.of(_:key:)`: how it logged in, never a
    ///     secret) under `key` as a row with no tokens (`OAuthSession.isLoggedOut`) instead of deleting
    ///     the row, so the next login of `key` in any process sharing the storage logs in the same way
    ///     again; default `false`: nothing is left. A damaged row is deleted either way.
    ///   - client: the client for the stored session (its revocation and end-session endpoints); what
    ///     it throws is reported in the result's `revocationError`, and the wipe still runs.
    /// - Returns: the result, with `hadSession` false when nothing was stored under `key` (or only a
    ///   kept plan: a second logout revokes nothing and keeps the plan it is asked to keep).
    public func logout(
        coordinator: RefreshCoordinator?, postLogoutRedirectURI: URL? = nil, keepingPlan: Bool = false,
        client: (OAuthSession) async throws -> OAuthClient
    ) async -> LogoutResult {
        var result = LogoutResult()
        let stored: StoredSession?
        var damaged = false
        do {
            stored = try await storage.load(key)
        } catch let error as OAuthError where error.code == OAuthError.sessionDamaged {
            // A damaged row (bit rot, sealed under another key): nothing to revoke, removed below.
            stored = nil
            damaged = true
            result.revocationError = OAuthError(
                OAuthError.sessionDamaged,
                "the stored session of \(key) could not be opened: nothing was revoked at the provider",
                underlying: error)
        } catch {
            // The storage cannot be read: nothing to revoke; the wipe below is still tried.
            stored = nil
            result.revocationError = OAuthError(
                OAuthError.storeUnavailable, "the session of \(key) could not be read: nothing was revoked",
                underlying: error)
        }
        let kept: OAuthSession? = stored.flatMap { keepingPlan ? Self.loggedOut(keeping: $0.session, key: key) : nil }
        if let session = stored?.session, !session.isLoggedOut {
            do {
                result = try await client(session).logout(session.tokens, postLogoutRedirectURI: postLogoutRedirectURI)
                // A session renewed without a person (client credentials, a workload) has no browser
                // session at the provider to end: no end-session URL for it.
                if session.renewsWithoutAPerson { result.endSessionURL = nil }
            } catch {
                result.revocationError =
                    error as? OAuthError
                    ?? OAuthError(
                        OAuthError.transient, "the provider could not be reached to revoke the tokens",
                        underlying: error)
            }
        }
        result.hadSession = stored.map { !$0.session.isLoggedOut } ?? damaged
        do {
            if let kept {
                _ = try await storage.replace(kept, key: key)
                result.planKept = true
            } else {
                try await storage.delete(key)
            }
        } catch {
            result.wipeError = OAuthError(
                OAuthError.storeUnavailable, "the session of \(key) could not be wiped", underlying: error)
        }
        await coordinator?.didLogOut()
        return result
    }
}
