#if MooseMCP
// MooseMCPTransport: the MCP streamable HTTP transport (2025-11-25) on Moose's HTTP stack, reading
// both answers a server may give a POST — application/json and text/event-stream — on every
// platform. The SDK's own HTTPClientTransport does not decode SSE on Linux (swift-corelibs-foundation
// has no URLSession.bytes, and SDK 0.12.1 hands the raw stream to the client).
public import Foundation
public import MCP
public import MooseHTTP
import MooseOAuth
public import Logging
import HTTPTypes
import MooseURLSession

/// The MCP streamable HTTP transport (specification 2025-11-25) on Moose: give it the server's URL
/// and a `MooseMCPAuthorizer`, and an MCP SDK `Client` talks to any MCP server over HTTP — on Linux
/// too, where the SDK's `HTTPClientTransport` cannot read a server's `text/event-stream` answers.
///
/// ```swift
/// let authorizer = try MooseMCPAuthorizer(serverURL: url, storage: storage, login: .loopback { url in SystemBrowser().open(url) })
/// let client = Client(name: "my-app", version: "1.0")
/// _ = try await client.connect(transport: MooseMCPTransport(endpoint: url, authorizer: authorizer))
/// ```
///
/// - **Messages.** Each JSON-RPC message is a POST (`Accept: application/json, text/event-stream`).
///   A server may answer `application/json` (one message or a batch) or `text/event-stream`: the
///   events (notifications, server requests, then the response) go to the client one by one, in order.
///   `202 Accepted` (for notifications and responses) carries nothing.
/// - **Session.** The `MCP-Session-Id` the server assigns is sent with every later request (and a
///   `DELETE` ends the session on `disconnect()`); a 404 for it means the session ended: the error
///   says so and the next `initialize` starts a new one. After `initialize`, the version the server
///   chose goes in `MCP-Protocol-Version`.
/// - **Authorization.** The authorizer's rules — discovery on the first 401, registration, login,
///   one refresh for any number of rejected requests (this transport knows which token each request
///   carried), step-up on 403 `insufficient_scope` — and its token presented with Moose's one
///   presenter: `Authorization: Bearer …`, or for a DPoP-bound token `Authorization: DPoP …` with a
///   fresh proof per request (a server's `use_dpop_nonce` is answered once with a new proof; MooseMCP's
///   logins ask for bearer tokens today, so this path is not exercised by its tests). When
///   the attempts (`maxAuthorizationAttempts`) are spent, a 401 throws `OAuthError.tokenRejected` and
///   a 403 `insufficient_scope` throws `OAuthError.insufficientScope`, both with the response's
///   `status` and parsed `challenges`; a failed login or refresh throws `MCPAuthorizationError`.
/// - **Hostile servers.** Event streams are parsed with bounds (an event, or a JSON answer, up to
///   16 MiB); the session id must be visible ASCII (at most 1,024 bytes) and the protocol version a
///   short token, else the request fails rather than echo them in a header. Redirects are not
///   followed (Moose's transports never do).
/// - **Limits.** Moose's `HTTPTransport` hands over whole bodies: a POST's event stream is read when
///   the server ends it (the specification has servers end it after the response), so a server that
///   sends the client a request *inside* a POST's stream and waits for the answer before finishing
///   that stream stalls until `requestTimeout`. The optional standalone `GET` stream (server-initiated
///   messages outside any request) is not opened.
public actor MooseMCPTransport: Transport {
    /// The MCP endpoint (the server's URL; with an authorizer, the RFC 8707 resource).
    public nonisolated let endpoint: URL
    /// The authorization: tokens, refresh, login, step-up (`nil`: requests go without a token).
    public nonisolated let authorizer: MooseMCPAuthorizer?
    /// The time allowed for one exchange (a POST and its whole answer), in seconds.
    public nonisolated let requestTimeout: TimeInterval
    /// Logs requests and failures (never a token, a session id or a message body).
    public nonisolated let logger: Logger
    /// The session id the server assigned (`MCP-Session-Id`), once it did.
    public private(set) var sessionID: String?
    /// The protocol version the server chose in its `initialize` answer, sent as `MCP-Protocol-Version`.
    public private(set) var protocolVersion: String?

    private let http: any HTTPTransport
    private let limits: ServerSentEventParser.Limits
    private let messages: AsyncThrowingStream<Data, any Error>
    private let continuation: AsyncThrowingStream<Data, any Error>.Continuation
    private var isConnected = false
    /// The id of the `initialize` request in flight, whose answer names the protocol version.
    private var initializeID: ID?

    /// The longest session id echoed back.
    static let maximumSessionIDLength = 1024

    /// A transport to the MCP server at `endpoint`.
    ///
    /// - Parameters:
    ///   - authorizer: the OAuth side (see `MooseMCPAuthorizer`); `nil` for a server without authorization.
    ///   - transport: the HTTP client for MCP traffic; default: a `URLSessionTransport` allowing
    ///     `requestTimeout` (pass a `CurlTransport`, an AsyncHTTPClient transport… of your own).
    ///   - requestTimeout: the time allowed for one request and its answer (a tool call may run long).
    ///   - logger: where requests and failures are logged.
    public init(
        endpoint: URL, authorizer: MooseMCPAuthorizer? = nil, transport: (any HTTPTransport)? = nil,
        requestTimeout: TimeInterval = 300, logger: Logger? = nil
    ) {
        self.init(
            endpoint: endpoint, authorizer: authorizer, transport: transport, requestTimeout: requestTimeout,
            limits: ServerSentEventParser.Limits(), logger: logger)
    }

    init(
        endpoint: URL, authorizer: MooseMCPAuthorizer?, transport: (any HTTPTransport)?, requestTimeout: TimeInterval,
        limits: ServerSentEventParser.Limits, logger: Logger?
    ) {
        self.endpoint = endpoint
        self.authorizer = authorizer
        let timeout = requestTimeout.isFinite ? min(max(requestTimeout, 1), 86_400) : 300
        self.requestTimeout = timeout
        self.http =
            transport ?? URLSessionTransport(configuration: .init(requestTimeout: timeout, resourceTimeout: timeout))
        self.limits = limits
        self.logger = logger ?? Logger(label: "moose.mcp.transport", factory: { _ in SwiftLogNoOpLogHandler() })
        (messages, continuation) = AsyncThrowingStream.makeStream(of: Data.self)
    }

    /// Starts the transport (nothing goes out until the client sends `initialize`).
    public func connect() async throws {
        isConnected = true
    }

    /// Ends the session at the server (`DELETE` with the session id; best effort) and finishes `receive()`.
    public func disconnect() async {
        guard isConnected else { return }
        isConnected = false
        if let sessionID {
            var request = APIRequest(method: .delete, url: endpoint, timeout: min(requestTimeout, 10))
            request.headerFields[Self.sessionIDField] = sessionID
            if let protocolVersion { request.headerFields[Self.protocolVersionField] = protocolVersion }
            do {
                let token = authorizer?.token(for: endpoint)
                if let token {
                    request.headerFields.append(
                        contentsOf: try token.authorizationFields(method: .delete, url: endpoint))
                }
                let answer = try await http.send(request)
                logger.debug("MCP session ended", metadata: ["status": "\(answer.status.code)"])
            } catch {
                logger.debug("MCP session end failed", metadata: ["error": "\(error)"])
            }
        }
        sessionID = nil
        continuation.finish()
    }

    /// The messages from the server, one JSON-RPC message (or batch) each, in the order they came.
    public func receive() -> AsyncThrowingStream<Data, any Error> { messages }

    /// POSTs one JSON-RPC message (or batch) and hands what the server answers to `receive()`.
    ///
    /// - Throws: `MCPError` for a transport or protocol failure (the status, a session that ended, an
    ///   unreadable event stream), `OAuthError.tokenRejected` / `.insufficientScope` when the server
    ///   still refuses the token after the authorizer's attempts, `MCPAuthorizationError` when a login
    ///   or refresh failed.
    public func send(_ data: Data) async throws {
        guard isConnected else { throw MCPError.internalError("Transport not connected") }
        let outgoing = Self.outline(data)
        if let id = outgoing.initializeID {
            initializeID = id
            // A new session: what the old one negotiated no longer holds.
            sessionID = nil
            protocolVersion = nil
        }
        if let authorizer {
            try authorizer.validateEndpointSecurity(for: endpoint)
            // Discovery and a refresh before expiry; a failure here is met again (and thrown) below.
            try? await authorizer.prepare(for: endpoint)
        }
        let response = try await exchange(data, operation: outgoing.method)
        try accept(response)
    }

    // MARK: - One request, with authorization

    private func exchange(_ data: Data, operation: String?) async throws -> APIResponse {
        let maximumAttempts = max(1, authorizer?.maxAuthorizationAttempts ?? 1)
        var attempts = 0
        while true {
            let token = authorizer?.token(for: endpoint)
            // The one nonce rule (RFC 9449 §9) every Moose sender follows: a DPoP-bound token's request
            // asked for a nonce is sent once more, with a proof carrying it.
            let response = try await DPoPNonces.send(
                to: endpoint, canResend: token?.isDPoPBound == true, asksForNonce: DPoPNonces.asksForNonce,
                nonce: { $0.headerFields[.dpopNonce] }
            ) {
                try await post(data, token: token)
            }
            let status = response.status.code
            guard status == 401 || status == 403 else { return response }
            let values = response.headerFields[values: .wwwAuthenticate]
            attempts += 1
            // Only for the server the authorizer's tokens are for: another one gets neither a token nor a login.
            if let authorizer, attempts < maximumAttempts, authorizer.serves(endpoint),
                try await authorizer.respond(
                    to: status, challenge: ResourceChallenge.parse(values), sent: .some(token), operation: operation)
            {
                continue
            }
            throw Self.refusal(status: status, wwwAuthenticate: values, tokenSent: token != nil, attempts: attempts)
        }
    }

    /// One POST of `data` presenting `token` (a DPoP-bound one with a proof made now).
    private func post(_ data: Data, token: AccessToken?) async throws -> APIResponse {
        var request = APIRequest(method: .post, url: endpoint, body: data, timeout: requestTimeout)
        request.headerFields[.accept] = "application/json, text/event-stream"
        request.headerFields[.contentType] = "application/json"
        if let sessionID { request.headerFields[Self.sessionIDField] = sessionID }
        if let protocolVersion { request.headerFields[Self.protocolVersionField] = protocolVersion }
        if let token {
            do {
                request.headerFields.append(contentsOf: try token.authorizationFields(method: .post, url: endpoint))
            } catch {
                throw MCPAuthorizationError(
                    error as? OAuthError ?? OAuthError(OAuthError.unsafeValue, "the access token cannot be presented"))
            }
        }
        do {
            return try await http.send(request)
        } catch let error as CancellationError {
            throw error
        } catch {
            throw MCPError.internalError("the MCP request to \(endpoint.redactedForLogs) failed: \(error)")
        }
    }

    /// The error for a 401 or 403 that stands.
    static func refusal(status: Int, wwwAuthenticate values: [String], tokenSent: Bool, attempts: Int) -> any Error {
        let challenges = AuthenticationChallenge.parse(values)
        if status == 401 {
            let message =
                tokenSent
                ? "the MCP server refused the access token (401) after \(attempts) attempt\(attempts == 1 ? "" : "s") with a refreshed or new one"
                : "the MCP server requires authorization (401) and no token could be sent (none for this server)"
            return OAuthError(OAuthError.tokenRejected, message, status: status, challenges: challenges)
        }
        let challenge = ResourceChallenge.parse(values)
        if let error = challenge?.error, error.utf8.elementsEqual("insufficient_scope".utf8) {
            let scope = challenge?.scopes?.joined(separator: " ")
            return OAuthError(
                OAuthError.insufficientScope,
                "the MCP server refused the request for lack of scope\(scope.map { " (it needs \"\($0)\")" } ?? "") and no step-up was left",
                oauthError: "insufficient_scope", status: status, scope: scope, challenges: challenges)
        }
        return MCPError.internalError("the MCP server refused the request (403)")
    }

    // MARK: - Answers

    private func accept(_ response: APIResponse) throws {
        let status = response.status.code
        if let value = response.headerFields[Self.sessionIDField] {
            guard Self.isValidSessionID(value) else {
                throw MCPError.internalError(
                    "the server's MCP-Session-Id is not visible ASCII of at most \(Self.maximumSessionIDLength) bytes")
            }
            sessionID = value
        }
        switch status {
        case 200..<300:
            break
        case 404 where sessionID != nil:
            sessionID = nil
            protocolVersion = nil
            throw MCPError.internalError(
                "the MCP session ended (404): connect again (a new initialize starts a new session)")
        default:
            throw MCPError.internalError("the MCP server answered \(status)")
        }
        guard status != 202, !response.body.isEmpty else { return }
        let type = Self.mediaType(response.headerFields[.contentType])
        if type.elementsEqual("text/event-stream".utf8) {
            var parser = ServerSentEventParser(limits: limits)
            let events: [ServerSentEvent]
            do {
                events = try parser.feed(response.body)
            } catch {
                throw MCPError.internalError("the MCP server's event stream was refused: \(error)")
            }
            if parser.finish() {
                logger.debug("an incomplete event at the end of the MCP server's event stream was dropped")
            }
            for event in events where event.type.utf8.elementsEqual("message".utf8) && !event.data.isEmpty {
                deliver(Data(event.data.utf8))
            }
        } else if type.elementsEqual("application/json".utf8) {
            guard response.body.count <= limits.maximumEventSize else {
                throw MCPError.internalError(
                    "the MCP server's JSON answer is larger than \(limits.maximumEventSize) bytes")
            }
            deliver(response.body)
        } else {
            throw MCPError.internalError("the MCP server answered \(status) with an unexpected content type")
        }
    }

    private func deliver(_ message: Data) {
        if let id = initializeID, let version = Self.negotiatedVersion(in: message, answering: id) {
            initializeID = nil
            protocolVersion = version
        }
        continuation.yield(message)
    }

    // MARK: - Reading messages (bounded, total)

    static let sessionIDField = HTTPField.Name("MCP-Session-Id")!
    static let protocolVersionField = HTTPField.Name("MCP-Protocol-Version")!

    /// The MCP rule: visible ASCII (0x21–0x7E), here at most 1,024 bytes.
    package static func isValidSessionID(_ value: String) -> Bool {
        let bytes = value.utf8
        return !bytes.isEmpty && bytes.count <= maximumSessionIDLength
            && bytes.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// A protocol version fit for a header: 1–64 bytes of letters, digits, `.`, `-`, `_`.
    package static func isValidProtocolVersion(_ value: String) -> Bool {
        let bytes = value.utf8
        return !bytes.isEmpty && bytes.count <= 64
            && bytes.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2E
                    || $0 == 0x2D || $0 == 0x5F
            }
    }

    /// `type/subtype` of a `Content-Type`, lowercased, without parameters or spaces.
    package static func mediaType(_ value: String?) -> [UInt8] {
        guard let value else { return [] }
        let bytes = value.utf8.prefix { $0 != 0x3B }.filter { $0 != 0x20 && $0 != 0x09 }
        return bytes.map { (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }
    }

    private struct Outgoing: Decodable {
        let id: ID?
        let method: String?
    }

    private struct InitializeAnswer: Decodable {
        struct Result: Decodable { let protocolVersion: String? }
        let id: ID?
        let result: Result?
    }

    /// The JSON-RPC method of an outgoing message (the step-up's operation key) and, for an
    /// `initialize` request, its id. A batch or anything else: neither.
    static func outline(_ data: Data) -> (method: String?, initializeID: ID?) {
        guard data.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }) == 0x7B,
            let message = try? JSONDecoder().decode(Outgoing.self, from: data), let method = message.method
        else { return (nil, nil) }
        return (method, method.utf8.elementsEqual("initialize".utf8) ? message.id : nil)
    }

    /// The `protocolVersion` of the answer to request `id`, when `message` is that answer and the
    /// version is fit for a header.
    static func negotiatedVersion(in message: Data, answering id: ID) -> String? {
        guard let answer = try? JSONDecoder().decode(InitializeAnswer.self, from: message), answer.id == id,
            let version = answer.result?.protocolVersion, isValidProtocolVersion(version)
        else { return nil }
        return version
    }
}
#endif
