public import MooseHTTP
public import MooseJWT
public import MooseOAuth

extension ResourceServer {
    /// How a resource server authenticates at its authorization server's introspection endpoint
    /// (RFC 7662 §2.1: it is a client there too). Its `description` never shows the secret.
    public struct IntrospectionClient: Sendable, CustomStringConvertible {
        /// The resource server's client id at the authorization server.
        public var clientID: String
        /// Its secret.
        public var clientSecret: String
        /// `client_secret_basic` (the default) or `client_secret_post`.
        public var authentication: TokenIntrospector.ClientAuthentication

        /// Credentials for introspection.
        ///
        /// - Parameters:
        ///   - clientID: the resource server's client id.
        ///   - clientSecret: its secret (never logged, never kept past the introspector).
        ///   - authentication: how the secret is sent; default `client_secret_basic`.
        public init(
            clientID: String, clientSecret: String, authentication: TokenIntrospector.ClientAuthentication = .basic
        ) {
            self.clientID = clientID
            self.clientSecret = clientSecret
            self.authentication = authentication
        }

        /// The client id and how the secret is sent; never the secret.
        public var description: String { "IntrospectionClient(\(clientID), \(authentication), secret redacted)" }
    }

    /// A verifier for `resource` set up from its authorization server's metadata: tokens must name its
    /// exact `issuer` (byte for byte), their keys come from its `jwks_uri` (a `JWKSCache`: fetched on
    /// first use, again — at most once a minute — for a `kid` it does not know), and with
    /// `introspection`, tokens that are not JWTs are checked at its `introspection_endpoint`.
    ///
    /// ```swift
    /// let metadata = try await Discovery.fetch(issuer: "https://id.example.com", transport: transport)
    /// let server = try ResourceServer(
    ///     metadata: metadata, resource: "https://api.example.com", algorithms: [.rs256, .es256],
    ///     transport: transport, replayCache: sharedReplayCache, nonces: RotatingDPoPNonces()) { $0.dpop = .required }
    /// ```
    ///
    /// - Parameters:
    ///   - metadata: the authorization server's metadata (`Discovery.fetch(issuer:transport:)`).
    ///   - resource: this resource's identifier, which `aud` must contain byte for byte.
    ///   - algorithms: the algorithms access tokens may be signed with; no default (RFC 8725 §3.1).
    ///   - transport: what fetches the keys and sends introspection requests.
    ///   - introspection: the credentials for RFC 7662 introspection; `nil` (the default): opaque
    ///     tokens are refused as `invalid_token`.
    ///   - replayCache: remembers DPoP proofs' `jti`s; default: an in-memory one (one process only: use
    ///     a shared one, such as PostgreSQL's, behind a load balancer).
    ///   - nonces: issues and checks DPoP server nonces (RFC 9449 §9); `nil` (the default): none.
    ///   - configure: changes to the rest of the configuration (DPoP, token types, leeway, the RFC 9728
    ///     metadata URL); default: none.
    /// - Throws: `OAuthError.missingEndpoint` when the metadata has no `jwks_uri` and no introspection
    ///   is asked for (nothing could verify a token), or introspection is asked for and it has no
    ///   `introspection_endpoint`; `OAuthError.insecureEndpoint` when that endpoint is plain `http` to
    ///   another machine (the secret would travel in the clear).
    public init(
        metadata: ProviderMetadata, resource: String, algorithms: Set<JWTAlgorithm>, transport: any HTTPTransport,
        introspection: IntrospectionClient? = nil, replayCache: any DPoPReplayCache = InMemoryDPoPReplayCache(),
        nonces: (any DPoPNonceSource)? = nil, configure: (inout ResourceServerConfiguration) -> Void = { _ in }
    ) throws {
        var configuration = ResourceServerConfiguration(
            issuer: metadata.issuer, resource: resource, algorithms: algorithms)
        configure(&configuration)
        let keys: any AccessTokenKeySource
        if let jwksURI = metadata.jwksURI {
            keys = JWKSCache(url: jwksURI, transport: transport)
        } else if introspection != nil {
            keys = StaticAccessTokenKeys([]) // opaque tokens only: a JWT finds no key and is refused
        } else {
            throw OAuthError(
                OAuthError.missingEndpoint,
                "issuer \(metadata.issuer) publishes no jwks_uri: its JWT access tokens cannot be verified "
                    + "(opaque tokens: introspection)")
        }
        guard let introspection else {
            self.init(configuration: configuration, keys: keys, replayCache: replayCache, nonces: nonces)
            return
        }
        guard let endpoint = metadata.introspectionEndpoint else {
            throw OAuthError(
                OAuthError.missingEndpoint,
                "issuer \(metadata.issuer) publishes no introspection_endpoint (RFC 7662); tokens cannot be introspected"
            )
        }
        guard TransportSecurity.permits(endpoint) else {
            throw OAuthError(
                OAuthError.insecureEndpoint,
                "the introspection endpoint \(endpoint.redactedForLogs) is plain http to another machine; "
                    + "refusing to send the secret")
        }
        let introspector = TokenIntrospector(
            endpoint: endpoint, clientID: introspection.clientID, clientSecret: introspection.clientSecret,
            authentication: introspection.authentication, transport: transport)
        self.init(
            configuration: configuration, keys: keys, replayCache: replayCache, nonces: nonces,
            introspector: introspector)
    }

    /// A verifier for `resource` at `issuer`, whose metadata is discovered now (`Discovery.fetch`:
    /// RFC 8414, then OpenID Connect Discovery 1.0) and used as `init(metadata:…)` uses it: a resource
    /// server configured from nothing but its issuer's URL.
    ///
    /// ```swift
    /// let server = try await ResourceServer(
    ///     discovering: "https://id.example.com", resource: "https://api.example.com",
    ///     algorithms: JWTAlgorithm.asymmetric, transport: CurlTransport())
    /// let principal = try await server.verify(accessToken: token, requiredScopes: ["api.read"])
    /// ```
    ///
    /// - Parameters:
    ///   - issuer: the issuer URL, compared byte for byte with the documents' `issuer` (and later the
    ///     tokens' `iss`).
    ///   - resource, algorithms, transport, introspection, replayCache, nonces, configure: as
    ///     `init(metadata:resource:algorithms:transport:introspection:replayCache:nonces:configure:)`.
    /// - Throws: `OAuthError`: what `Discovery.fetch(issuer:transport:)` throws (`invalidConfiguration`,
    ///   `insecureEndpoint`, `issuerMismatch`, `discovery`, `transient` for an issuer that cannot be
    ///   reached now, `tls`), then what `init(metadata:…)` throws (`missingEndpoint`, `insecureEndpoint`).
    public init(
        discovering issuer: String, resource: String, algorithms: Set<JWTAlgorithm>, transport: any HTTPTransport,
        introspection: IntrospectionClient? = nil, replayCache: any DPoPReplayCache = InMemoryDPoPReplayCache(),
        nonces: (any DPoPNonceSource)? = nil, configure: (inout ResourceServerConfiguration) -> Void = { _ in }
    ) async throws {
        let metadata = try await Discovery.fetch(issuer: issuer, transport: transport)
        try self.init(
            metadata: metadata, resource: resource, algorithms: algorithms, transport: transport,
            introspection: introspection, replayCache: replayCache, nonces: nonces, configure: configure)
    }
}
