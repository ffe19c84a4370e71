#if MooseMCP
// MooseMCP, server side: the MCP Swift SDK's stateful transport behind MCPResourceGate — one Server and
// one StatefulHTTPServerTransport per MCP session, each session bound to the caller who opened it.
import Foundation
public import MCP
import MooseCrypto
public import MooseResourceServer
import Synchronization

/// MCP sessions behind an `MCPResourceGate`, on the Swift SDK's `StatefulHTTPServerTransport` (streamed
/// answers, server-initiated messages, `Mcp-Session-Id`): every admitted `initialize` without a session id
/// opens a session — an MCP `Server` made by `makeServer` for the verified caller, started on a transport
/// of its own — and every later request names it with `Mcp-Session-Id`.
///
/// A session belongs to the caller who opened it (the token's issuer, subject and client): a request
/// whose verified caller is anyone else is answered 404, exactly as an unknown session id is, and never
/// reaches the session (so neither its answers nor a `DELETE` do). Session ids are compared byte for byte
/// and made by this type (256 bits of `SecureRandom`), never by the client.
///
/// ```swift
/// let sessions = MCPSessions(gate: gate) { caller in
///     let server = Server(name: "my-server", version: "1.0", capabilities: .init(tools: .init()))
///     await server.withMethodHandler(CallTool.self) { _ in
///         CallTool.Result(content: [.text(text: "hello \(caller.subject)", annotations: nil, _meta: nil)])
///     }
///     return server
/// }
/// // In the HTTP server, for every request to the MCP endpoint and to the metadata path:
/// let response = await sessions.handle(request)
/// // Now and then (a timer): end sessions nobody used for `idleTimeout`.
/// await sessions.closeIdleSessions()
/// ```
///
/// - **Bounds.** At most `maximumSessions` sessions (an `initialize` beyond: 503, after idle sessions are
///   closed) and `maximumSessionsPerCaller` per caller (beyond: that caller's least recently used session
///   is closed), so one token cannot fill the table.
/// - **End.** A `DELETE` with the session id ends it (the SDK's answer, 200); so does `closeIdleSessions()`
///   for sessions with no request for `idleTimeout` (a client's next request is then 404, and it starts a
///   new session, as the MCP specification says). A standalone `GET` stream counts as used when it opens.
/// - **Streams.** Every streamed answer of a session (a `POST`'s, the `GET` stream) ends when the session
///   ends, and a stream the SDK's transport replaced — a `GET` with `Last-Event-ID`, a request reusing a
///   JSON-RPC id — ends when it is replaced: the transport (0.12.1) forgets such a stream without ending it,
///   which would leave its HTTP connection's task waiting for ever. A stream whose client went away ends
///   with its session at the latest (the HTTP server cannot tell before it writes to it).
/// - **Caller.** `makeServer` gets the caller who opened the session; in a handler,
///   `gate.principal(for: Server.currentHandlerContext?.httpContext)` is the caller of the current request
///   (the same user, with the scopes of the token it presented this time).
public final class MCPSessions: Sendable {
    /// The gate every request passes first.
    public let gate: MCPResourceGate
    /// The most sessions open at once.
    public let maximumSessions: Int
    /// The most sessions one caller (issuer, subject, client) has open at once.
    public let maximumSessionsPerCaller: Int
    /// How long a session may go without a request before `closeIdleSessions()` ends it.
    public let idleTimeout: Duration

    private let validationPipeline: (any HTTPRequestValidationPipeline)?
    private let makeServer: @Sendable (VerifiedPrincipal) async throws -> Server
    private let state = Mutex(State())

    /// Who opened a session: compared byte for byte.
    struct Owner: Sendable {
        let issuer: String
        let subject: String
        let clientID: String

        init(_ principal: VerifiedPrincipal) {
            issuer = principal.issuer
            subject = principal.subject
            clientID = principal.clientID
        }

        func matches(_ other: Owner) -> Bool {
            issuer.utf8.elementsEqual(other.issuer.utf8) && subject.utf8.elementsEqual(other.subject.utf8)
                && clientID.utf8.elementsEqual(other.clientID.utf8)
        }
    }

    struct Session: Sendable {
        let server: Server
        let transport: StatefulHTTPServerTransport
        let streams: Streams
        let owner: Owner
        var lastUsed: ContinuousClock.Instant

        /// Stops the server (the transport ends the streams it knows) and ends every stream left.
        func end() async {
            await server.stop()
            streams.endAll()
        }
    }

    struct State {
        var sessions: [[UInt8]: Session] = [:]
        /// Sessions being opened: counted against `maximumSessions`.
        var opening = 0
    }

    /// The transport's session id generator: the id this type chose.
    struct FixedSessionID: SessionIDGenerator {
        let id: String
        func generateSessionID() -> String { id }
    }

    /// Sessions behind `gate`, each with a server made by `makeServer` for the caller who opened it.
    ///
    /// - Parameters:
    ///   - gate: the gate (verifier, RFC 9728 document, required scopes).
    ///   - maximumSessions: the most sessions open at once; at least 1.
    ///   - maximumSessionsPerCaller: the most sessions per caller; at least 1.
    ///   - idleTimeout: how long a session may go unused before `closeIdleSessions()` ends it.
    ///   - validationPipeline: each transport's request validation; `nil`: the SDK's default (origin
    ///     localhost, `Accept` with `text/event-stream`, `Content-Type`, protocol version, session).
    ///   - makeServer: makes a session's MCP server (handlers registered, not started) for its caller.
    public init(
        gate: MCPResourceGate, maximumSessions: Int = 1024, maximumSessionsPerCaller: Int = 16,
        idleTimeout: Duration = .seconds(900), validationPipeline: (any HTTPRequestValidationPipeline)? = nil,
        makeServer: @escaping @Sendable (VerifiedPrincipal) async throws -> Server
    ) {
        self.gate = gate
        self.maximumSessions = max(1, maximumSessions)
        self.maximumSessionsPerCaller = max(1, maximumSessionsPerCaller)
        self.idleTimeout = idleTimeout
        self.validationPipeline = validationPipeline
        self.makeServer = makeServer
    }

    /// The number of open sessions.
    public var count: Int { state.withLock { $0.sessions.count } }

    /// Answers one request to the MCP endpoint (or the RFC 9728 document's path): the gate's refusal or
    /// document; for an admitted `initialize` without `Mcp-Session-Id`, a new session's answer; for a
    /// request naming a session of its caller, that session's answer; 404 for a session that is unknown,
    /// ended, or another caller's; 400 for any other request without a session id.
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        switch await gate.decide(request) {
        case .respond(let response): return response
        case .admit(let admitted, let principal):
            guard let sessionID = MCPResourceGate.headerValue(admitted, HTTPHeaderName.sessionID) else {
                guard admitted.method.uppercased() == "POST", Self.isInitialize(admitted.body) else {
                    return .error(statusCode: 400, .invalidRequest("Bad Request: Missing Mcp-Session-Id header"))
                }
                return await open(admitted, principal)
            }
            return await resume(sessionID, admitted, principal)
        }
    }

    /// Ends the sessions with no request for `idleTimeout`; returns how many.
    @discardableResult
    public func closeIdleSessions() async -> Int {
        let now = ContinuousClock.now
        let idle = state.withLock { state in
            let keys = state.sessions.filter { now - $0.value.lastUsed >= idleTimeout }.map(\.key)
            return keys.compactMap { state.sessions.removeValue(forKey: $0) }
        }
        for session in idle { await session.end() }
        return idle.count
    }

    /// Ends every session (at shutdown).
    public func closeAll() async {
        let all = state.withLock { state in
            defer { state.sessions.removeAll() }
            return Array(state.sessions.values)
        }
        for session in all { await session.end() }
    }

    // MARK: - Opening and resuming

    private func open(_ request: HTTPRequest, _ principal: VerifiedPrincipal) async -> HTTPResponse {
        let owner = Owner(principal)
        let (admitted, closed) = reserve(for: owner)
        for session in closed { await session.end() }
        guard admitted else {
            return .error(
                statusCode: 503, .internalError("Service Unavailable: too many sessions"),
                extraHeaders: ["Retry-After": "5"])
        }
        guard let id = Self.newSessionID() else {
            state.withLock { $0.opening -= 1 }
            return .error(statusCode: 500, .internalError("no session id: the random source failed"))
        }
        let streams = Streams()
        let transport = StatefulHTTPServerTransport(
            sessionIDGenerator: FixedSessionID(id: id), validationPipeline: validationPipeline)
        let server: Server
        do {
            server = try await makeServer(principal)
            try await server.start(transport: transport)
        } catch {
            state.withLock { $0.opening -= 1 }
            await transport.disconnect()
            return .error(statusCode: 500, .internalError("the MCP server could not be started"))
        }
        let response = streams.relay(
            await gate.forward(request, principal) { await transport.handleRequest($0) }, key: Self.streamKey(request))
        let opened = response.statusCode < 300
        state.withLock { state in
            state.opening -= 1
            if opened {
                state.sessions[Array(id.utf8)] = Session(
                    server: server, transport: transport, streams: streams, owner: owner, lastUsed: .now)
            }
        }
        if !opened {
            await server.stop()
            streams.endAll()
        }
        return response
    }

    /// Makes room for a session of `owner`: closes idle sessions and, at the caller's limit, its least
    /// recently used one; reserves a place unless the table is full. Returns whether it did, and the
    /// sessions taken out (to stop).
    private func reserve(for owner: Owner) -> (Bool, [Session]) {
        let now = ContinuousClock.now
        return state.withLock { state in
            var closed: [Session] = []
            for (key, session) in state.sessions where now - session.lastUsed >= idleTimeout {
                state.sessions[key] = nil
                closed.append(session)
            }
            let own = state.sessions.filter { $0.value.owner.matches(owner) }
            if own.count >= maximumSessionsPerCaller {
                let oldest = own.sorted { $0.value.lastUsed < $1.value.lastUsed }.prefix(
                    own.count - maximumSessionsPerCaller + 1)
                for (key, session) in oldest {
                    state.sessions[key] = nil
                    closed.append(session)
                }
            }
            guard state.sessions.count + state.opening < maximumSessions else { return (false, closed) }
            state.opening += 1
            return (true, closed)
        }
    }

    private func resume(_ sessionID: String, _ request: HTTPRequest, _ principal: VerifiedPrincipal) async
        -> HTTPResponse
    {
        let owner = Owner(principal)
        let key = Array(sessionID.utf8)
        let session: Session? = state.withLock { state in
            // Ids are 64 hex digits: anything longer is no id of this table (and is not hashed).
            guard key.count <= 64, var session = state.sessions[key], session.owner.matches(owner) else { return nil }
            session.lastUsed = .now
            state.sessions[key] = session
            return session
        }
        guard let session else {
            return .error(statusCode: 404, .invalidRequest("Not Found: Session not found or expired"))
        }
        let response = session.streams.relay(
            await gate.forward(request, principal) { await session.transport.handleRequest($0) },
            key: Self.streamKey(request))
        let ended =
            (request.method.uppercased() == "DELETE" && response.statusCode < 300) || response.statusCode == 404
        if ended {
            let removed = state.withLock { $0.sessions.removeValue(forKey: key) }
            await removed?.end()
        }
        return response
    }

    // MARK: - Helpers

    /// 256 bits of `SecureRandom` as 64 lowercase hex digits (visible ASCII, as the MCP specification asks);
    /// `nil` if the random source fails.
    static func newSessionID() -> String? {
        guard let bytes = try? SecureRandom.bytes(count: 32) else { return nil }
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0f)]] }, as: UTF8.self)
    }

    /// The transport's stream (SDK 0.12.1) that `request`'s streamed answer is: a `POST`'s is its JSON-RPC
    /// id's (the SDK's rendering: a string as it is, an integer in decimal); a `GET`'s is the standalone
    /// stream, or with `Last-Event-ID` the stream that event was on (the id is `<stream>_<counter>`).
    static func streamKey(_ request: HTTPRequest) -> String? {
        switch request.method.uppercased() {
        case "POST":
            guard let body = request.body,
                let message = try? JSONSerialization.jsonObject(with: body) as? [String: Any]
            else { return nil }
            if let id = message["id"] as? String { return "request " + id }
            return (message["id"] as? Int).map { "request \($0)" }
        case "GET":
            guard let event = MCPResourceGate.headerValue(request, HTTPHeaderName.lastEventID),
                let separator = event.lastIndex(of: "_")
            else { return standaloneStream }
            let stream = String(event[..<separator])
            return stream == "_GET_stream" ? standaloneStream : "request " + stream
        default: return nil
        }
    }

    /// The key of the standalone `GET` stream.
    static let standaloneStream = "GET"

    /// Whether `body` is one JSON-RPC `initialize` request.
    static func isInitialize(_ body: Data?) -> Bool {
        struct Probe: Decodable {
            let method: String?
        }
        guard let body, let probe = try? JSONDecoder().decode(Probe.self, from: body) else { return false }
        return probe.method == "initialize"
    }

    // MARK: - Streams

    /// The streamed answers a session handed out, each relayed so that the session can end it: the SDK's
    /// transport (0.12.1) ends only the streams it still writes to, and forgets — without ending — one that a
    /// `GET` with `Last-Event-ID`, or a request reusing a JSON-RPC id, replaced. Such a stream would keep
    /// its HTTP connection's task waiting for ever, after its session too.
    final class Streams: Sendable {
        private let state = Mutex<(ended: Bool, open: [ObjectIdentifier: Relay])>((false, [:]))

        /// `response`, its stream (if any) relayed under `key` (the transport's stream: a JSON-RPC id, or
        /// `standaloneStream`); a stream relayed before under the same key is ended. After `endAll()`, a
        /// stream answer is ended at once.
        func relay(_ response: HTTPResponse, key: String?) -> HTTPResponse {
            guard case .stream(let source, let headers) = response else { return response }
            let relay = Relay(key: key)
            let id = ObjectIdentifier(relay)
            let (ended, replaced) = state.withLock { state -> (Bool, [Relay]) in
                guard !state.ended else { return (true, []) }
                let replaced = key == nil ? [] : state.open.values.filter { $0.key == key }
                for old in replaced { state.open[ObjectIdentifier(old)] = nil }
                state.open[id] = relay
                return (false, replaced)
            }
            for old in replaced { old.end() }
            if ended {
                relay.end()
            } else {
                relay.start(source) { [weak self] in _ = self?.state.withLock { $0.open.removeValue(forKey: id) } }
            }
            return .stream(relay.stream, headers: headers)
        }

        /// Ends every stream relayed, and every one relayed from now on.
        func endAll() {
            let open = state.withLock { state in
                state.ended = true
                defer { state.open.removeAll() }
                return Array(state.open.values)
            }
            for relay in open { relay.end() }
        }
    }

    /// One relayed stream: a task copies the transport's stream into `stream` until either ends.
    final class Relay: Sendable {
        let key: String?
        let stream: AsyncThrowingStream<Data, any Error>
        private let continuation: AsyncThrowingStream<Data, any Error>.Continuation
        private let pump = Mutex<(task: Task<Void, Never>?, ended: Bool)>((nil, false))

        init(key: String?) {
            self.key = key
            (stream, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
        }

        /// Starts copying `source`; `done` runs when the copy stops (the source or `stream` ended).
        func start(_ source: AsyncThrowingStream<Data, any Error>, done: @escaping @Sendable () -> Void) {
            let continuation = self.continuation
            let task = Task {
                do {
                    for try await chunk in source {
                        if case .terminated = continuation.yield(chunk) { break }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
                done()
            }
            continuation.onTermination = { _ in task.cancel() }
            if pump.withLock({ pump in
                pump.task = task; return pump.ended
            }) {
                task.cancel()
            }
        }

        /// Ends `stream` (its reader sees the end) and stops the copy: the transport's stream is let go.
        func end() {
            let task = pump.withLock { pump in
                pump.ended = true
                return pump.task
            }
            task?.cancel()
            continuation.finish()
        }
    }
}
#endif
