#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import MooseJWT
import MooseCrypto

/// An introspection that could not give an answer (the endpoint failed, or said something unusable).
/// The request is then refused as `temporarilyUnavailable`: a token is never accepted in doubt.
public struct IntrospectionError: Error, Sendable, CustomStringConvertible {
    /// What went wrong; never contains the token.
    public let message: String
    /// The HTTP status the endpoint answered with, when that was the fault (not 200): a 4xx refuses the
    /// resource server's own client (its id, secret or authentication method), a 5xx is the
    /// endpoint's outage. `nil` for an answer that came with 200 and could not be used.
    public let status: Int?

    init(message: String, status: Int? = nil) {
        self.message = message
        self.status = status
    }

    /// The message.
    public var description: String { message }
}

/// What an authorization server said about a token (RFC 7662 §2.2). Only active answers carry claims.
public struct IntrospectionAnswer: Sendable {
    /// `active`: whether the token is currently valid at its issuer.
    public let active: Bool
    /// The answer's members (`scope`, `client_id`, `sub`, `exp`, `aud`, `iss`, `cnf`…), the registered
    /// ones type-checked like a JWT's claims; empty for an inactive token.
    public let claims: JWTClaims

    /// The largest answer read, in bytes.
    public static let maximumSize = 64 * 1024

    /// Parses an introspection response. Anything but a 200 with a JSON object whose `active` is a
    /// boolean is an error (never an active token); `active: false` is inactive, whatever else it says.
    ///
    /// - Parameters:
    ///   - status: the HTTP status of the answer.
    ///   - body: the answer's body (at most `maximumSize` bytes are accepted).
    /// - Throws: `IntrospectionError` for a status other than 200, a body over `maximumSize`, one that is
    ///   not a JSON object with a boolean `active`, or a registered member of the wrong type.
    public static func parse(status: Int, body: [UInt8]) throws(IntrospectionError) -> IntrospectionAnswer {
        guard status == 200 else {
            throw IntrospectionError(message: "the introspection endpoint answered HTTP \(status)", status: status)
        }
        guard body.count <= maximumSize else {
            throw IntrospectionError(message: "the introspection answer is over \(maximumSize) bytes")
        }
        guard case .object(let object)? = try? JSONValue(parsing: body) else {
            throw IntrospectionError(message: "the introspection answer is not a JSON object")
        }
        guard let active = object["active"]?.boolValue else {
            throw IntrospectionError(message: "the introspection answer has no boolean \"active\"")
        }
        guard active else { return IntrospectionAnswer(active: false, claims: Self.empty) }
        do { return IntrospectionAnswer(active: true, claims: try JWTClaims(object)) } catch {
            throw IntrospectionError(
                message: "the introspection answer's \(error.field ?? "claims") has the wrong type")
        }
    }

    private static let empty: JWTClaims = {
        guard let claims = try? JWTClaims([:]) else { preconditionFailure("an empty claim set is valid") }
        return claims
    }()
}

/// Where a resource server asks about opaque tokens. `TokenIntrospector` is the RFC 7662 client;
/// a test or another mechanism can stand in.
public protocol AccessTokenIntrospector: Sendable {
    /// The issuer's answer about `token`. Throws when there is none to be had (never "inactive" in doubt).
    func introspect(_ token: String) async throws -> IntrospectionAnswer
}

/// Asks an authorization server about opaque tokens (RFC 7662), with a cache and one request per
/// token at a time.
///
/// - Active answers are kept until the token's `exp`, and never longer than `maximumActiveAge`;
///   inactive ones for `inactiveAge` (so a flood of bad tokens does not become a flood of requests,
///   and a newly issued token is not refused for long). The cache holds at most `capacity` answers,
///   keyed by the token's SHA-256 (the token itself is never kept).
/// - Concurrent requests with the same new token make one introspection call and share its answer.
///
/// ```swift
/// let introspector = TokenIntrospector(endpoint: URL(string: "https://id.example.com/introspect")!,
///                                      clientID: "api", clientSecret: secret, transport: CurlTransport())
/// let server = ResourceServer(configuration: configuration, keys: keys, introspector: introspector)
/// ```
public actor TokenIntrospector: AccessTokenIntrospector {
    /// How the resource server authenticates to the endpoint (RFC 6749 §2.3.1).
    public enum ClientAuthentication: Sendable {
        /// `client_secret_basic`: HTTP Basic with the form-encoded id and secret.
        case basic
        /// `client_secret_post`: `client_id` and `client_secret` in the body.
        case post
    }

    private let endpoint: URL
    private let clientID: String
    private let clientSecret: String
    private let authentication: ClientAuthentication
    private let transport: any HTTPTransport
    private let maximumActiveAge: TimeInterval
    private let inactiveAge: TimeInterval
    private let capacity: Int
    private let clock: @Sendable () -> Date
    private var cache: [[UInt8]: (answer: IntrospectionAnswer, until: Date)] = [:]
    private var inFlight: [[UInt8]: Task<IntrospectionAnswer, any Error>] = [:]
    /// How many introspection requests were sent (for tests and diagnostics).
    public private(set) var requestCount = 0

    /// An introspector for `endpoint`, authenticating as `clientID`.
    ///
    /// - Parameters:
    ///   - endpoint: the authorization server's introspection endpoint.
    ///   - clientID: the resource server's client id there.
    ///   - clientSecret: its secret, sent as `authentication` says.
    ///   - authentication: `client_secret_basic` (the default) or `client_secret_post`.
    ///   - transport: what sends the requests (no retries).
    ///   - maximumActiveAge: the longest an active answer is cached, in seconds (default 60; also never
    ///     past the token's `exp`).
    ///   - inactiveAge: how long an inactive answer is cached, in seconds (default 5).
    ///   - capacity: the most answers cached (default 10 000; at least 1).
    ///   - clock: the current time; default: the system's.
    public init(
        endpoint: URL, clientID: String, clientSecret: String, authentication: ClientAuthentication = .basic,
        transport: any HTTPTransport, maximumActiveAge: TimeInterval = 60, inactiveAge: TimeInterval = 5,
        capacity: Int = 10_000, clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.endpoint = endpoint
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.authentication = authentication
        self.transport = transport
        self.maximumActiveAge = max(0, maximumActiveAge)
        self.inactiveAge = max(0, inactiveAge)
        self.capacity = max(1, capacity)
        self.clock = clock
    }

    /// The answer for `token`: cached, joined to a request in flight, or asked for.
    ///
    /// - Parameter token: the opaque access token (only its SHA-256 is kept).
    /// - Returns: the answer; an inactive token is an answer (`active` false), not an error.
    /// - Throws: `IntrospectionError` for an answer that is not usable (see `parse(status:body:)`); the
    ///   transport's error (an `HTTPRequestError`) when the endpoint cannot be reached.
    public func introspect(_ token: String) async throws -> IntrospectionAnswer {
        let key = DigestAlgorithm.sha256.hash(Array(token.utf8))
        let now = clock()
        if let hit = cache[key] {
            if hit.until > now { return hit.answer }
            cache[key] = nil
        }
        if let running = inFlight[key] { return try await running.value }
        let request = self.request(for: token)
        let transport = self.transport
        // Set before the first await (actors are re-entrant): a second caller joins this task.
        let task = Task { () throws -> IntrospectionAnswer in
            let response = try await transport.send(request)
            return try IntrospectionAnswer.parse(
                status: response.status.code, body: Array(response.body.prefix(IntrospectionAnswer.maximumSize + 1)))
        }
        inFlight[key] = task
        requestCount += 1
        defer { inFlight[key] = nil }
        let answer = try await task.value
        remember(answer, for: key)
        return answer
    }

    private func remember(_ answer: IntrospectionAnswer, for key: [UInt8]) {
        let now = clock()
        var until = now.addingTimeInterval(answer.active ? maximumActiveAge : inactiveAge)
        if answer.active, let exp = answer.claims.expiresAt, exp < until { until = exp }
        guard until > now else { return }
        if cache.count >= capacity {
            cache = cache.filter { $0.value.until > now }
            // Still full: drop the entry that ends soonest (a cache miss costs a request, not safety).
            if cache.count >= capacity, let soonest = cache.min(by: { $0.value.until < $1.value.until })?.key {
                cache[soonest] = nil
            }
        }
        cache[key] = (answer, until)
    }

    private func request(for token: String) -> APIRequest {
        var fields = [("token", token), ("token_type_hint", "access_token")]
        var request = APIRequest(method: .post, url: endpoint)
        switch authentication {
        case .basic:
            let credentials = RequestBuilder.formEncode(clientID) + ":" + RequestBuilder.formEncode(clientSecret)
            request.headerFields[.authorization] = "Basic " + Data(credentials.utf8).base64EncodedString()
        case .post:
            fields += [("client_id", clientID), ("client_secret", clientSecret)]
        }
        request.headerFields[.contentType] = "application/x-www-form-urlencoded"
        request.headerFields[.accept] = "application/json"
        request.body = Data(RequestBuilder.encodeForm(fields).utf8)
        return request
    }
}
