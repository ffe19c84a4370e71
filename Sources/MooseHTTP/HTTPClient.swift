#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import Logging

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

/// When and how to retry.
public struct RetryPolicy: Sendable {
    /// How long to wait between attempts.
    public enum Backoff: Sendable {
        /// The same delay every time.
        case constant(TimeInterval)
        /// `base × 2^(attempt-1)`, capped at `maximum`.
        case exponential(base: TimeInterval, maximum: TimeInterval)
    }

    /// Attempts in all, the first included (1: never retry).
    public var maxAttempts: Int
    /// The delay schedule.
    public var backoff: Backoff
    /// Randomise each delay between 50% and 100% (spreads out herds of clients).
    public var jitter: Bool
    /// Statuses worth another try.
    public var retryableStatuses: Set<Int>
    /// Honour the server's `Retry-After` (seconds or an HTTP date), up to `maximumRetryAfter`.
    public var honoursRetryAfter: Bool
    /// The longest `Retry-After` honoured; longer ones fail instead of waiting.
    public var maximumRetryAfter: TimeInterval

    /// A policy: by default three attempts, exponential backoff from 0.5 s with jitter, for
    /// 408/429/500/502/503/504 and transport errors.
    public init(maxAttempts: Int = 3, backoff: Backoff = .exponential(base: 0.5, maximum: 8), jitter: Bool = true,
                retryableStatuses: Set<Int> = [408, 429, 500, 502, 503, 504], honoursRetryAfter: Bool = true,
                maximumRetryAfter: TimeInterval = 60) {
        self.maxAttempts = maxAttempts
        self.backoff = backoff
        self.jitter = jitter
        self.retryableStatuses = retryableStatuses
        self.honoursRetryAfter = honoursRetryAfter
        self.maximumRetryAfter = maximumRetryAfter
    }

    /// Never retry.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// The delay before attempt `attempt + 1`.
    public func delay(after attempt: Int) -> TimeInterval {
        var delay: TimeInterval
        switch backoff {
        case .constant(let value): delay = value
        case .exponential(let base, let maximum): delay = min(maximum, base * pow2(attempt - 1))
        }
        if jitter { delay *= Double.random(in: 0.5...1.0) }
        return delay
    }

    private func pow2(_ exponent: Int) -> Double { Double(1 << max(0, min(exponent, 30))) }

    /// `Retry-After` as seconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3). Any
    /// answer is finite and at most one day (`86400`); a value too large to read counts as a day.
    public static func retryAfter(_ value: String?, now: Date = Date()) -> TimeInterval? {
        guard let value = value?.trimmed(), !value.isEmpty else { return nil }
        let bytes = Array(value.utf8)
        if bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            // delta-seconds = 1*DIGIT: long runs of digits are simply "a very long time".
            guard bytes.count <= 9, let seconds = HTTPDate.digits(bytes, count: 1...9) else { return Self.maximumRetryAfterValue }
            return min(TimeInterval(seconds), Self.maximumRetryAfterValue)
        }
        guard let date = HTTPDate.parse(value) else { return nil }
        let delta = date.timeIntervalSince(now)
        return delta.isFinite ? min(max(0, delta), Self.maximumRetryAfterValue) : nil
    }

    /// The largest delay `retryAfter` reports (one day); `maximumRetryAfter` caps what a retry waits.
    public static let maximumRetryAfterValue: TimeInterval = 86_400
}

/// A small, complete HTTP client: endpoints in, models out; interceptors, retry, cancellation,
/// status validation, server-error mapping and redacted logging.
///
/// ```swift
/// let client = HTTPClient(transport: URLSessionTransport())
/// let user: User = try await client.decode(User.self, from: UsersAPI.user(id: "42"))
/// ```
public struct HTTPClient: Sendable {
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
                logger: Logger = Logger(label: "moose.http")) {
        self.transport = transport
        self.builder = builder
        self.interceptors = interceptors
        self.retryPolicy = retryPolicy
        self.logger = logger
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

/// A loosely typed JSON value, for responses without a model.
public enum JSON: Sendable, Hashable, Decodable {
    /// `null`
    case null
    /// `true`/`false`
    case bool(Bool)
    /// A number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSON])
    /// An object.
    case object([String: JSON])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSON].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSON].self)) }
    }

    /// The member `key` of an object.
    public subscript(key: String) -> JSON? { if case .object(let members) = self { members[key] } else { nil } }
    /// The string, if this is one.
    public var string: String? { if case .string(let value) = self { value } else { nil } }
    /// The number, if this is one.
    public var number: Double? { if case .number(let value) = self { value } else { nil } }
}

/// IMF-fixdate (RFC 9110 §5.6.7), the format of `Date` and `Retry-After`.
public enum HTTPDate {
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Parses an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT` (RFC 9110 §5.6.7); `nil` otherwise.
    /// Every field is bounded before any arithmetic: year 1–9999, day 1–31, hour 0–23, minute 0–59,
    /// second 0–60 (a hostile `Date: … 99999999 …` is refused, never trapped on).
    public static func parse(_ text: String) -> Date? {
        let parts = text.utf8.split(separator: 0x20)
        guard parts.count == 6, parts[5].elementsEqual("GMT".utf8),
              let day = digits(parts[1], count: 1...2), (1...31).contains(day),
              let month = months.firstIndex(where: { $0.utf8.elementsEqual(parts[2]) }),
              let year = digits(parts[3], count: 4...4), year >= 1 else { return nil }
        let time = parts[4].split(separator: 0x3A, omittingEmptySubsequences: false)
        guard time.count == 3, let hour = digits(time[0], count: 2...2), let minute = digits(time[1], count: 2...2),
              let second = digits(time[2], count: 2...2), hour < 24, minute < 60, second <= 60 else { return nil }
        let days = daysFromCivil(year, Int64(month + 1), day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second))
    }

    /// The decimal value of `bytes` when it is `count` ASCII digits, else `nil`.
    static func digits(_ bytes: some Collection<UInt8>, count: ClosedRange<Int>) -> Int64? {
        guard count.contains(bytes.count) else { return nil }
        var value: Int64 = 0
        for byte in bytes {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int64(byte - 0x30)
        }
        return value
    }

    /// Formats a date as IMF-fixdate. Total: dates before year 1 or after 9999 (or not finite) are
    /// clamped to those years' ends.
    public static func format(_ date: Date) -> String {
        let raw = date.timeIntervalSince1970
        let seconds = raw.isNaN ? 0 : Int64(min(max(raw, -62_135_596_800), 253_402_300_799))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = seconds - days * 86_400
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][Int(((days % 7) + 7) % 7)]
        let (y, m, d) = civilFromDays(days)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(weekday), \(two(d)) \(months[Int(m) - 1]) \(y) \(two(rest / 3600)):\(two(rest % 3600 / 60)):\(two(rest % 60)) GMT"
    }

    static func daysFromCivil(_ year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        return era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
    }

    static func civilFromDays(_ days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
