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
        let sent = try await coordinator.accessToken()
        // Bearer, or DPoP with a fresh proof per request (one retry for a new nonce is not a refresh).
        let response = try await sent.send(request, with: next)
        guard Self.rejectsToken(response) else { return response }
        // The request body is in memory or in a file: it can be sent again.
        let fresh = try await coordinator.refresh(rejecting: sent)
        return try await fresh.send(request, with: next)
    }

    /// A 401, or a `WWW-Authenticate: Bearer`/`DPoP` challenge with `error="invalid_token"`
    /// (RFC 6750 §3.1, RFC 9449 §7.1) — but not a DPoP server asking for a nonce, which is answered
    /// with a new proof, not a refresh.
    public static func rejectsToken(_ response: APIResponse) -> Bool {
        if DPoPNonces.asksForNonce(response) { return false }
        if response.status.code == 401 { return true }
        return AuthenticationChallenge.parse(response.headerFields[values: .wwwAuthenticate]).contains {
            ($0.hasScheme("Bearer") || $0.hasScheme("DPoP")) && $0["error"].map { Array($0.utf8) == Array("invalid_token".utf8) } == true
        }
    }
}
