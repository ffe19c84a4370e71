#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Logging

/// What an interceptor says about a response or an error.
public enum InterceptorDecision: Sendable {
    /// Carry on (with this response, possibly transformed).
    case proceed(HTTPResponse)
    /// Send the request again — as it was, or as given — after the delay (nil: the retry policy's).
    case retry(HTTPRequest?, after: TimeInterval?)
    /// Stop with this error.
    case fail(any Error)
}

/// A step in the client's pipeline: adapts requests before they are sent, then sees each response
/// (or error) and decides whether to use it, retry, or fail. Authentication, retry and logging are
/// interceptors; `AuthInterceptor` (MooseOAuth) is one.
public protocol HTTPInterceptor: Sendable {
    /// Changes the request before it is sent (default: unchanged).
    func adapt(_ request: HTTPRequest, for endpoint: any Endpoint) async throws -> HTTPRequest
    /// Sees a response (default: `.proceed(response)`). `attempt` starts at 1.
    func process(_ response: HTTPResponse, for request: HTTPRequest, endpoint: any Endpoint, attempt: Int) async throws -> InterceptorDecision
    /// Sees a transport error (default: `.fail(error)`).
    func process(_ error: any Error, for request: HTTPRequest, endpoint: any Endpoint, attempt: Int) async -> InterceptorDecision
}

extension HTTPInterceptor {
    public func adapt(_ request: HTTPRequest, for endpoint: any Endpoint) async throws -> HTTPRequest { request }
    public func process(_ response: HTTPResponse, for request: HTTPRequest, endpoint: any Endpoint,
                        attempt: Int) async throws -> InterceptorDecision { .proceed(response) }
    public func process(_ error: any Error, for request: HTTPRequest, endpoint: any Endpoint,
                        attempt: Int) async -> InterceptorDecision { .fail(error) }
}
