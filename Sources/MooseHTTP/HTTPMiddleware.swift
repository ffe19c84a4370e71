#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import Logging
import HTTPTypes

/// What a middleware knows about the exchange besides the request.
public struct HTTPMiddlewareContext: Sendable {
    /// Whether the request may be sent again (an idempotent method, or an endpoint that opted in).
    public var isRetryable: Bool
    /// Whether the endpoint wants credentials attached (an auth middleware looks at this).
    public var requiresAuthentication: Bool

    /// A context.
    public init(isRetryable: Bool, requiresAuthentication: Bool) {
        self.isRetryable = isRetryable
        self.requiresAuthentication = requiresAuthentication
    }
}

/// A step in `APIClient`'s chain, in the shape of swift-openapi-runtime's `ClientMiddleware` and
/// Hummingbird's middleware: it sees the request, calls `next` (the rest of the chain) zero or more
/// times, and returns a response. Authentication, retry and logging are middlewares.
///
/// ```swift
/// struct APIKey: HTTPMiddleware {
///     func intercept(_ request: APIRequest, context: HTTPMiddlewareContext,
///                    next: @Sendable (APIRequest) async throws -> APIResponse) async throws -> APIResponse {
///         var request = request
///         request.headerFields[HTTPField.Name("X-API-Key")!] = "…"
///         return try await next(request)
///     }
/// }
/// ```
public protocol HTTPMiddleware: Sendable {
    /// Handles `request`, calling `next` to send it on.
    func intercept(
        _ request: APIRequest, context: HTTPMiddlewareContext,
        next: @Sendable (APIRequest) async throws -> APIResponse
    ) async throws -> APIResponse
}

/// Retries with `policy`: retryable statuses and transport failures, for retryable requests, with
/// jittered backoff and `Retry-After` (bounded by `maximumRetryAfter`: a longer wait is not waited
/// for, the response is returned as it is).
public struct RetryMiddleware: HTTPMiddleware {
    /// The policy.
    public let policy: RetryPolicy
    /// Where retries are logged (debug).
    public let logger: Logger
    /// The network path: offline means `HTTPRequestError.offline` at once — before the first
    /// attempt and instead of a retry — rather than attempts that cannot succeed.
    public let reachability: (any Reachability)?

    /// A retry step.
    public init(policy: RetryPolicy, logger: Logger, reachability: (any Reachability)? = nil) {
        self.policy = policy
        self.logger = logger
        self.reachability = reachability
    }

    private func checkOnline(_ request: APIRequest) throws {
        guard let reachability, reachability.status == .offline else { return }
        throw HTTPRequestError(
            HTTPRequestError.offline, "the network is unreachable; nothing was sent", method: request.method,
            url: request.redactedURL)
    }

    public func intercept(
        _ request: APIRequest, context: HTTPMiddlewareContext,
        next: @Sendable (APIRequest) async throws -> APIResponse
    ) async throws -> APIResponse {
        var attempt = 1
        while true {
            try Task.checkCancellation()
            try checkOnline(request)
            let delay: TimeInterval
            do {
                let response = try await next(request)
                guard response.status.kind != .successful, policy.retryableStatuses.contains(response.status.code),
                    context.isRetryable,
                    attempt < policy.maxAttempts
                else { return response }
                if policy.honoursRetryAfter, let after = RetryPolicy.retryAfter(response.headerFields[.retryAfter]) {
                    guard after <= policy.maximumRetryAfter else { return response }
                    delay = after
                } else {
                    delay = policy.delay(after: attempt)
                }
            } catch let error as HTTPRequestError
                where error.code != HTTPRequestError.invalidRequest && error.code != HTTPRequestError.tls
                && context.isRetryable && attempt < policy.maxAttempts
            {
                if Task.isCancelled { throw CancellationError() }
                delay = policy.delay(after: attempt)
            }
            logger.debug("retrying \(request.method) \(request.redactedURL) in \(delay) s (attempt \(attempt + 1))")
            try await Task.sleep(nanoseconds: UInt64(max(0, min(delay, 86_400)) * 1_000_000_000))
            attempt += 1
        }
    }
}

/// Logs each request and response at debug level, credentials redacted (sensitive headers, form
/// fields, query values), bodies by size only unless form-encoded.
public struct LoggingMiddleware: HTTPMiddleware {
    /// The logger.
    public let logger: Logger

    /// A logging step.
    public init(logger: Logger) { self.logger = logger }

    public func intercept(
        _ request: APIRequest, context: HTTPMiddlewareContext,
        next: @Sendable (APIRequest) async throws -> APIResponse
    ) async throws -> APIResponse {
        guard logger.logLevel <= .debug else { return try await next(request) }
        let headers = request.headerFields.map { field in
            HTTPField.Name.sensitive.contains(field.name) ? "\(field.name): ***" : "\(field.name): \(field.value)"
        }.joined(separator: ", ")
        var body = ""
        if let data = request.body {
            let isForm = request.headerFields[.contentType].map { MIMEType($0) } == MIMEType.formURLEncoded
            body =
                isForm ? " body=\(Redaction.form(String(decoding: data, as: UTF8.self)))" : " body=\(data.count) bytes"
        }
        logger.debug("→ \(request.method) \(request.redactedURL) [\(headers)]\(body)")
        let started = Date()
        do {
            let response = try await next(request)
            let milliseconds = Int64(Date().timeIntervalSince(started) * 1000)
            logger.debug(
                "← \(response.status) \(request.method) \(request.redactedURL) \(response.body.count) bytes \(milliseconds) ms"
            )
            return response
        } catch {
            logger.debug("✗ \(request.method) \(request.redactedURL) failed: \(error)")
            throw error
        }
    }
}
