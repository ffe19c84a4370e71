#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseHTTP
import HTTPTypes

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
    public func intercept(
        _ request: APIRequest, context: HTTPMiddlewareContext,
        next: @Sendable (APIRequest) async throws -> APIResponse
    ) async throws -> APIResponse {
        guard context.requiresAuthentication else { return try await next(request) }
        // The request body is in memory or in a file: it can be sent again.
        return try await authorizer.send(
            method: request.method, url: request.url, canResend: true,
            verdict: { TokenVerdict($0.head) }, dpopNonce: { $0.headerFields[.dpopNonce] }
        ) { fields in
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
