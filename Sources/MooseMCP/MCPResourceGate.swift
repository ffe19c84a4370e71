#if MooseMCP
// MooseMCP, server side: an MCP server built with the Swift SDK's HTTP server transports, protected as
// the MCP authorization specification (2025-11-25) asks — by MooseResourceServer's verifier.
import Foundation
public import MCP
public import MooseResourceServer
import Synchronization

/// The door of an MCP server built with the Swift SDK's HTTP server transports: every request passes
/// `ResourceServer.verify` (RFC 9068 JWTs or RFC 7662 introspection, Bearer or DPoP with its proof) before
/// the transport sees it, as the MCP authorization specification (2025-11-25) asks of a server:
///
/// - no or a bad token: 401 with `WWW-Authenticate` naming `resource_metadata` (RFC 9728 §5.1) — set
///   `ResourceServerConfiguration.resourceMetadataURL` to `metadataURL` — and, for DPoP, `DPoP-Nonce`;
///   a token lacking a required scope: 403 `insufficient_scope` with the scope needed;
/// - the token's audience is this server (`aud` contains `ResourceServerConfiguration.resource`, the
///   canonical URI of the MCP endpoint; for introspected tokens, set `introspectedTokensNeedAudience`);
/// - the RFC 9728 document is served at its well-known path, unauthenticated;
/// - the transport never sees the credentials: `Authorization` and `DPoP` are removed from the request it
///   gets (no token passthrough), and the verified caller is looked up with `principal(for:)`.
///
/// The SDK runs a tool's handler in a task of its own, not the one calling `handleRequest`, so a task-local
/// set here would not reach it; the handler finds its caller through the request the SDK hands it:
///
/// ```swift
/// let gate = MCPResourceGate(server: resourceServer, document: document, publicBaseURL: "https://mcp.example.com",
///                            requiredScopes: ["mcp"])
/// await server.withMethodHandler(CallTool.self) { call in
///     let caller = gate.principal(for: Server.currentHandlerContext?.httpContext)
///     return CallTool.Result(content: [.text(text: "hello \(caller?.subject ?? "?")", annotations: nil, _meta: nil)])
/// }
/// // In the HTTP server, for every request to the MCP endpoint and to the metadata path:
/// let response = await gate.handle(request) { await transport.handleRequest($0) }
/// ```
public final class MCPResourceGate: Sendable {
    /// The verifier (its configuration's `resource` is the MCP endpoint's canonical URI).
    public let server: ResourceServer
    /// The RFC 9728 document served at `document.wellKnownPath`; `nil` when served elsewhere.
    public let document: ProtectedResourceDocument?
    /// The scheme and authority clients address (`https://mcp.example.com`, no trailing slash): a DPoP
    /// proof's `htu` names the URL the client used, which behind a proxy is not the one this process sees.
    public let publicBaseURL: String
    /// Scopes every request needs.
    public let requiredScopes: [String]

    /// The header carrying the key of a request's principal to the transport (and its handler). Any
    /// value a client sends under this name is removed first.
    public static let principalHeader = "Moose-Principal-Key"

    /// Principals of requests the transport is handling, by the key in `principalHeader`.
    private let principals = Mutex<[String: VerifiedPrincipal]>([:])

    /// A gate verifying with `server` and serving `document` (when given) at its well-known path.
    ///
    /// - Parameters:
    ///   - server: the verifier; give its configuration `resourceMetadataURL: document.url`.
    ///   - document: the RFC 9728 document; its `resource` should equal the configuration's `resource`.
    ///   - publicBaseURL: scheme and authority as clients address this server, without a trailing slash.
    ///   - requiredScopes: scopes every request needs (403 `insufficient_scope` otherwise).
    public init(
        server: ResourceServer, document: ProtectedResourceDocument? = nil, publicBaseURL: String,
        requiredScopes: [String] = []
    ) {
        self.server = server
        self.document = document
        self.publicBaseURL = publicBaseURL
        self.requiredScopes = requiredScopes
    }

    /// What the gate decided about one request.
    public enum Decision: Sendable {
        /// Answer with this (a refusal, or the RFC 9728 document); the transport is not called.
        case respond(HTTPResponse)
        /// Pass `request` — the original without `Authorization` and `DPoP` — on; `principal` is the caller.
        case admit(HTTPRequest, VerifiedPrincipal)
    }

    /// Verifies `request`, or answers it: the RFC 9728 document for a `GET` of its well-known path, a
    /// refusal (status, `WWW-Authenticate`, `DPoP-Nonce`, a JSON-RPC error body) for bad credentials.
    public func decide(_ request: HTTPRequest) async -> Decision {
        if let metadata = metadataResponse(for: request) { return .respond(metadata) }
        let authorization = Self.headerValue(request, "Authorization")
        let dpop = Self.headerValue(request, "DPoP")
        do {
            let principal = try await server.verify(
                authorizationHeader: authorization, dpopHeader: dpop, method: request.method,
                url: publicBaseURL + Self.pathWithoutQuery(request.path), requiredScopes: requiredScopes)
            return .admit(Self.stripped(request), principal)
        } catch {
            return .respond(Self.response(for: error))
        }
    }

    /// Verifies `request` and, if admitted, hands it to `next` (the transport's `handleRequest`) with the
    /// caller's key in `principalHeader`, so that `principal(for:)` finds the caller while the request is
    /// handled — for a streamed answer, until its stream ends. With DPoP nonces on, the answer carries
    /// `DPoP-Nonce` (RFC 9449 §9).
    ///
    /// One `Server` on one `StatelessHTTPServerTransport` behind this is not safe for several users with
    /// the MCP Swift SDK 0.12.1: that transport matches answers to requests by JSON-RPC id across all
    /// connections (two clients' `"id": 1` can swap answers), and the server answers only the first
    /// `initialize`. Use `serve(_:validationPipeline:makeServer:)`, which gives each request a server and
    /// a transport of its own, or `MCPSessions`, a server and a `StatefulHTTPServerTransport` per MCP
    /// session bound to the caller who opened it; `handle` is for a transport that keeps clients apart.
    ///
    /// ```swift
    /// let response = await gate.handle(request) { await transport.handleRequest($0) }
    /// ```
    public func handle(_ request: HTTPRequest, next: (HTTPRequest) async -> HTTPResponse) async -> HTTPResponse {
        switch await decide(request) {
        case .respond(let response): return response
        case .admit(let admitted, let principal): return await forward(admitted, principal, to: next)
        }
    }

    /// Hands an admitted request to `next` with `principal`'s key in `principalHeader` (for
    /// `principal(for:)`, until the answer — or its stream — ends), and adds `DPoP-Nonce` to the answer.
    func forward(
        _ admitted: HTTPRequest, _ principal: VerifiedPrincipal, to next: (HTTPRequest) async -> HTTPResponse
    ) async -> HTTPResponse {
        let key = UUID().uuidString
        principals.withLock { $0[key] = principal }
        var headers = admitted.headers
        headers[Self.principalHeader] = key
        let forwarded = HTTPRequest(method: admitted.method, headers: headers, body: admitted.body, path: admitted.path)
        var response = await next(forwarded)
        if let nonce = await server.currentNonce() { response = Self.adding(["DPoP-Nonce": nonce], to: response) }
        guard case .stream(let stream, let streamHeaders) = response else {
            principals.withLock { $0[key] = nil }
            return response
        }
        // The handler may run after `next` returned: forget the principal when the stream ends.
        return .stream(forgetting(key, after: stream), headers: streamHeaders)
    }

    /// Serves one request with an MCP server of its own, made by `makeServer` for the request's verified
    /// caller and started on a `StatelessHTTPServerTransport` of its own, then stopped once it answered: the
    /// caller is bound to the HTTP request, not to a JSON-RPC id, so concurrent requests of different users
    /// can never receive each other's answers, and every client's `initialize` is answered (a server shared
    /// by all requests answers only the first). Refusals and the RFC 9728 document are answered as by
    /// `decide(_:)`; the transport never sees `Authorization` or `DPoP`. With DPoP nonces on, the answer
    /// carries `DPoP-Nonce` (RFC 9449 §9).
    ///
    /// ```swift
    /// let response = await gate.serve(request) { caller in
    ///     let server = Server(name: "my-server", version: "1.0", capabilities: .init(tools: .init()))
    ///     await server.withMethodHandler(CallTool.self) { _ in
    ///         CallTool.Result(content: [.text(text: "hello \(caller.subject)", annotations: nil, _meta: nil)])
    ///     }
    ///     return server
    /// }
    /// ```
    ///
    /// A server made per request keeps nothing between requests (the stateless transport's model): no
    /// session, no server-initiated messages; a notification is accepted (202) and may not reach a handler.
    ///
    /// - Parameters:
    ///   - request: the HTTP request to the MCP endpoint or to the RFC 9728 document's path.
    ///   - validationPipeline: the transport's request validation; `nil`: the SDK's default (origin
    ///     localhost, `Accept`, `Content-Type`, protocol version).
    ///   - makeServer: makes the MCP server (its handlers registered, not started) for the verified caller.
    /// - Returns: the answer: a refusal, the document, or the MCP server's; 500 when the server cannot be
    ///   made or started.
    public func serve(
        _ request: HTTPRequest, validationPipeline: (any HTTPRequestValidationPipeline)? = nil,
        makeServer: (VerifiedPrincipal) async throws -> Server
    ) async -> HTTPResponse {
        switch await decide(request) {
        case .respond(let response): return response
        case .admit(let admitted, let principal):
            let server: Server
            let transport = StatelessHTTPServerTransport(validationPipeline: validationPipeline)
            do {
                server = try await makeServer(principal)
                try await server.start(transport: transport)
            } catch {
                return .error(statusCode: 500, .internalError("the MCP server could not be started"))
            }
            var response = await transport.handleRequest(admitted)
            // The stateless transport answers with the whole JSON-RPC response (never a stream): done.
            await server.stop()
            if let nonce = await self.server.currentNonce() {
                response = Self.adding(["DPoP-Nonce": nonce], to: response)
            }
            return response
        }
    }

    /// The caller of a request `handle` admitted and is still handling — pass
    /// `Server.currentHandlerContext?.httpContext` from a method handler; `nil` for any other request.
    public func principal(for request: HTTPRequest?) -> VerifiedPrincipal? {
        guard let request, let key = Self.headerValue(request, Self.principalHeader) else { return nil }
        return principals.withLock { $0[key] }
    }

    /// The RFC 9728 document as a response when `request` is a `GET` of its well-known path (exactly, query
    /// ignored), else `nil`.
    public func metadataResponse(for request: HTTPRequest) -> HTTPResponse? {
        guard let document, let path = document.wellKnownPath, request.method.uppercased() == "GET",
            Self.pathWithoutQuery(request.path).utf8.elementsEqual(path.utf8)
        else { return nil }
        return .data(
            Data(document.json.utf8), headers: ["Content-Type": "application/json", "Cache-Control": "max-age=3600"])
    }

    /// The answer to a refusal: its status; its challenges in one `WWW-Authenticate` field (the SDK's
    /// headers are a dictionary; RFC 9110 §11.6.1 allows a comma-separated list); `DPoP-Nonce`;
    /// `Cache-Control: no-store`; and a JSON-RPC error body that says what kind of refusal it is, never why.
    public static func response(for refusal: ResourceServerRefusal) -> HTTPResponse {
        var headers: [String: String] = ["Cache-Control": "no-store"]
        if !refusal.wwwAuthenticate.isEmpty {
            headers["WWW-Authenticate"] = refusal.wwwAuthenticate.joined(separator: ", ")
        }
        for header in refusal.headers where header.name == "DPoP-Nonce" { headers[header.name] = header.value }
        let message: String
        switch refusal.status {
        case 400: message = "Bad Request: malformed credentials"
        case 403: message = "Forbidden: insufficient scope"
        case 503: message = "Service Unavailable: the credentials cannot be checked now"
        default: message = "Unauthorized"
        }
        let error: MCPError = refusal.status == 503 ? .internalError(message) : .invalidRequest(message)
        return .error(statusCode: refusal.status, error, extraHeaders: headers)
    }

    // MARK: - Requests

    /// Every value of header `name` (any case) joined with commas, as RFC 9110 §5.3 combines repeated
    /// fields: a request whose dictionary holds `authorization` and `Authorization` gets both, which the
    /// verifier refuses as malformed, rather than whichever the dictionary yields first.
    static func headerValue(_ request: HTTPRequest, _ name: String) -> String? {
        let values = request.headers.filter {
            $0.key.utf8.count == name.utf8.count && $0.key.lowercased() == name.lowercased()
        }
        .sorted { $0.key < $1.key }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// `request` without `Authorization`, `DPoP` and `principalHeader` (in any case).
    static func stripped(_ request: HTTPRequest) -> HTTPRequest {
        let removed: Set<String> = ["authorization", "dpop", principalHeader.lowercased()]
        let headers = request.headers.filter { !removed.contains($0.key.lowercased()) }
        return HTTPRequest(method: request.method, headers: headers, body: request.body, path: request.path)
    }

    /// The path part of a request target (`/mcp?x=1` → `/mcp`; none → `/`): `htu` has no query (RFC 9449 §4.3).
    static func pathWithoutQuery(_ path: String?) -> String {
        guard let path, !path.isEmpty else { return "/" }
        let end = path.firstIndex { $0 == "?" || $0 == "#" } ?? path.endIndex
        return String(path[..<end])
    }

    static func adding(_ extra: [String: String], to response: HTTPResponse) -> HTTPResponse {
        func merged(_ headers: [String: String]) -> [String: String] { headers.merging(extra) { _, new in new } }
        switch response {
        case .accepted(let headers): return .accepted(headers: merged(headers))
        case .ok(let headers): return .ok(headers: merged(headers))
        case .data(let data, let headers): return .data(data, headers: merged(headers))
        case .stream(let stream, let headers): return .stream(stream, headers: merged(headers))
        case .error(let status, let error, let session, let headers):
            return .error(statusCode: status, error, sessionID: session, extraHeaders: merged(headers))
        }
    }

    private func forgetting(_ key: String, after stream: AsyncThrowingStream<Data, any Error>) -> AsyncThrowingStream<
        Data, any Error
    > {
        let (relayed, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
        let relay = Task {
            do {
                for try await chunk in stream { continuation.yield(chunk) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { [self] _ in
            relay.cancel()
            principals.withLock { $0[key] = nil }
        }
        return relayed
    }
}
#endif
