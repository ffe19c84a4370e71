#if MooseOpenAPI
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth
public import OpenAPIRuntime
public import HTTPTypes
import MooseHTTP

/// A swift-openapi-runtime `ClientMiddleware` that gives a generated client its access tokens:
/// every request carries the coordinator's current token, and when the server rejects it (a 401,
/// or `WWW-Authenticate: Bearer error="invalid_token"`) the middleware calls `refresh(rejecting:)`
/// with the token *that request carried* — a refresh only if it is still the current one, so 200
/// parallel 401s cost one refresh and a 401 for an already replaced token costs none — and sends
/// the request once more. Never a loop. The rule is MooseOAuth's `TokenAuthorizer`, the same one
/// `AuthMiddleware` follows for `APIClient`.
///
/// ```swift
/// let client = Client(serverURL: url, transport: AsyncHTTPClientTransport(),
///                     middlewares: [AccessTokenMiddleware(coordinator: moose.coordinator)])
/// let me = try await client.getMe().ok.body.json
/// ```
///
/// - **Bodies.** A request is sent again only when its body can be read again
///   (`HTTPBody.iterationBehavior == .multiple`: JSON, form and byte bodies the generated client
///   makes). A streamed body (`.single`) is never replayed: the token is refreshed, and the call
///   fails with `OAuthError.tokenRejected` (send it again).
/// - **Scope.** A 403 with `Bearer error="insufficient_scope"` throws `OAuthError.insufficientScope`
///   whose `scope` names what the server wants; it is not retried (more scope is a new login).
/// - **Errors.** swift-openapi-runtime wraps what a middleware throws in its `ClientError`: the
///   `OAuthError` is its `underlyingError`.
/// - **Order.** In `middlewares:`, the first is outermost. Put a retry middleware *before* this
///   one (each retried attempt then gets a current token) and a logging middleware *after* it
///   (each attempt, the rejected one included, is logged with the header it carried — redact
///   `Authorization` there).
public struct AccessTokenMiddleware: ClientMiddleware {
    /// The token source.
    public let coordinator: RefreshCoordinator
    /// Operations (`operationId`s) sent without a token (public endpoints of the same API).
    public let unauthenticatedOperations: Set<String>
    private let authorizer: TokenAuthorizer

    /// A middleware on `coordinator`; operations in `unauthenticatedOperations` are passed through untouched.
    public init(coordinator: RefreshCoordinator, unauthenticatedOperations: Set<String> = []) {
        self.coordinator = coordinator
        self.unauthenticatedOperations = unauthenticatedOperations
        authorizer = TokenAuthorizer(coordinator: coordinator)
    }

    /// The largest part of a rejected response's body read (and dropped) before the request is sent
    /// again, so the connection can be reused; a longer one is abandoned.
    static let rejectedBodyDrainLimit = 64 << 10

    /// Attaches the token, sends, and applies the rule above; throws `OAuthError.tokenRejected` or
    /// `OAuthError.insufficientScope` as described there, and whatever the coordinator throws
    /// (`invalidGrant`, `needsLogin`, `refreshLimit`…) when no token can be had.
    public func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    )
        async throws -> (HTTPResponse, HTTPBody?)
    {
        guard !unauthenticatedOperations.contains(operationID) else { return try await next(request, body, baseURL) }
        let canResend = body.map { $0.iterationBehavior == .multiple } ?? true
        let result = try await authorizer.send(
            method: request.method, url: Self.url(of: request, baseURL: baseURL),
            canResend: canResend,
            verdict: { TokenVerdict($0.0) },
            discard: { (rejected: (HTTPResponse, HTTPBody?)) in
                if let body = rejected.1 {
                    _ = try? await ArraySlice(collecting: body, upTo: Self.rejectedBodyDrainLimit)
                }
            },
            dpopNonce: { $0.0.headerFields[.dpopNonce] }, head: { $0.0 }
        ) { fields in
            var request = request
            for field in fields { request.headerFields[field.name] = field.value }
            return try await next(request, body, baseURL)
        }
        if case .insufficientScope(let scope) = TokenVerdict(result.0) {
            throw OAuthError(
                OAuthError.insufficientScope,
                "the server refused the request for lack of scope\(scope.map { " (it needs \"\($0)\")" } ?? ""); a refresh cannot add scope: log in again asking for it",
                oauthError: "insufficient_scope", status: result.0.status.code, scope: scope)
        }
        return result
    }

    /// The absolute URL the request goes to (what a DPoP proof's `htu` names): the base URL's path
    /// joined with the request's path and query, as the runtime's transports join them.
    static func url(of request: HTTPRequest, baseURL: URL) -> URL? {
        guard let path = request.path else { return baseURL }
        var base = baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        return URL(string: base + path)
    }
}
#endif
