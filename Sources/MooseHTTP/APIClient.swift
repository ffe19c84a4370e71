#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import Logging
import HTTPTypes

/// A small, complete HTTP client: endpoints in, models out; a middleware chain (retry, your own,
/// logging), enforced timeouts, cancellation, status validation, server-error mapping.
///
/// The chain, outermost first: `RetryMiddleware` (from `retryPolicy`), then `middlewares` in order
/// (authentication goes here, so each retried attempt gets a current token), then
/// `LoggingMiddleware` (each attempt logged, redacted), then the transport with the request's
/// timeout enforced.
///
/// ```swift
/// let client = APIClient(transport: URLSessionTransport(), middlewares: [moose.middleware])
/// let user: User = try await client.decode(User.self, from: UsersAPI.user(id: "42"))
/// ```
public struct APIClient: Sendable {
    /// Sends the requests.
    public let transport: any HTTPTransport
    /// Builds requests from endpoints.
    public var builder: RequestBuilder
    /// Middlewares between retry (outside) and logging (inside), in order.
    public var middlewares: [any HTTPMiddleware]
    /// Retries.
    public var retryPolicy: RetryPolicy
    /// Where request/response lines go (debug level), with credentials redacted.
    public var logger: Logger
    /// The network path, when given: offline is `HTTPRequestError.offline` at once, never retried.
    public var reachability: (any Reachability)?

    /// A client; `logger` is the caller's (default: none).
    ///
    /// - Parameters:
    ///   - transport: what sends each attempt (`URLSessionTransport`, `CurlTransport`, AsyncHTTPClient's).
    ///   - builder: turns endpoints into requests (base URL, default headers); default: one with none.
    ///   - middlewares: run between the retry (outside) and logging (inside) middlewares, in order, on
    ///     every attempt; default: none.
    ///   - retryPolicy: which failures are retried and how long to wait; default: three attempts with
    ///     jittered backoff from 0.5 s (`.none`: one attempt).
    ///   - logger: where request and response lines go (debug level, credentials redacted); `nil` (the
    ///     default): nowhere.
    ///   - reachability: the network path; offline fails at once with `HTTPRequestError.offline`, never
    ///     retried; `nil` (the default): not consulted.
    public init(
        transport: any HTTPTransport, builder: RequestBuilder = RequestBuilder(),
        middlewares: [any HTTPMiddleware] = [], retryPolicy: RetryPolicy = RetryPolicy(),
        logger: Logger? = nil, reachability: (any Reachability)? = nil
    ) {
        self.transport = transport
        self.builder = builder
        self.middlewares = middlewares
        self.retryPolicy = retryPolicy
        self.reachability = reachability
        // swift-log's "accepting loggers": the caller's, or none at all.
        self.logger = logger ?? Logger(label: "moose.http", factory: { _ in SwiftLogNoOpLogHandler() })
    }

    /// Sends the endpoint's request and returns the (2xx) response.
    ///
    /// - Parameter endpoint: the request to build and send; its `isRetryable` and
    ///   `requiresAuthentication` go to the middlewares, and its `serverError(for:)` maps error answers.
    /// - Returns: the response, whose status is 2xx, after the retries the policy allows.
    /// - Throws: the endpoint's own server error, `HTTPRequestError.status` for other non-2xx answers,
    ///   `HTTPRequestError.invalidRequest` when the request cannot be built, `HTTPRequestError` for
    ///   transport failures (`transport`, `timedOut`, `tls`, `pinning`, `notTLS`, `nameNotResolved`,
    ///   `offline`, `responseTooLarge`), `CancellationError` when the task is cancelled; whatever a
    ///   middleware throws.
    @discardableResult
    public func send(_ endpoint: some Endpoint) async throws -> APIResponse {
        let request = try builder.build(endpoint)
        defer {
            if request.removesBodyFileAfterUse, let file = request.bodyFile {
                try? FileManager.default.removeItem(at: file)
            }
        }
        let context = HTTPMiddlewareContext(
            isRetryable: endpoint.isRetryable, requiresAuthentication: endpoint.requiresAuthentication)
        let response = try await run(request, context: context)
        return try validate(response, request, endpoint)
    }

    /// Sends a ready-made request through the chain and returns the response *whatever its status*
    /// (for protocols that read error bodies themselves, like OAuth's token endpoint).
    ///
    /// - Parameters:
    ///   - request: the request, sent as it is (its `timeout` enforced over the whole exchange).
    ///   - context: what the middlewares are told: whether the request may be retried, whether it needs
    ///     authentication.
    /// - Returns: the response, whatever its status.
    /// - Throws: `HTTPRequestError` for transport failures (`transport`, `timedOut`, `tls`, `pinning`,
    ///   `notTLS`, `nameNotResolved`, `offline`, `responseTooLarge`), `CancellationError` when the task
    ///   is cancelled; whatever a middleware throws.
    public func send(_ request: APIRequest, context: HTTPMiddlewareContext) async throws -> APIResponse {
        try await run(request, context: context)
    }

    func run(_ request: APIRequest, context: HTTPMiddlewareContext) async throws -> APIResponse {
        try Task.checkCancellation()
        let transport = self.transport
        var next: @Sendable (APIRequest) async throws -> APIResponse = { request in
            try await Self.send(request, over: transport)
        }
        let chain: [any HTTPMiddleware] =
            [RetryMiddleware(policy: retryPolicy, logger: logger, reachability: reachability)] + middlewares
            + [LoggingMiddleware(logger: logger)]
        for middleware in chain.reversed() {
            let inner = next
            next = { request in try await middleware.intercept(request, context: context, next: inner) }
        }
        do {
            return try await next(request)
        } catch let error as HTTPRequestError {
            if Task.isCancelled { throw CancellationError() }
            throw error
        }
    }

    /// Sends with the request's timeout enforced here (transports' own timers can be coarse: on
    /// Linux a busy URLSession let a 0.5 s timeout run for seconds), over the whole exchange.
    ///
    /// The transport runs in a child task that `DeadlineWatch` cancels when the timeout passes; the
    /// child then throws `timedOut`. Cancelling the caller cancels the child. (A task group of one:
    /// an `async let` here crashed the task allocator when the caller was `nonisolated(nonsending)`.)
    static func send(_ request: APIRequest, over transport: any HTTPTransport) async throws -> APIResponse {
        // The deadline counts from now, not from when the child first runs (a busy pool can start
        // it late).
        let deadline = DeadlineWatch.deadline(after: request.timeout)
        return try await withThrowingTaskGroup(of: APIResponse.self) { group in
            group.addTask { try await watched(request, over: transport, deadline: deadline) }
            guard let response = try await group.next() else { throw CancellationError() }
            return response
        }
    }

    /// The child task of `send`: the transport's exchange, under the watch's deadline.
    private static func watched(_ request: APIRequest, over transport: any HTTPTransport, deadline: UInt64) async throws
        -> APIResponse
    {
        let timeout = request.timeout
        let ticket = withUnsafeCurrentTask { task in task.map { DeadlineWatch.shared.watch($0, deadline: deadline) } }
        do {
            let response = try await transport.send(request)
            // An answer that came as the deadline passed is still the answer.
            if let ticket { _ = DeadlineWatch.shared.finish(ticket) }
            return response
        } catch {
            if let ticket, DeadlineWatch.shared.finish(ticket) {
                throw HTTPRequestError(
                    HTTPRequestError.timedOut, "no answer within \(timeout) s", method: request.method,
                    url: request.redactedURL)
            }
            throw error
        }
    }

    /// Decodes the response body as `T`.
    ///
    /// - Parameters:
    ///   - type: the model to decode.
    ///   - endpoint: the request, sent as `send(_:)` sends it.
    ///   - decoder: the decoder (its date and key strategies apply); default: a plain `JSONDecoder`.
    /// - Throws: the errors of `send(_:)`; `HTTPRequestError.decoding` (with the status and a redacted
    ///   body excerpt) when the body is not a `T`.
    public func decode<T: Decodable>(
        _ type: T.Type, from endpoint: some Endpoint,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> T {
        let response = try await send(endpoint)
        do {
            return try decoder.decode(T.self, from: response.body)
        } catch {
            throw HTTPRequestError(
                HTTPRequestError.decoding, "the response is not a valid \(T.self): \(error)", method: endpoint.method,
                url: (try? builder.build(endpoint))?.redactedURL, status: response.status,
                bodyExcerpt: Self.excerpt(response.body))
        }
    }

    /// The response body as bytes.
    ///
    /// - Throws: the errors of `send(_:)`.
    public func data(from endpoint: some Endpoint) async throws -> Data { try await send(endpoint).body }

    /// The response body as text (UTF-8, invalid bytes replaced).
    ///
    /// - Throws: the errors of `send(_:)`.
    public func string(from endpoint: some Endpoint) async throws -> String {
        String(decoding: try await send(endpoint).body, as: UTF8.self)
    }

    /// The response body as a loosely typed JSON value.
    ///
    /// - Throws: the errors of `send(_:)`; `HTTPRequestError.decoding` when the body is not JSON.
    public func json(from endpoint: some Endpoint) async throws -> JSON {
        try await decode(JSON.self, from: endpoint)
    }

    func validate(_ response: APIResponse, _ request: APIRequest, _ endpoint: some Endpoint) throws -> APIResponse {
        guard response.status.kind != .successful else { return response }
        if let mapped = endpoint.serverError(for: response) { throw mapped }
        throw HTTPRequestError(
            HTTPRequestError.status, "the server answered \(response.status)", method: request.method,
            url: request.redactedURL, status: response.status, bodyExcerpt: Self.excerpt(response.body))
    }

    /// What an error may quote of a body: never a value that could be a secret (`Redaction.body`).
    static func excerpt(_ body: Data) -> String { Redaction.body(Array(body.prefix(16_384)), showingValues: true) }
}
