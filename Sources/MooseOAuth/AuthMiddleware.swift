#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseHTTP

/// Gives an `APIClient` its tokens: attaches `Authorization: Bearer …` (RFC 6750 §2.1) to requests
/// of endpoints that require authentication, and on a 401 (or `WWW-Authenticate: Bearer
/// error="invalid_token"`) refreshes through the coordinator — only if the token that request
/// carried is still the current one — and sends that request once more. Never a loop; never a
/// second try after `invalid_grant`; a 403 `insufficient_scope` is returned as it is (more scope is
/// a new login, not a refresh). Independent of the client's retry policy.
///
/// ```swift
/// let client = APIClient(transport: URLSessionTransport(), middlewares: [AuthMiddleware(coordinator: coordinator)])
/// ```
public struct AuthMiddleware: HTTPMiddleware {
    /// The token source.
    public let coordinator: RefreshCoordinator

    /// A middleware.
    public init(coordinator: RefreshCoordinator) { self.coordinator = coordinator }

    public func intercept(_ request: APIRequest, context: HTTPMiddlewareContext,
                          next: @Sendable (APIRequest) async throws -> APIResponse) async throws -> APIResponse {
        guard context.requiresAuthentication else { return try await next(request) }
        var request = request
        let sent = try await coordinator.accessToken()
        request.headerFields[.authorization] = try sent.checkedAuthorizationHeader()
        let response = try await next(request)
        guard Self.rejectsToken(response) else { return response }
        // The request body is in memory or in a file: it can be sent again.
        let fresh = try await coordinator.refresh(rejecting: sent)
        request.headerFields[.authorization] = try fresh.checkedAuthorizationHeader()
        return try await next(request)
    }

    /// A 401, or a `WWW-Authenticate: Bearer error="invalid_token"` challenge (RFC 6750 §3.1).
    public static func rejectsToken(_ response: APIResponse) -> Bool {
        if response.status.code == 401 { return true }
        return AuthenticationChallenge.parse(response.headerFields[values: .wwwAuthenticate]).contains {
            $0.hasScheme("Bearer") && $0["error"] == "invalid_token"
        }
    }
}
