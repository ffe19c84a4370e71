#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import MooseJWT

extension TestProvider {
    /// The provider's settings.
    public struct Configuration: Sendable {
        /// Seconds an access token lives (`expires_in`). Default 3600; real providers issue 60 s to 24 h.
        public var accessTokenLifetime: Int = 3600
        /// Seconds an ID token lives. Default 3600.
        public var idTokenLifetime: Int = 3600
        /// Whether a refresh answers with a new refresh token, spending the one presented. Default true.
        public var rotatesRefreshTokens: Bool = true
        /// Seconds during which a spent refresh token may be presented again and answered (as Okta and
        /// Auth0 allow, for a client that lost the answer); 0 (the default): a spent token presented again
        /// is reuse — the whole family is revoked and `invalid_grant` answered.
        public var reuseGraceWindow: TimeInterval = 0
        /// Whether a client-credentials answer carries a refresh token (most providers: no).
        public var refreshTokenForClientCredentials: Bool = false
        /// What access tokens look like: RFC 9068 JWTs (default) or opaque strings (introspection only).
        public var accessTokenFormat: AccessTokenFormat = .jwt
        /// The algorithm of the signing keys (ID tokens, JWT access tokens). Default RS256.
        public var signingAlgorithm: JWTAlgorithm = .rs256
        /// Whether authorization requests must be pushed first (RFC 9126 `require_pushed_authorization_requests`).
        public var requiresPushedAuthorization: Bool = false
        /// Whether the token endpoint asks DPoP proofs for a nonce (RFC 9449 §8: `use_dpop_nonce`).
        public var requiresDPoPNonce: Bool = false
        /// Seconds a device code lives. Default 600.
        public var deviceCodeLifetime: Int = 600
        /// The device polling interval it asks for, in seconds (`slow_down` when polled faster). Default 1.
        public var deviceInterval: Int = 1
        /// Seconds an authorization code lives. Default 60.
        public var authorizationCodeLifetime: TimeInterval = 60
        /// Public keys trusted for RFC 7523 JWT bearer assertions and RFC 8693 subject tokens from
        /// elsewhere (a workload platform's identity tokens); the provider's own tokens are always trusted.
        public var trustedAssertionKeys: [JWTKey] = []
        /// The `aud` of a JWT access token with no RFC 8707 resource: the client id (default), or this value.
        public var defaultAudience: String? = nil

        /// The defaults: a provider like most real ones.
        public init() {}
    }

    /// What access tokens look like.
    public enum AccessTokenFormat: Sendable {
        /// RFC 9068 JWT access tokens (`typ: at+jwt`), signed with the provider's keys.
        case jwt
        /// Random strings: a resource server must introspect them (RFC 7662).
        case opaque
    }

    /// A registered client.
    public struct Client: Sendable, Hashable {
        /// How a client proves itself at the token endpoint.
        public enum Authentication: Sendable, Hashable {
            /// A public client (no secret; PKCE only).
            case none
            /// `client_secret_basic` or `client_secret_post` (either is accepted).
            case secret(String)
            /// `private_key_jwt` (RFC 7523 §2.2) with this public key.
            case privateKeyJWT(JWK)
        }

        /// The client id.
        public var id: String
        /// How it authenticates.
        public var authentication: Authentication
        /// Its registered redirect URIs, matched byte for byte; a loopback one registered without a
        /// port (`http://127.0.0.1/callback`) matches any port (RFC 8252 §7.3).
        public var redirectURIs: [String]
        /// Extra claims its access tokens carry.
        public var extraClaims: JSONObject

        /// A client.
        public init(
            id: String, authentication: Authentication = .none, redirectURIs: [String] = [],
            extraClaims: JSONObject = [:]
        ) {
            self.id = id
            self.authentication = authentication
            self.redirectURIs = redirectURIs
            self.extraClaims = extraClaims
        }

        /// The redirect URI `defaultPublic` is registered with.
        public static let defaultRedirect = URL(string: "com.example.app:/oauth/callback") ?? URL(fileURLWithPath: "/")
        /// `test-app`: a public PKCE client with `defaultRedirect` and any loopback port (`http://127.0.0.1/callback`).
        public static let defaultPublic = Client(
            id: "test-app", redirectURIs: [defaultRedirect.absoluteString, "http://127.0.0.1/callback"])
        /// `test-confidential`: secret `test-secret`, the same redirects as `defaultPublic`.
        public static let defaultConfidential = Client(
            id: "test-confidential", authentication: .secret("test-secret"), redirectURIs: defaultPublic.redirectURIs)
        /// `test-service`: a client-credentials client, secret `service-secret`.
        public static let defaultService = Client(id: "test-service", authentication: .secret("service-secret"))
    }

    /// The user who signs in.
    public struct User: Sendable, Hashable {
        /// The `sub` claim.
        public var subject: String
        /// Every other claim of UserInfo and the ID token (`name`, `email`…).
        public var claims: JSONObject

        /// A user.
        public init(subject: String, claims: JSONObject = [:]) {
            self.subject = subject
            self.claims = claims
        }

        /// `alice`, with a name and a verified e-mail address.
        public static let alice = User(
            subject: "alice",
            claims: [
                "name": "Alice Liddell", "email": "alice@example.com", "email_verified": true,
                "preferred_username": "alice"
            ])
    }

    /// What the user does at a consent screen.
    public enum Consent: Sendable, Hashable {
        /// Signs in and approves: the redirect carries a code.
        case approve
        /// Refuses: the redirect carries `error=access_denied`.
        case deny
        /// Closes the browser: nothing comes back (`Browser` throws `CancellationError`).
        case closeBrowser
    }

    /// The provider's endpoints.
    public enum Endpoint: String, Sendable, Hashable, CaseIterable {
        /// `/.well-known/openid-configuration`
        case openIDConfiguration
        /// `/.well-known/oauth-authorization-server` (RFC 8414)
        case authorizationServerMetadata
        /// `/jwks`
        case jwks
        /// `/authorize`
        case authorization
        /// `/par` (RFC 9126)
        case pushedAuthorization
        /// `/device` (RFC 8628)
        case deviceAuthorization
        /// `/device/verify`: the verification page; `GET ?user_code=…` answers for the user as
        /// `consent` says (as `enterUserCode(_:consent:)` does), so a script can approve a device login.
        case deviceVerification
        /// `/token`, every grant
        case token
        /// `/token` with `grant_type=refresh_token` only (for `inject(_:at:count:)` and `requests(to:)`)
        case refresh
        /// `/revoke` (RFC 7009)
        case revocation
        /// `/introspect` (RFC 7662)
        case introspection
        /// `/userinfo`
        case userInfo
        /// `/logout` (RP-initiated logout)
        case endSession
        /// `/register` (RFC 7591)
        case registration

        /// The path under the issuer.
        public var path: String {
            switch self {
            case .openIDConfiguration: "/.well-known/openid-configuration"
            case .authorizationServerMetadata: "/.well-known/oauth-authorization-server"
            case .jwks: "/jwks"
            case .authorization: "/authorize"
            case .pushedAuthorization: "/par"
            case .deviceAuthorization: "/device"
            case .deviceVerification: "/device/verify"
            case .token, .refresh: "/token"
            case .revocation: "/revoke"
            case .introspection: "/introspect"
            case .userInfo: "/userinfo"
            case .endSession: "/logout"
            case .registration: "/register"
            }
        }
    }

    /// An answer a provider gives when things go wrong, scripted with `inject(_:at:count:)`.
    public enum Fault: Sendable {
        /// This status with no body at all (Glewlwyd answers a refused refresh with a bare 400).
        case status(Int)
        /// This status with an HTML error page (a proxy or a provider's error template).
        case htmlPage(Int)
        /// 429 with `Retry-After` in seconds.
        case tooManyRequests(retryAfter: Int)
        /// The real answer, after `seconds` (read with `Task.sleep`: keep it short).
        case slow(seconds: TimeInterval)
        /// No answer: the connection drops (`HTTPRequestError` `transport`; a served provider closes it).
        case dropConnection
        /// An OAuth error body (`{"error": code}`) with this status (`invalid_grant`, 400: a refused refresh).
        case oauthError(String, status: Int)
        /// The real token response without its `refresh_token`.
        case withoutRefreshToken
        /// The real token response with this `expires_in` (`nil`: none).
        case expiresIn(Int?)
        /// The real discovery document naming another issuer.
        case discoveryIssuer(String)
    }

    /// One request the provider received.
    public struct Recorded: Sendable {
        /// The endpoint it reached (`nil`: a path the provider does not serve).
        public let endpoint: Endpoint?
        /// The request as sent.
        public let request: APIRequest
        /// Its form fields (query and `application/x-www-form-urlencoded` body), in order.
        public let form: [(String, String)]
        /// The token endpoint's `grant_type`.
        public let grantType: String?

        /// The first value of the form field `name`.
        public func field(_ name: String) -> String? { form.first { $0.0 == name }?.1 }
    }

    /// A refresh token the provider issued, and what became of it.
    public struct RefreshTokenRecord: Sendable, Hashable {
        /// The token.
        public let token: String
        /// The client it was issued to.
        public let clientID: String
        /// The user (or the client, for client credentials).
        public let subject: String
        /// Whether it was presented and answered (rotated away).
        public let spent: Bool
        /// Whether its family was revoked (reuse detected, `revokeSessions`, revocation).
        public let revoked: Bool
    }

    /// What `Browser` throws when the provider answers the authorization request with a page instead
    /// of a redirect (an unknown client, a redirect URI that does not match: RFC 6749 §4.1.2.1).
    public struct BrowserStopped: Error, Sendable, CustomStringConvertible {
        /// The page's status.
        public let status: Int
        /// The page's text.
        public let page: String
        /// "the provider showed an error page (400): …"
        public var description: String { "the provider showed an error page (\(status)): \(page)" }
    }
}
