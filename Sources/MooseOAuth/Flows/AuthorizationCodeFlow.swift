#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseCrypto
import MooseJWT

/// Authorization code + PKCE (RFC 6749 §4.1, RFC 7636 S256 always), `state` and `nonce`, with ID
/// token validation (OIDC Core 3.1.3.7).
///
/// ```swift
/// let agent = try LoopbackUserAgent { url in print("Open \(url)") }
/// let flow = AuthorizationCodeFlow(client: client, redirectURI: agent.redirectURI, userAgent: agent, idTokens: validator)
/// let tokens = try await flow.authorize(AuthorizationParameters(scopes: ["openid", "profile"]))
/// ```
public struct AuthorizationCodeFlow: OAuthClientFlow {
    /// The client.
    public let client: OAuthClient
    /// The redirect URI sent (and registered).
    public let redirectURI: URL
    /// The user agent.
    public let userAgent: any ExternalUserAgent
    /// Validates ID tokens (required when `openid` is requested).
    public let idTokens: IDTokenValidator?

    /// A flow.
    ///
    /// - Parameters:
    ///   - client: the client, with the provider's authorization and token endpoints (and its PAR,
    ///     DPoP and resource settings).
    ///   - redirectURI: sent as `redirect_uri` and again with the code; it must be registered exactly
    ///     (a `LoopbackUserAgent`'s `redirectURI` for a loopback login).
    ///   - userAgent: shows the authorization URL to the user and returns the redirect that came back.
    ///   - idTokens: validates the ID token when `openid` is asked for; `nil`: a login that asks for
    ///     `openid` fails with `invalidConfiguration` once the ID token arrives.
    public init(client: OAuthClient, redirectURI: URL, userAgent: any ExternalUserAgent, idTokens: IDTokenValidator?) {
        self.client = client
        self.redirectURI = redirectURI
        self.userAgent = userAgent
        self.idTokens = idTokens
    }

    /// What the flow sends, for callers that drive the browser themselves.
    public struct Request: Sendable {
        /// The authorization URL (with every parameter, or — after PAR — only `client_id` and `request_uri`).
        public let url: URL
        /// The `state` sent.
        public let state: String
        /// The `nonce` sent.
        public let nonce: String
        /// The PKCE verifier kept back.
        public let pkce: PKCE
        /// The scopes requested.
        public let scopes: [String]
        /// The DPoP key this login binds the tokens to (its thumbprint went out as `dpop_jkt`), if any.
        public let dpopKey: DPoPKey?
        /// Whether the parameters were pushed (RFC 9126).
        public let pushed: Bool
        /// The RFC 8707 resources named (sent again with the code).
        public var resources: [String] = []
    }

    /// The authorization parameters with a fresh `state`, `nonce`, PKCE verifier and (with DPoP) key.
    private func parameters(_ parameters: AuthorizationParameters) throws -> (
        items: [(String, String)], state: String, nonce: String,
        pkce: PKCE, dpop: DPoPKey?
    ) {
        if client.requiresAdvertisedS256 { try client.metadata.requireS256() }
        let state = Base64URL.encode(try SecureRandom.bytes(count: 32))
        let nonce = Base64URL.encode(try SecureRandom.bytes(count: 32))
        let pkce = try PKCE()
        let dpop = try client.newDPoPKey()
        var items: [(String, String)] = [
            ("response_type", "code"), ("client_id", client.clientID),
            ("redirect_uri", redirectURI.absoluteString)
        ]
        // No scope at all (not an empty one) when none is asked for: the server's default applies.
        if !parameters.scopes.isEmpty { items.append(("scope", parameters.scopes.joined(separator: " "))) }
        items += [
            ("state", state), ("nonce", nonce), ("code_challenge", pkce.challenge), ("code_challenge_method", "S256")
        ]
        // RFC 8707 §2.1: one `resource` per resource the tokens are for.
        items += parameters.resources(for: client).map { ("resource", $0) }
        // RFC 9449 §10: bind the code to the key, so a stolen code is useless without it.
        if let dpop { items.append(("dpop_jkt", dpop.thumbprint)) }
        items += parameters.queryItems
        return (items, state, nonce, pkce, dpop)
    }

    /// The request that goes out at `url`, with what `made` generated and the resources named.
    private func request(
        _ made: (items: [(String, String)], state: String, nonce: String, pkce: PKCE, dpop: DPoPKey?), url: URL,
        parameters: AuthorizationParameters, pushed: Bool
    ) -> Request {
        var request = Request(
            url: url, state: made.state, nonce: made.nonce, pkce: made.pkce, scopes: parameters.scopes,
            dpopKey: made.dpop, pushed: pushed)
        request.resources = parameters.resources(for: client)
        return request
    }

    private func authorizationURL(_ items: [(String, String)]) throws -> URL {
        let endpoint = try client.metadata.require(client.metadata.authorizationEndpoint, "authorization endpoint")
        let query = RequestBuilder.encodeQuery(items.map { QueryItem($0.0, $0.1) }, arrays: .repeatedKeys)
        var text = endpoint.absoluteString
        text += text.contains("?") ? "&" + query : "?" + query
        guard let url = URL(string: text) else {
            throw OAuthError(OAuthError.invalidConfiguration, "cannot build the authorization URL")
        }
        return url
    }

    /// Builds the authorization request with every parameter in the URL (fresh `state`, `nonce`,
    /// PKCE verifier and, with DPoP, key) — no network. `prepareRequest` pushes them when it should.
    ///
    /// - Parameter parameters: the scopes (none: no `scope` is sent), the RFC 8707 resources (none:
    ///   the client's `resource`), `prompt`, `login_hint` and the other extra parameters.
    /// - Returns: the request, whose `state`, `nonce`, PKCE verifier and DPoP key `complete` needs.
    /// - Throws: `OAuthError` with `pkceNotSupported` (`client.requiresAdvertisedS256` and no S256
    ///   advertised), `missingEndpoint` or `insecureEndpoint` (the authorization endpoint),
    ///   `invalidConfiguration` (a URL that cannot be built, an unsupported DPoP algorithm);
    ///   `CryptographyError` when the random source or the DPoP key generation fails.
    public func makeRequest(_ parameters: AuthorizationParameters) throws -> Request {
        let made = try self.parameters(parameters)
        return request(made, url: try authorizationURL(made.items), parameters: parameters, pushed: false)
    }

    /// Builds the authorization request and, when `client.pushedAuthorization` says so (by default:
    /// whenever the server advertises a PAR endpoint), pushes the parameters with the client's
    /// authentication (RFC 9126 §2) and returns a URL carrying only `client_id` and the `request_uri`.
    ///
    /// - Parameter parameters: as for `makeRequest(_:)`.
    /// - Returns: the request; `pushed` says whether the parameters went to the PAR endpoint.
    /// - Throws: the errors of `makeRequest(_:)`; `invalidConfiguration` when the provider requires
    ///   PAR and `client.pushedAuthorization` is `.never`; for a push, the PAR endpoint's refusal
    ///   (`invalidClient`, `server`…), `invalidResponse` without a usable `request_uri`, `transient`, `tls`.
    public func prepareRequest(_ parameters: AuthorizationParameters) async throws -> Request {
        let made = try self.parameters(parameters)
        let metadata = client.metadata
        let push: Bool
        switch client.pushedAuthorization {
        case .never: push = false
        case .whenAdvertised: push = metadata.pushedAuthorizationRequestEndpoint != nil
        case .always: push = true
        }
        if !push && metadata.requirePushedAuthorizationRequests == true {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "\(metadata.issuer) requires pushed authorization requests (RFC 9126) and this client never pushes")
        }
        guard push else {
            return request(made, url: try authorizationURL(made.items), parameters: parameters, pushed: false)
        }
        let endpoint = try metadata.require(
            metadata.pushedAuthorizationRequestEndpoint, "pushed authorization request endpoint")
        let requestURI = try await PushedAuthorization.push(made.items, to: endpoint, client: client)
        return request(
            made, url: try authorizationURL([("client_id", client.clientID), ("request_uri", requestURI)]),
            parameters: parameters, pushed: true)
    }

    /// Runs the whole login: prepares the request (`prepareRequest(_:)`), has the user agent show it
    /// and bring back the redirect, and completes it (`complete(_:callback:)`); the user agent is told
    /// the outcome (`loginFinished`) either way.
    ///
    /// - Parameter parameters: as for `makeRequest(_:)`.
    /// - Returns: the tokens, their ID token validated with the request's `nonce`.
    /// - Throws: the errors of `prepareRequest(_:)` and `complete(_:callback:)`, and the user agent's
    ///   (`OAuthError.timedOut` when no redirect came back in time, `CancellationError`).
    public func authorize(_ parameters: AuthorizationParameters) async throws -> TokenSet {
        let request = try await prepareRequest(parameters)
        let callback = try await userAgent.authorize(
            url: request.url, redirectURI: redirectURI, expectedState: request.state)
        do {
            let tokens = try await complete(request, callback: callback)
            await userAgent.loginFinished(nil)
            return tokens
        } catch {
            // The browser's page tells the truth: not "signed in" when the exchange then failed.
            await userAgent.loginFinished(
                error as? OAuthError
                    ?? OAuthError(OAuthError.transient, "the code exchange did not complete", underlying: error))
            throw error
        }
    }

    /// Checks the redirect (`state` in constant time, RFC 9207 `iss` exactly, then `error`),
    /// exchanges the code with the PKCE verifier, and validates the ID token with the request's `nonce`.
    ///
    /// - Parameters:
    ///   - request: what `makeRequest(_:)` or `prepareRequest(_:)` returned for this login.
    ///   - callback: the full redirect URL that came back (its query carries `code` and `state`, or `error`).
    /// - Returns: the tokens (bound to the request's DPoP key, if any; with its single resource).
    /// - Throws: `OAuthError` with `issuerMismatchInResponse` (RFC 9207), `stateMismatch`,
    ///   `accessDenied` or `server` for an error redirect, `invalidResponse` for a redirect with no
    ///   code; the token endpoint's `invalidGrant`, `invalidClient`, `server`, `invalidResponse`,
    ///   `unsafeValue`, `transient`, `tls`; `invalidIDToken` (missing, or refused by
    ///   `IDTokenValidator.validate`, whose JWKS fetch may fail too), or `invalidConfiguration` when
    ///   an ID token came and `idTokens` is `nil`.
    public func complete(_ request: Request, callback: URL) async throws -> TokenSet {
        // RFC 6749 §4.1.2 / Appendix B: the redirect's query is application/x-www-form-urlencoded.
        let items = RequestBuilder.decodeForm(
            URLComponents(url: callback, resolvingAgainstBaseURL: false)?.percentEncodedQuery ?? "")
        func value(_ name: String) -> String? { items.first { $0.0 == name }?.1 }
        // RFC 9207 §2.4: an `iss` that is not the issuer's, or none where the server promised one,
        // means a mix-up: stop before anything else (an error redirect included) is believed.
        if let iss = value("iss") {
            guard iss.utf8.elementsEqual(client.metadata.issuer.utf8) else {
                throw OAuthError(
                    OAuthError.issuerMismatchInResponse,
                    "the authorization response names issuer \(iss), not \(client.metadata.issuer) (RFC 9207); the code was not used"
                )
            }
        } else if client.metadata.authorizationResponseIssParameterSupported == true {
            throw OAuthError(
                OAuthError.issuerMismatchInResponse,
                "\(client.metadata.issuer) promises an iss in every authorization response (RFC 9207) and this one has none; the code was not used"
            )
        }
        // RFC 6749 §4.1.2.1: an error redirect; state is checked even then when present.
        if let error = value("error") {
            if let state = value("state"), !ConstantTime.equals(Array(state.utf8), Array(request.state.utf8)) {
                throw OAuthError(
                    OAuthError.stateMismatch, "an error redirect came back with a state this client did not send")
            }
            throw OAuthError(
                error == "access_denied" ? OAuthError.accessDenied : OAuthError.server,
                "the authorization server refused the request", oauthError: error,
                errorDescription: value("error_description"), errorURI: value("error_uri"))
        }
        guard let state = value("state"), ConstantTime.equals(Array(state.utf8), Array(request.state.utf8)) else {
            throw OAuthError(
                OAuthError.stateMismatch, "the redirect's state does not match the request's; the code was not used")
        }
        guard let code = value("code"), !code.isEmpty else {
            throw OAuthError(OAuthError.invalidResponse, "the redirect carries neither code nor error")
        }
        var tokens = try await client.tokenEndpoint().request(
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI.absoluteString),
                ("code_verifier", request.pkce.verifier)
            ] + request.resources.map { ("resource", $0) },
            requestedScopes: request.scopes, dpop: request.dpopKey)
        if request.resources.count == 1 { tokens.resource = request.resources[0] }
        if request.scopes.contains("openid") {
            guard let idToken = tokens.idToken else {
                throw OAuthError(
                    OAuthError.invalidIDToken, "openid was requested but the token response has no id_token")
            }
            guard let idTokens else {
                throw OAuthError(OAuthError.invalidConfiguration, "an ID token arrived but no validator is configured")
            }
            try await idTokens.validate(
                idToken, nonce: request.nonce, accessToken: tokens.accessToken,
                serverClockOffset: tokens.serverClockOffset)
        }
        return tokens
    }

    /// The login's validator checks a refreshed ID token too.
    public var refreshIDTokens: IDTokenValidator? { idTokens }

    /// Only a person renews a session without a refresh token: log in again.
    public func renewalParameters(for tokens: TokenSet) -> AuthorizationParameters? { nil }
}
