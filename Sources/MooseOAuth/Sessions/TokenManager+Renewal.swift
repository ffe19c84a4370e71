#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP

/// The manager's doors for a process that renews on request — a command line (`moose refresh`, a
/// credential helper told of a 401) or a "refresh now" button — and that may exit right after:
/// the coordinator under them stays the manager's.
extension TokenManager {
    /// Refreshes now, whatever the current token's expiry, through the same shared, leased path as
    /// every other refresh; concurrent callers (threads, processes) share it.
    ///
    /// - Returns: the new token (or one another process stored while this waited for the lease).
    /// - Throws: `OAuthError`, as `accessToken(minimumValidity:)`.
    @discardableResult
    public func refreshNow() async throws -> AccessToken { try await coordinator.refreshNow() }

    /// For a 401: refreshes only if `rejected` is still the current token (another process may have
    /// refreshed already); otherwise returns the newer one. N parallel 401s make one refresh.
    ///
    /// - Parameter rejected: the token the resource server refused.
    /// - Returns: the newer token already current, one another process stored, or a fresh one.
    /// - Throws: `OAuthError`, as `accessToken(minimumValidity:)`; `refreshLimit` when 401s keep coming
    ///   for fresh tokens (the loop guard).
    @discardableResult
    public func refresh(rejecting rejected: AccessToken) async throws -> AccessToken {
        try await coordinator.refresh(rejecting: rejected)
    }

    /// Writes rotated tokens a failed store write left in memory, trying for up to `timeout` seconds:
    /// a process about to exit calls it, since the background retry dies with the process.
    ///
    /// - Parameter timeout: seconds to keep trying (clamped to 0…3600; default 5).
    /// - Returns: `true` when nothing is pending (nothing was, or it was written or superseded by a
    ///   newer session or a logout); `false` when the storage still refuses the write at the deadline.
    public func persistPendingWrite(timeout: TimeInterval = 5) async -> Bool {
        guard await coordinator.hasPendingWrite else { return true }
        return await coordinator.persistPendingWrite(timeout: timeout)
    }

    /// Logs out the session under `key` in `storage`, whatever made it (`moose login`, another app), as
    /// its own stored plan says: revoke the refresh token, then the access token (RFC 7009), build the
    /// end-session URL, then wipe — always, even when the row is damaged, the plan's secret file is gone
    /// or the provider cannot be reached (the failure is in the result). The plan's CA file and pins
    /// are applied to `transport` (`SessionPlan.transport(over:)`).
    ///
    /// ```swift
    /// let result = await TokenManager.logout(key: "work", storage: storage, transport: CurlTransport())
    /// if let url = result.endSessionURL { SystemBrowser().open(url) }
    /// ```
    ///
    /// - Parameters:
    ///   - key: the session's name in `storage`.
    ///   - storage: where it lives.
    ///   - transport: what sends the revocation and discovery requests.
    ///   - postLogoutRedirectURI: where the provider sends the browser after the end-session URL;
    ///     `nil` (the default): none is sent.
    ///   - keepingPlan: leave the session's plan (never a secret) under `key`, with no tokens, so that
    ///     the next login of `key` — `TokenManager.open(key:…)` then `login(with:)`, or a plain `moose
    ///     login --profile` — on any machine sharing `storage` logs in the same way again; default
    ///     `false`: the row is deleted.
    /// - Returns: what was revoked, the end-session URL (`nil` for a session renewed without a person),
    ///   whether there was a session and whether its plan was kept, and the revocation or wipe error.
    public static func logout(
        key: String, storage: any SessionStorage, transport: any HTTPTransport, postLogoutRedirectURI: URL? = nil,
        keepingPlan: Bool = false
    ) async -> LogoutResult {
        let engine = SessionEngine(key: key, storage: storage)
        return await engine.logout(
            coordinator: nil, postLogoutRedirectURI: postLogoutRedirectURI, keepingPlan: keepingPlan
        ) { session in
            let plan = SessionPlan.of(session, key: key)
            let trusted = try plan.transport(over: transport)
            let metadata = try await Discovery(transport: trusted).metadata(
                for: plan.issuer, overrides: plan.provider.endpoints)
            return try plan.client(metadata: metadata, transport: trusted, registration: session.registration)
        }
    }
}

/// One-shot grants through the manager's client, kept nowhere: the token is the caller's to use.
extension TokenManager {
    /// Exchanges a subject token for a new one (RFC 8693 token exchange) with this manager's client —
    /// its authentication and trust as the plan says — and returns the issued tokens without storing
    /// a session (`moose exchange`; a service acting for a caller).
    ///
    /// ```swift
    /// let manager = try TokenManager(plan: plan, storage: InMemorySessionStorage(), transport: CurlTransport())
    /// let issued = try await manager.exchange(audiences: ["https://api.example.com"]) {
    ///     ExchangeToken(callerToken, type: ExchangeToken.accessTokenType)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - parameters: the scopes and RFC 8707 resources asked for; `nil` (the default): the plan's scopes.
    ///   - requestedTokenType: the `requested_token_type`; `nil` (the default): the provider's choice.
    ///   - audiences: the `audience` values (logical names of the target services); default none.
    ///   - actor: the actor token (delegation), asked at the grant; `nil` (the default): impersonation.
    ///   - subject: the subject token, asked at the grant.
    /// - Returns: the issued tokens (never stored).
    /// - Throws: `OAuthError`: the discovery errors of `metadata()`; from the provider `invalidGrant`
    ///   (a refused subject token), `invalidClient`, `unsupportedGrantType`, `server`, `transient`;
    ///   whatever `subject` or `actor` throws.
    public func exchange(
        parameters: AuthorizationParameters? = nil, requestedTokenType: String? = nil, audiences: [String] = [],
        actor: (@Sendable () async throws -> ExchangeToken)? = nil,
        subject: @escaping @Sendable () async throws -> ExchangeToken
    ) async throws -> TokenSet {
        let client = try await clientForOneShotGrant()
        let flow = TokenExchangeFlow(
            client: client, requestedTokenType: requestedTokenType, audiences: audiences, actor: actor, subject: subject
        )
        return try await flow.authorize(parameters ?? AuthorizationParameters(scopes: plan.scopes))
    }
}

extension ProviderMetadata {
    /// The provider's metadata, discovered now for `issuer` (OpenID Connect discovery, then RFC 8414),
    /// uncached: for a command or a check that needs the endpoints and keys of a provider without a
    /// session (`moose inspect`, `moose verify`). A session's manager discovers its own (`metadata()`).
    ///
    /// - Parameters:
    ///   - issuer: the issuer URL, compared byte for byte with the document's `issuer`.
    ///   - transport: what fetches the documents.
    /// - Throws: `OAuthError`, as `Discovery.fetch(issuer:transport:)`: `invalidConfiguration`,
    ///   `insecureEndpoint`, `issuerMismatch`, `discovery`, `transient`, `tls`.
    public static func discover(issuer: String, transport: any HTTPTransport) async throws -> ProviderMetadata {
        try await Discovery.fetch(issuer: issuer, transport: transport)
    }
}
