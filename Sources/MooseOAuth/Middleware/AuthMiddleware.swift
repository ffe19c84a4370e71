#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import HTTPTypes

/// What a resource server's answer says about the access token a request carried (RFC 6750 §3.1).
///
/// ```swift
/// TokenVerdict(status: 401, wwwAuthenticate: [])                                              // .rejected
/// TokenVerdict(status: 200, wwwAuthenticate: [#"Bearer error="invalid_token""#])              // .rejected
/// TokenVerdict(status: 403, wwwAuthenticate: [#"Bearer error="insufficient_scope", scope="admin""#])
///                                                                       // .insufficientScope(scope: "admin")
/// ```
public enum TokenVerdict: Sendable, Hashable {
    /// Nothing in the answer is about the token: pass it on.
    case accepted
    /// A 401, or a `Bearer error="invalid_token"` challenge: this token failed. Refresh (only if it is
    /// still the current one) and send the request once more.
    case rejected
    /// A 403 with `Bearer error="insufficient_scope"`: the token is valid but lacks `scope` (the scope
    /// the server named, if it named one in RFC 6749 scope characters). A refresh cannot help.
    case insufficientScope(scope: String?)
    /// A 401 with `WWW-Authenticate: DPoP error="use_dpop_nonce"` (RFC 9449 §9): the token is fine,
    /// the proof needs the nonce the server sent. Send once more with a new proof — not a refresh.
    case useDPoPNonce

    /// The verdict for a response's status code and its `WWW-Authenticate` values. Total over any
    /// input; the header is parsed only when present (the hot path reads one integer).
    public init(status: Int, wwwAuthenticate: [String]) {
        guard !wwwAuthenticate.isEmpty else { self = status == 401 ? .rejected : .accepted; return }
        let challenges = AuthenticationChallenge.parse(wwwAuthenticate)
        func error(_ challenge: AuthenticationChallenge, is code: String) -> Bool {
            challenge["error"].map { Array($0.utf8) == Array(code.utf8) } == true
        }
        if status == 401, challenges.contains(where: { $0.hasScheme("DPoP") && error($0, is: "use_dpop_nonce") }) {
            self = .useDPoPNonce
            return
        }
        if status == 401 { self = .rejected; return }
        let bearer = challenges.filter { $0.hasScheme("Bearer") || $0.hasScheme("DPoP") }
        if bearer.contains(where: { error($0, is: "invalid_token") }) {
            self = .rejected
        } else if status == 403, let challenge = bearer.first(where: { error($0, is: "insufficient_scope") }) {
            self = .insufficientScope(scope: challenge["scope"].flatMap(Self.checkedScope))
        } else {
            self = .accepted
        }
    }

    /// The verdict for a response head.
    public init(_ response: HTTPResponse) {
        self.init(status: response.status.code,
                  wwwAuthenticate: response.headerFields.contains(.wwwAuthenticate) ? response.headerFields[values: .wwwAuthenticate] : [])
    }

    /// A scope from outside, kept only when it is RFC 6749 §3.3 scope tokens separated by spaces (no
    /// control characters can reach an error message or a terminal) and at most 1,024 bytes.
    static func checkedScope(_ scope: String) -> String? {
        let bytes = scope.utf8
        guard !bytes.isEmpty, bytes.count <= 1024,
              bytes.allSatisfy({ $0 == 0x20 || $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }) else { return nil }
        return scope
    }
}

/// The one rule every Moose authentication middleware follows — `AuthMiddleware` for `APIClient`,
/// `AccessTokenMiddleware` for swift-openapi clients — written once:
///
/// 1. attach the coordinator's current token (`authorizationFields`);
/// 2. send;
/// 3. if the answer rejects that token (`TokenVerdict.rejected`), call `refresh(rejecting:)` with the
///    token the request carried — it refreshes only if that token is still the current one, so N
///    parallel 401s cost one refresh and a 401 for an already replaced token costs none — and send
///    the request **once** more with the new token. Never a loop; `invalid_grant` and the
///    coordinator's refresh window end it with an error.
/// 4. if the body cannot be sent again (`canResend == false`), the token is still refreshed (the
///    caller's next request works) and `OAuthError.tokenRejected` is thrown instead of a resend.
///
/// Proof-of-possession (DPoP, RFC 9449) plugs in at `authorizationFields(for:method:url:)`: it gets
/// the method and URL a proof is bound to, and every adapter asks it for the fields instead of
/// formatting `Bearer …` itself.
///
/// ```swift
/// let authorizer = TokenAuthorizer(coordinator: coordinator)
/// let response = try await authorizer.send(method: .get, url: url, canResend: true,
///                                          verdict: { TokenVerdict($0.head) }) { fields in
///     var request = request
///     for field in fields { request.headerFields[field.name] = field.value }
///     return try await transport.send(request)
/// }
/// ```
public struct TokenAuthorizer: Sendable {
    /// The token source.
    public let coordinator: RefreshCoordinator

    /// An authorizer on `coordinator`.
    public init(coordinator: RefreshCoordinator) { self.coordinator = coordinator }

    /// The header fields that present `token` on a request to `url` with `method`:
    /// `Authorization: <type> <token>` after checking that the token is an RFC 6750 `b64token` and
    /// the type an HTTP token (so nothing a provider sent can break out of the header) — and, for a
    /// DPoP-bound token, a fresh `DPoP` proof for this method and URL (RFC 9449 §7.1, with `ath` and
    /// the nonce `url`'s origin sent last).
    ///
    /// - Throws: `OAuthError.unsafeValue`; `OAuthError.needsLogin` for a DPoP-bound token without its key.
    public func authorizationFields(for token: AccessToken, method: HTTPRequest.Method, url: URL?) throws -> HTTPFields {
        guard token.isDPoPBound else {
            var fields = HTTPFields()
            fields[.authorization] = try token.checkedAuthorizationHeader()
            return fields
        }
        guard let url else { throw OAuthError(OAuthError.invalidConfiguration, "a DPoP proof needs the request's absolute URL") }
        return try token.authorizationFields(method: method, url: url)
    }

    /// Sends through `send` with the current token's fields, applying the rule above. `send` is called
    /// once, or twice after a rejection (or a DPoP server's request for a nonce); `discard` lets go of
    /// a refused response (drain its body) before the second call. `dpopNonce` reads a response's
    /// `DPoP-Nonce`, remembered for `url`'s origin when the token is DPoP-bound.
    public func send<Response>(method: HTTPRequest.Method, url: URL?, canResend: Bool,
                               verdict: (Response) -> TokenVerdict,
                               discard: (Response) async -> Void = { _ in },
                               dpopNonce: (Response) -> String? = { _ in nil },
                               _ send: (HTTPFields) async throws -> Response) async throws -> Response {
        let sent = try await coordinator.accessToken()
        func attempt(_ token: AccessToken) async throws -> Response {
            guard token.isDPoPBound, let url else { return try await send(try authorizationFields(for: token, method: method, url: url)) }
            // A proof that lacked the server's nonce is answered with a new proof, not a new token.
            return try await DPoPNonces.send(to: url, canResend: canResend, asksForNonce: { verdict($0) == .useDPoPNonce },
                                             nonce: dpopNonce, discard: discard) {
                try await send(try authorizationFields(for: token, method: method, url: url))
            }
        }
        let response = try await attempt(sent)
        guard verdict(response) == .rejected else { return response }
        await discard(response)
        let fresh = try await coordinator.refresh(rejecting: sent)
        guard canResend else {
            throw OAuthError(OAuthError.tokenRejected,
                             "the server refused the access token; it was refreshed, but this \(method) request was not sent again because its body can be read only once (a stream): send it again")
        }
        return try await attempt(fresh)
    }
}

/// Gives an `APIClient` its tokens: attaches the coordinator's token (RFC 6750 §2.1) to requests of
/// endpoints that require authentication, and on a 401 (or `WWW-Authenticate: Bearer
/// error="invalid_token"`) refreshes through the coordinator — only if the token that request
/// carried is still the current one — and sends that request once more (`TokenAuthorizer`'s rule).
/// Never a loop; never a second try after `invalid_grant`; a 403 `insufficient_scope` is returned as
/// it is (more scope is a new login, not a refresh). Independent of the client's retry policy.
///
/// ```swift
/// let client = APIClient(transport: URLSessionTransport(), middlewares: [AuthMiddleware(coordinator: coordinator)])
/// ```
public struct AuthMiddleware: HTTPMiddleware {
    /// The token source.
    public let coordinator: RefreshCoordinator
    private let authorizer: TokenAuthorizer

    /// A middleware.
    public init(coordinator: RefreshCoordinator) {
        self.coordinator = coordinator
        authorizer = TokenAuthorizer(coordinator: coordinator)
    }

    /// Attaches the token to requests whose endpoint requires authentication and applies the rule above.
    public func intercept(_ request: APIRequest, context: HTTPMiddlewareContext,
                          next: @Sendable (APIRequest) async throws -> APIResponse) async throws -> APIResponse {
        guard context.requiresAuthentication else { return try await next(request) }
        // The request body is in memory or in a file: it can be sent again.
        return try await authorizer.send(method: request.method, url: request.url, canResend: true,
                                         verdict: { TokenVerdict($0.head) }, dpopNonce: { $0.headerFields[.dpopNonce] }) { fields in
            var request = request
            for field in fields { request.headerFields[field.name] = field.value }
            return try await next(request)
        }
    }

    /// A 401, or a `WWW-Authenticate: Bearer`/`DPoP` challenge with `error="invalid_token"` (RFC 6750
    /// §3.1, RFC 9449 §7.1) — but not a DPoP server asking for a nonce, which is answered with a new
    /// proof, not a refresh.
    public static func rejectsToken(_ response: APIResponse) -> Bool { TokenVerdict(response.head) == .rejected }
}
