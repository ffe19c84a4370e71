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
        // The chain, built inside out (transport, logging, the middlewares, retry) without gathering
        // it in an array first: retry is called directly, so a client without middlewares wraps two
        // closures per request.
        let transport = self.transport
        let logging = LoggingMiddleware(logger: logger)
        var next: @Sendable (APIRequest) async throws -> APIResponse = { request in
            try await logging.intercept(request, context: context) { request in
                try await Self.send(request, over: transport)
            }
        }
        for middleware in middlewares.reversed() {
            let inner = next
            next = { request in try await middleware.intercept(request, context: context, next: inner) }
        }
        let retry = RetryMiddleware(policy: retryPolicy, logger: logger, reachability: reachability)
        do {
            return try await retry.intercept(request, context: context, next: next)
        } catch let error as HTTPRequestError {
            if Task.isCancelled { throw CancellationError() }
            throw error
        }
    }

    /// Sends with the request's timeout enforced here (transports' own timers can be coarse: on
    /// Linux a busy URLSession let a 0.5 s timeout run for seconds), over the whole exchange.
    ///
    /// A transport that can stop its own exchange (`ExchangeEndingTransport`: `URLSessionTransport`
    /// on Linux) is handed an `ExchangeEnd` that `DeadlineWatch` ends when the timeout passes; the
    /// exchange then throws `timedOut`. Any other transport (and a request with a body file) runs in
    /// a child task that `DeadlineWatch` cancels when the timeout passes; the child then throws
    /// `timedOut`. Cancelling the caller cancels the exchange either way. (A task group of one: an
    /// `async let` here crashed the task allocator when the caller was `nonisolated(nonsending)`.)
    static func send(_ request: APIRequest, over transport: any HTTPTransport) async throws -> APIResponse {
        // The deadline counts from now, not from when the exchange first runs (a busy pool can
        // start a child late).
        let deadline = DeadlineWatch.deadline(after: request.timeout)
        if request.bodyFile == nil, let ending = transport as? any ExchangeEndingTransport {
            return try await ended(request, over: ending, deadline: deadline)
        }
        return try await withThrowingTaskGroup(of: APIResponse.self) { group in
            group.addTask { try await watched(request, over: transport, deadline: deadline) }
            guard let response = try await group.next() else { throw CancellationError() }
            return response
        }
    }

    /// The exchange of a transport that stops it when told, in the caller's task: no child task (two
    /// executor jobs fewer per request), the same outcomes as `watched` — the answer, `timedOut` once
    /// the deadline ended the exchange, or the transport's error.
    private static func ended(_ request: APIRequest, over transport: any ExchangeEndingTransport, deadline: UInt64)
        async throws -> APIResponse
    {
        let end = ExchangeEnd()
        let ticket = DeadlineWatch.shared.watch(deadline: deadline) { end.end() }
        do {
            let response = try await transport.send(request, endedBy: end)
            // An answer that came as the deadline passed is still the answer.
            _ = DeadlineWatch.shared.finish(ticket)
            return response
        } catch {
            if DeadlineWatch.shared.finish(ticket) {
                throw HTTPRequestError(
                    HTTPRequestError.timedOut, "no answer within \(request.timeout) s", method: request.method,
                    url: request.redactedURL)
            }
            throw error
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

/// What ends one exchange from outside the task that awaits it (package-internal): `APIClient` ends
/// an exchange whose deadline passed with it, so that it needs no child task to cancel. The
/// transport says what ending does (`onEnd`: cancel its request); an end that comes first runs that
/// as soon as it is said.
package final class ExchangeEnd: Sendable {
    private struct State {
        var ended = false
        var action: (@Sendable () -> Void)?
    }

    private let state = ThreadLocked(State())

    package init() {}

    /// What ending the exchange does: run now when it already ended, else when it ends (once).
    package func onEnd(_ action: @escaping @Sendable () -> Void) {
        let endedAlready = state.withLock { state in
            if !state.ended { state.action = action }
            return state.ended
        }
        if endedAlready { action() }
    }

    /// Ends the exchange: runs what `onEnd` gave, outside the lock.
    package func end() {
        let action = state.withLock { state in
            defer { state.action = nil }
            state.ended = true
            return state.action
        }
        action?()
    }
}

/// A transport that stops one of its exchanges when told to (package-internal). For a request
/// without a body file `APIClient` sends through this, in the caller's task, and ends the exchange
/// when the request's timeout passes — what running `send(_:)` in a child task for `DeadlineWatch` to
/// cancel does, without the child task (URLSession loopback requests: BENCHMARKS.md).
package protocol ExchangeEndingTransport: HTTPTransport {
    /// Sends `request` (one without a body file) as `send(_:)` does; once `end` is ended the exchange
    /// stops and this throws (`APIClient` then reports the timeout). Cancelling the caller's task
    /// cancels the exchange, as for `send(_:)`.
    func send(_ request: APIRequest, endedBy end: ExchangeEnd) async throws -> APIResponse
}
