#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseHTTP

/// Gives a `MooseHTTP` client its tokens: attaches `Authorization: Bearer …` (RFC 6750 §2.1) to
/// endpoints that require authentication, and on a 401 (or `WWW-Authenticate: Bearer
/// error="invalid_token"`) refreshes through the coordinator — only if the token that request
/// carried is still the current one — and retries that request once. Never a loop; never a retry
/// after `invalid_grant`.
///
/// ```swift
/// let client = APIClient(transport: URLSessionTransport(), interceptors: [AuthInterceptor(coordinator: coordinator)])
/// ```
public struct AuthInterceptor: HTTPInterceptor {
    /// The token source.
    public let coordinator: RefreshCoordinator

    /// An interceptor.
    public init(coordinator: RefreshCoordinator) { self.coordinator = coordinator }

    public func adapt(_ request: HTTPRequest, for endpoint: any Endpoint) async throws -> HTTPRequest {
        guard endpoint.requiresAuthentication else { return request }
        var request = request
        request.headers[.authorization] = try await coordinator.accessToken().checkedAuthorizationHeader()
        return request
    }

    public func process(_ response: HTTPResponse, for request: HTTPRequest, endpoint: any Endpoint,
                        attempt: Int) async throws -> InterceptorDecision {
        guard endpoint.requiresAuthentication, Self.rejectsToken(response), attempt == 1,
              let sent = request.headers[.authorization] else { return .proceed(response) }
        let fresh = try await coordinator.refresh(rejectingHeader: sent)
        var retried = request
        retried.headers[.authorization] = try fresh.checkedAuthorizationHeader()
        return .retry(retried, after: 0)
    }

    /// A 401, or a `WWW-Authenticate: Bearer error="invalid_token"` challenge (RFC 6750 §3.1).
    static func rejectsToken(_ response: HTTPResponse) -> Bool {
        if response.status == 401 { return true }
        return AuthenticationChallenge.parse(response.headers.values("WWW-Authenticate")).contains {
            $0.hasScheme("Bearer") && $0["error"] == "invalid_token"
        }
    }
}
