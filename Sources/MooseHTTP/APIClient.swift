#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import Logging

/// A small, complete HTTP client: endpoints in, models out; interceptors, retry, cancellation,
/// status validation, server-error mapping and redacted logging.
///
/// ```swift
/// let client = APIClient(transport: URLSessionTransport())
/// let user: User = try await client.decode(User.self, from: UsersAPI.user(id: "42"))
/// ```
public struct APIClient: Sendable {
    /// Sends the requests.
    public let transport: any HTTPTransport
    /// Builds requests from endpoints.
    public var builder: RequestBuilder
    /// The pipeline, in order: adapters run first to last; response processors too.
    public var interceptors: [any HTTPInterceptor]
    /// Retries.
    public var retryPolicy: RetryPolicy
    /// Where request/response lines go (debug level), with credentials redacted.
    public var logger: Logger

    /// A client.
    public init(transport: any HTTPTransport, builder: RequestBuilder = RequestBuilder(),
                interceptors: [any HTTPInterceptor] = [], retryPolicy: RetryPolicy = RetryPolicy(),
                logger: Logger? = nil) {
        self.transport = transport
        self.builder = builder
        self.interceptors = interceptors
        self.retryPolicy = retryPolicy
        // swift-log's "accepting loggers": the caller's, or none at all.
        self.logger = logger ?? Logger(label: "moose.http", factory: { _ in SwiftLogNoOpLogHandler() })
    }

    /// Sends the endpoint's request and returns the (2xx) response.
    ///
    /// - Throws: the endpoint's own server error, `HTTPError.status` for other non-2xx answers,
    ///   `HTTPError` for transport failures, `CancellationError` when the task is cancelled.
    @discardableResult
    public func send(_ endpoint: some Endpoint) async throws -> HTTPResponse {
        var request = try builder.build(endpoint)
        defer { if request.removesBodyFileAfterUse, let file = request.bodyFile { try? FileManager.default.removeItem(at: file) } }
        for interceptor in interceptors { request = try await interceptor.adapt(request, for: endpoint) }
        var attempt = 1
        while true {
            try Task.checkCancellation()
            let started = Date()
            log(request: request, attempt: attempt)
            var decision: InterceptorDecision
            do {
                let response = try await Self.send(request, over: transport)
                log(response: response, for: request, since: started)
                decision = .proceed(response)
                for interceptor in interceptors {
                    guard case .proceed(let current) = decision else { break }
                    decision = try await interceptor.process(current, for: request, endpoint: endpoint, attempt: attempt)
                }
                if case .proceed(let current) = decision, !current.statusCode.isSuccess,
                   retryPolicy.retryableStatuses.contains(current.status), endpoint.isRetryable, attempt < retryPolicy.maxAttempts {
                    var delay: TimeInterval? = nil
                    if retryPolicy.honoursRetryAfter, let after = RetryPolicy.retryAfter(current.headers[.retryAfter]) {
                        guard after <= retryPolicy.maximumRetryAfter else { return try validate(current, request, endpoint) }
                        delay = after
                    }
                    decision = .retry(nil, after: delay)
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                if Task.isCancelled { throw CancellationError() }
                logger.debug("\(request.method) \(request.url.redactedForLogs) failed: \(error)")
                decision = .fail(error)
                for interceptor in interceptors {
                    guard case .fail(let current) = decision else { break }
                    decision = await interceptor.process(current, for: request, endpoint: endpoint, attempt: attempt)
                }
                if case .fail(let current) = decision, current is HTTPError, (current as? HTTPError)?.code != HTTPError.invalidRequest,
                   endpoint.isRetryable, attempt < retryPolicy.maxAttempts {
                    decision = .retry(nil, after: nil)
                }
            }
            switch decision {
            case .proceed(let response):
                return try validate(response, request, endpoint)
            case .fail(let error):
                throw error
            case .retry(let replacement, let after):
                guard attempt < retryPolicy.maxAttempts else {
                    throw HTTPError(HTTPError.transport, "gave up after \(attempt) attempts", method: request.method,
                                    url: request.url.redactedForLogs)
                }
                let delay = after ?? retryPolicy.delay(after: attempt)
                logger.debug("retrying \(request.method) \(request.url.redactedForLogs) in \(delay) s (attempt \(attempt + 1))")
                try await Task.sleep(nanoseconds: UInt64(max(0, delay) * 1_000_000_000))
                if let replacement { request = replacement }
                attempt += 1
            }
        }
    }

    /// Sends with the request's timeout enforced here (transports' own timers can be coarse: on
    /// Linux a busy URLSession let a 0.5 s timeout run for seconds). The loser is cancelled.
    static func send(_ request: HTTPRequest, over transport: any HTTPTransport) async throws -> HTTPResponse {
        let timeout = request.timeout
        return try await withThrowingTaskGroup(of: HTTPResponse.self) { group in
            group.addTask { try await transport.send(request) }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(max(0.001, timeout) * 1_000_000_000))
                throw HTTPError(HTTPError.timedOut, "no answer within \(timeout) s", method: request.method,
                                url: request.url.redactedForLogs)
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
    }

    /// Decodes the response body as `T`.
    public func decode<T: Decodable>(_ type: T.Type, from endpoint: some Endpoint,
                                     decoder: JSONDecoder = JSONDecoder()) async throws -> T {
        let response = try await send(endpoint)
        do {
            return try decoder.decode(T.self, from: response.body)
        } catch {
            throw HTTPError(HTTPError.decoding, "the response is not a valid \(T.self): \(error)", method: endpoint.method,
                            url: try? builder.build(endpoint).url.redactedForLogs, status: response.statusCode,
                            bodyExcerpt: Self.excerpt(response.body))
        }
    }

    /// The response body as bytes.
    public func data(from endpoint: some Endpoint) async throws -> Data { try await send(endpoint).body }

    /// The response body as text (UTF-8, invalid bytes replaced).
    public func string(from endpoint: some Endpoint) async throws -> String {
        String(decoding: try await send(endpoint).body, as: UTF8.self)
    }

    /// The response body as a loosely typed JSON value.
    public func json(from endpoint: some Endpoint) async throws -> JSON {
        try await decode(JSON.self, from: endpoint)
    }

    func validate(_ response: HTTPResponse, _ request: HTTPRequest, _ endpoint: some Endpoint) throws -> HTTPResponse {
        guard !response.statusCode.isSuccess else { return response }
        if let mapped = endpoint.serverError(for: response) { throw mapped }
        throw HTTPError(HTTPError.status, "the server answered \(response.statusCode)", method: request.method,
                        url: request.url.redactedForLogs, status: response.statusCode, bodyExcerpt: Self.excerpt(response.body))
    }

    static func excerpt(_ body: Data) -> String {
        let text = String(decoding: body.prefix(512), as: UTF8.self)
        return Redaction.form(text)
    }

    func log(request: HTTPRequest, attempt: Int) {
        guard logger.logLevel <= .debug else { return }
        let headers = request.headers.map { field in
            HTTPHeaderName.sensitive.contains(HTTPHeaderName(field.name)) ? "\(field.name): ***" : "\(field.name): \(field.value)"
        }.joined(separator: ", ")
        var body = ""
        if let data = request.body {
            let isForm = request.headers[.contentType].map { MIMEType($0) } == MIMEType.formURLEncoded
            body = isForm ? " body=\(Redaction.form(String(decoding: data, as: UTF8.self)))" : " body=\(data.count) bytes"
        }
        logger.debug("→ \(request.method) \(request.url.redactedForLogs) [\(headers)]\(body)\(attempt > 1 ? " attempt \(attempt)" : "")")
    }

    func log(response: HTTPResponse, for request: HTTPRequest, since started: Date) {
        guard logger.logLevel <= .debug else { return }
        let milliseconds = Int(Date().timeIntervalSince(started) * 1000)
        logger.debug("← \(response.statusCode) \(request.method) \(request.url.redactedForLogs) \(response.body.count) bytes \(milliseconds) ms")
    }
}

extension HTTPResponse {
    /// The status as a typed value.
    public var statusCode: HTTPStatus { HTTPStatus(rawValue: status) }
}
