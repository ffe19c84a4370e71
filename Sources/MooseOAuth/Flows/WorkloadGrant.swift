/// How a workload — a CI job, a pod, a service with a platform identity — logs in and renews with no
/// secret of its own: its platform's identity token (a `WorkloadIdentity`), asked for afresh on every
/// grant, exchanged at the provider by RFC 8693 token exchange or presented as an RFC 7523 JWT bearer
/// assertion. The one implementation behind `TokenManager`'s `.workload` login (and its renewals) and
/// `moose login --workload`.
///
/// ```swift
/// let workload = WorkloadGrant(identity: .file("/var/run/secrets/tokens/moose"), grant: .jwtBearer)
/// let moose = TokenManager(issuer: "https://id.example.com", clientID: "deployer", storage: storage,
///                          transport: URLSessionTransport(), scopes: [], workload: workload)
/// try await moose.login(with: .workload)
/// let token = try await moose.accessToken()   // renewed by a new grant with a fresh identity token
/// ```
///
/// The provider refusing a renewal (a stale token, an issuer it does not trust) fails that attempt
/// (`OAuthError.renewalRefused`): the session stays, and the next call asks the platform again.
public struct WorkloadGrant: Sendable {
    /// How the identity token reaches the provider.
    public enum Grant: String, Sendable, Codable, CaseIterable {
        /// RFC 8693 token exchange: the identity token is the `subject_token`.
        case tokenExchange = "token-exchange"
        /// RFC 7523 §2.1: the identity token is the `assertion` of the JWT bearer grant.
        case jwtBearer = "jwt-bearer"
    }

    /// Where the identity token comes from.
    public var identity: WorkloadIdentity
    /// The grant.
    public var grant: Grant
    /// The audience asked of the platform for the identity token (GitHub Actions mints one per
    /// audience); `nil`: the provider's issuer.
    public var identityAudience: String?
    /// The exchange's `subject_token_type` (default `…:token-type:id_token`).
    public var subjectTokenType: String
    /// The exchange's `audience` parameters (RFC 8693 §2.1): the API the tokens are for.
    public var audiences: [String]

    /// A workload login.
    ///
    /// - Parameters:
    ///   - identity: the platform's identity token source (`.githubActions()`, `.file(path)`,
    ///     `.environmentVariable(name)`), asked again for every grant.
    ///   - grant: token exchange (the default) or the JWT bearer grant.
    ///   - identityAudience: the audience the platform's token is asked for; `nil` (the default): the
    ///     provider's issuer. Of the built-in sources only GitHub Actions' uses it.
    ///   - subjectTokenType: what the identity token is, for an exchange (default: an ID token's type URI).
    ///   - audiences: the exchange's `audience` parameters (the API the tokens are for); default: none.
    ///     Not sent by the JWT bearer grant.
    public init(
        identity: WorkloadIdentity, grant: Grant = .tokenExchange, identityAudience: String? = nil,
        subjectTokenType: String = ExchangeToken.idTokenType, audiences: [String] = []
    ) {
        self.identity = identity
        self.grant = grant
        self.identityAudience = identityAudience
        self.subjectTokenType = subjectTokenType
        self.audiences = audiences
    }

    /// The session attribute value naming this grant (`SessionEngine.grantAttribute`), as
    /// `SessionPlan.Grant.Kind.workload`'s raw value: written for older readers. A session is renewed
    /// by a new workload grant when its plan's grant is a workload's (`SessionPlan.grant`).
    public static let sessionGrant = "workload"

    /// One grant at `client`'s provider for `scopes`, with a fresh identity token. A provider's refusal
    /// says which side refused ("the provider refused <source>'s token: …") with the provider's words.
    ///
    /// - Parameters:
    ///   - client: the client at the provider (its issuer is the default identity audience).
    ///   - scopes: what the grant asks for (none: no `scope` sent).
    /// - Returns: the tokens (bound to a new DPoP key when the client asks for DPoP).
    /// - Throws: `OAuthError` with `workloadIdentity` when the platform gives no usable identity token;
    ///   `invalidGrant`, `invalidClient` or `server` when the provider refuses it (the message says what
    ///   to check); `invalidConfiguration` when the provider does not offer the grant; `invalidResponse`,
    ///   `unsafeValue`, `transient`, `tls` as for any token request.
    public func tokens(client: OAuthClient, scopes: [String]) async throws -> TokenSet {
        let identity = self.identity
        let audience = identityAudience ?? client.metadata.issuer
        let parameters = AuthorizationParameters(scopes: scopes)
        do {
            switch grant {
            case .jwtBearer:
                return try await JWTBearerFlow(client: client) { try await identity.token(audience: audience) }
                    .authorize(parameters)
            case .tokenExchange:
                let type = subjectTokenType
                let flow = TokenExchangeFlow(client: client, audiences: audiences) {
                    ExchangeToken(try await identity.token(audience: audience), type: type)
                }
                return try await flow.authorize(parameters)
            }
        } catch let error as OAuthError
            where error.code == OAuthError.invalidGrant || error.code == OAuthError.invalidClient
            || error.code == OAuthError.server
        {
            // The platform gave a token; the provider refused it. Say which side, and what to check there.
            throw OAuthError(
                error.code,
                "the provider refused \(identity.name)'s token: is that issuer trusted there, the audience "
                    + "(\(audience)) the one it expects, the token unexpired?", oauthError: error.oauthError,
                errorDescription: error.errorDescription, status: error.status, underlying: error)
        }
    }
}
