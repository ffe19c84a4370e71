#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import Logging
public import MooseJWT

/// A client registered at an authorization server: its metadata, id, authentication, transport.
/// The flows share it.
public struct OAuthClient: Sendable {
    /// The provider's (discovered and/or configured) metadata.
    public let metadata: ProviderMetadata
    /// The client id.
    public let clientID: String
    /// How the client authenticates.
    public let authentication: ClientAuthentication
    /// The transport for every call.
    public let transport: any HTTPTransport
    /// The clock.
    public var clock: @Sendable () -> Date = { Date() }
    /// Where request lines go (debug level, credentials redacted); `nil` (the default): nowhere.
    public var logger: Logger? = nil
    /// DPoP (RFC 9449): with an algorithm (`.es256`, `.eddsa`, `.rs256`), every login makes a new key
    /// of that kind, sends `dpop_jkt` and proofs, and the tokens come back bound to it (`nil`: bearer).
    public var dpop: JWTAlgorithm? = nil
    /// When the code flow pushes its authorization parameters (RFC 9126 PAR).
    public var pushedAuthorization: PushedAuthorizationPolicy = .whenAdvertised
    /// The RFC 8707 resource this client's tokens are for by default: sent as `resource` on
    /// authorization, code exchange and refresh requests (unless the parameters or the tokens name
    /// their own). `nil`: none is sent.
    public var resource: String? = nil
    /// When `true`, the code flow refuses (`OAuthError.pkceNotSupported`, before anything is sent) an
    /// authorization server whose metadata does not list `S256` in `code_challenge_methods_supported`,
    /// as the MCP authorization specification requires. PKCE S256 is sent either way.
    public var requiresAdvertisedS256 = false

    /// A client.
    ///
    /// - Parameters:
    ///   - metadata: the provider's metadata (`Discovery`, or `ProviderMetadata(issuer:…)` by hand);
    ///     its endpoints are checked for `https` when used.
    ///   - clientID: the client id registered at the provider.
    ///   - authentication: how the client authenticates at the token, revocation, device and PAR
    ///     endpoints; `.none` (the default): a public client, sending only `client_id`.
    ///   - transport: what sends every request (no retries: the coordinator decides those).
    public init(
        metadata: ProviderMetadata, clientID: String, authentication: ClientAuthentication = .none,
        transport: any HTTPTransport
    ) {
        self.metadata = metadata
        self.clientID = clientID
        self.authentication = authentication
        self.transport = transport
    }

    func tokenEndpoint() throws -> TokenEndpoint {
        var endpoint = TokenEndpoint(
            url: try metadata.require(metadata.tokenEndpoint, "token endpoint"), clientID: clientID,
            authentication: authentication, transport: transport)
        endpoint.clock = clock
        endpoint.logger = logger
        return endpoint
    }

    /// A new DPoP key for a login, when `dpop` asks for one.
    func newDPoPKey() throws -> DPoPKey? { try dpop.map { try DPoPKey.generate($0) } }

    /// The refresh grant, keeping the old refresh token (and ID token) when the response has none.
    /// Tokens bound to a DPoP key are refreshed with proofs from that key, and never without it.
    /// The resource a refresh of `tokens` names: theirs, else the client's.
    ///
    /// - Parameter tokens: the current tokens; their refresh token is spent (store what comes back).
    /// - Returns: the new tokens; see `refresh(_:forResource:)`.
    /// - Throws: as `refresh(_:forResource:)`.
    public func refresh(_ tokens: TokenSet) async throws -> TokenSet {
        try await refresh(tokens, forResource: tokens.resource ?? resource)
    }

    /// The refresh grant naming `resource` (RFC 8707 §2.2): an access token for that resource from the
    /// same refresh token — for another resource than the one the tokens were for, where the server
    /// allows it (servers that bind a refresh token to one resource answer `invalid_target`, an
    /// `OAuthError.server` whose `oauthError` says so). The returned tokens carry `resource`; the
    /// refresh token may have rotated, so store them (or go through a `RefreshCoordinator`).
    ///
    /// - Parameters:
    ///   - tokens: the current tokens; a DPoP-bound set must carry its key (the proofs are signed with it).
    ///   - resource: the RFC 8707 resource to name; `nil`: none is sent.
    /// - Returns: the new tokens, with the old refresh token and ID token kept when the response has none.
    /// - Throws: `OAuthError` with `invalidGrant` when there is no refresh token or the provider refuses
    ///   it (final: log in again); `needsLogin` for DPoP-bound tokens without their key; `invalidClient`,
    ///   `server` (`invalid_target`, `invalid_scope`…), `invalidResponse`, `unsafeValue`, `transient`,
    ///   `tls`; `missingEndpoint` or `insecureEndpoint` for the token endpoint.
    public func refresh(_ tokens: TokenSet, forResource resource: String?) async throws -> TokenSet {
        guard let refreshToken = tokens.refreshToken else {
            throw OAuthError(OAuthError.invalidGrant, "there is no refresh token: log in again")
        }
        if tokens.isDPoPBound, tokens.dpopKey == nil {
            throw OAuthError(
                OAuthError.needsLogin, "the tokens are bound to a DPoP key that is not here (RFC 9449): log in again")
        }
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if let resource { fields.append(("resource", resource)) }
        var fresh = try await tokenEndpoint().request(fields, requestedScopes: tokens.scopes, dpop: tokens.dpopKey)
        if fresh.refreshToken == nil { fresh.refreshToken = refreshToken }
        if fresh.idToken == nil { fresh.idToken = tokens.idToken }
        fresh.resource = resource
        return fresh
    }

    /// Refreshes and, when a new ID token comes back, validates it as the login did (signature,
    /// `iss`, `aud`, times, `at_hash` against the new access token) and checks OIDC Core §12.2: the
    /// same `sub` as the ID token it replaces. The one refresh-and-validate step every flow's
    /// `refresh` uses.
    ///
    /// The grant has rotated the refresh token by the time the ID token is checked, so a new ID token
    /// that fails (a key the cache cannot fetch yet, another `sub`) never costs the session: it is
    /// dropped, the previous ID token is kept, the new access and refresh tokens are returned, and the
    /// failure is logged.
    ///
    /// - Parameters:
    ///   - tokens: the current tokens; their ID token's `sub` is the one a new ID token must carry.
    ///   - validator: checks a new ID token; `nil`: it is kept unchecked.
    /// - Returns: the new tokens (the previous ID token when the new one was refused).
    /// - Throws: as `refresh(_:forResource:)`; never for the ID token.
    public func refresh(_ tokens: TokenSet, validatingWith validator: IDTokenValidator?) async throws -> TokenSet {
        var fresh = try await refresh(tokens)
        guard let idToken = fresh.idToken, let validator,
            !idToken.utf8.elementsEqual((tokens.idToken ?? "").utf8)
        else { return fresh }
        do {
            let claims = try await validator.validate(
                idToken, nonce: nil, accessToken: fresh.accessToken,
                serverClockOffset: fresh.serverClockOffset)
            if let previous = tokens.idToken.flatMap({ try? JWT(compact: $0).claims.subject }),
                let subject = claims.subject, !subject.utf8.elementsEqual(previous.utf8)
            {
                throw OAuthError(
                    OAuthError.invalidIDToken, "the refreshed ID token is about another subject (OIDC Core §12.2)")
            }
        } catch {
            logger?.warning(
                "the refreshed ID token was refused and dropped (the new access and refresh tokens are kept): \(error)")
            fresh.idToken = tokens.idToken
        }
        return fresh
    }

    /// RFC 7009 revocation with `token_type_hint`. Returns normally when the server answered 200.
    ///
    /// - Parameters:
    ///   - token: the refresh or access token to revoke.
    ///   - hint: its `token_type_hint`: `refresh_token` or `access_token`.
    /// - Throws: `OAuthError` with `missingEndpoint` (no revocation endpoint) or `insecureEndpoint`; for
    ///   any answer but 200 the endpoint's error (`invalidClient`, `server` for
    ///   `unsupported_token_type`…, `transient` for 5xx or 429); `transient` or `tls` when unreachable.
    public func revoke(_ token: String, hint: String) async throws {
        let url = try metadata.require(metadata.revocationEndpoint, "revocation endpoint")
        let request = try tokenEndpoint().authenticatedRequest(
            url: url, parameters: [("token", token), ("token_type_hint", hint)])
        let response = try await OAuthHTTP.send(
            request, over: transport, logger: logger, what: "the revocation endpoint")
        guard response.status.code == 200 else {
            throw TokenResponse.error(
                from: response, object: try? JSONValue(parsing: Array(response.body)),
                endpoint: "the revocation endpoint")
        }
    }

    /// Revokes the refresh and access tokens and builds the end-session URL; never throws for a
    /// failed revocation (it is reported in the result) — the caller wipes local state regardless.
    ///
    /// - Parameters:
    ///   - tokens: the tokens to revoke (the refresh token first) and the ID token sent as `id_token_hint`.
    ///   - postLogoutRedirectURI: where the provider sends the browser afterwards (it must be
    ///     registered); `nil` (the default): none is sent.
    ///   - state: sent as `state` with the end-session URL and given back on the redirect; `nil`: none.
    /// - Returns: what was revoked (`nil` flags where there was no revocation endpoint or token), the
    ///   first revocation error, and the end-session URL when the provider has an `end_session_endpoint`.
    public func logout(_ tokens: TokenSet, postLogoutRedirectURI: URL? = nil, state: String? = nil) async
        -> LogoutResult
    {
        var result = LogoutResult()
        if metadata.revocationEndpoint != nil {
            if let refreshToken = tokens.refreshToken {
                do { try await revoke(refreshToken, hint: "refresh_token"); result.refreshTokenRevoked = true } catch {
                    result.refreshTokenRevoked = false
                    result.revocationError = error as? OAuthError
                }
            }
            do { try await revoke(tokens.accessToken, hint: "access_token"); result.accessTokenRevoked = true } catch {
                result.accessTokenRevoked = false
                result.revocationError = result.revocationError ?? (error as? OAuthError)
            }
        }
        if let endSession = metadata.endSessionEndpoint,
            var components = URLComponents(url: endSession, resolvingAgainstBaseURL: false)
        {
            var items = components.queryItems ?? []
            if let idToken = tokens.idToken { items.append(URLQueryItem(name: "id_token_hint", value: idToken)) }
            items.append(URLQueryItem(name: "client_id", value: clientID))
            if let postLogoutRedirectURI {
                items.append(
                    URLQueryItem(name: "post_logout_redirect_uri", value: postLogoutRedirectURI.absoluteString))
            }
            if let state { items.append(URLQueryItem(name: "state", value: state)) }
            components.queryItems = items
            result.endSessionURL = components.url
        }
        return result
    }
}
