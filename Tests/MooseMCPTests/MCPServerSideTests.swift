#if MooseMCP
import Foundation
import MCP
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseMCP
import MooseOAuth
import MooseResourceServer
import MooseTestSupport
import MooseURLSession
import Synchronization
import Testing

/// A Swift MCP server (the SDK's `Server` on its `StatelessHTTPServerTransport`, hosted over HTTP on
/// swift-nio) with one tool, protected by `MCPResourceGate` — tokens from the django-oauth-toolkit test
/// IdP (opaque, RFC 8707-bound, checked by RFC 7662 introspection), presented by the Python MCP SDK's own
/// OAuth client and by plain HTTP requests. And `ResourceServerValidator` in the SDK's synchronous
/// pipeline, with JWTs whose keys are published over HTTP and rotated mid-test.
@Suite(.serialized) struct MCPServerSideTests {
    /// The IdP's endpoints (tools/idp; `$MOOSE_IDP_ISSUER` when tools/test started it).
    struct IdP {
        let issuer: String
        let token: URL
        let introspection: URL

        static func discover(_ transport: URLSessionTransport) async throws -> IdP {
            let issuer = TestIdentityProvider.issuer
            let url = try #require(URL(string: issuer + "/.well-known/oauth-authorization-server"))
            let metadata = try JSONValue(parsing: Array(try await transport.send(APIRequest(url: url)).body))
            return IdP(
                issuer: issuer, token: try #require(metadata["token_endpoint"]?.stringValue.flatMap(URL.init(string:))),
                introspection: try #require(metadata["introspection_endpoint"]?.stringValue.flatMap(URL.init(string:))))
        }

        /// A client-credentials token of `moose-service`, bound to `resource` when given (RFC 8707).
        func serviceToken(scope: String, resource: String?, _ transport: URLSessionTransport) async throws -> String {
            var form = [("grant_type", "client_credentials"), ("scope", scope)]
            if let resource { form.append(("resource", resource)) }
            var request = APIRequest(method: .post, url: token, body: Data(RequestBuilder.encodeForm(form).utf8))
            request.headerFields[.contentType] = "application/x-www-form-urlencoded"
            request.headerFields[.authorization] =
                "Basic " + Data("moose-service:moose-service-secret".utf8).base64EncodedString()
            let response = try await transport.send(request)
            #expect(response.status.code == 200, "token endpoint: \(response.status.code)")
            return try #require(try JSONValue(parsing: Array(response.body))["access_token"]?.stringValue)
        }
    }

    /// The whole server: host and gate (an MCP server per request, docs/mcp.md's setup). `resource` is
    /// `http://127.0.0.1:PORT/mcp`.
    final class Deployment: Sendable {
        let host: MCPTestHTTPHost
        let gate: MCPResourceGate
        let resource: String
        let metadataURL: String

        init(host: MCPTestHTTPHost, gate: MCPResourceGate, resource: String, metadataURL: String) {
            self.host = host
            self.gate = gate
            self.resource = resource
            self.metadataURL = metadataURL
        }

        func stop() async { await host.stop() }
    }

    /// A routing slot filled once the port (and so the resource identifier) is known.
    final class Routes: Sendable {
        let handler = Mutex<MCPTestHTTPHost.Handler?>(nil)
        func handle(_ request: MCP.HTTPRequest) async -> MCP.HTTPResponse {
            guard let handler = handler.withLock({ $0 }) else {
                return .error(statusCode: 503, .internalError("starting"))
            }
            return await handler(request)
        }
    }

    /// The `whoami` tool: the caller as the gate verified it, and whether the token reached the handler.
    static func mcpServer(caller: @escaping @Sendable (MCP.HTTPRequest?) -> VerifiedPrincipal?) async -> Server {
        let server = Server(name: "moose-protected", version: "1.0", capabilities: .init(tools: .init()))
        await server.withMethodHandler(ListTools.self) { _ in
            ListTools.Result(tools: [
                Tool(
                    name: "whoami", description: "Who the verified caller is", inputSchema: .object(["type": "object"]))
            ])
        }
        await server.withMethodHandler(CallTool.self) { call in
            let request = Server.currentHandlerContext?.httpContext
            let caller = caller(request)
            let passedOn = request?.headers.keys.contains { $0.lowercased() == "authorization" } ?? false
            let text =
                "\(caller?.subject ?? "nobody") via \(caller?.clientID ?? "-"); token passed on: \(passedOn ? "yes" : "no")"
            return CallTool.Result(content: [
                .text(text: call.name == "whoami" ? text : "unknown tool", annotations: nil, _meta: nil)
            ])
        }
        return server
    }

    /// Starts the protected MCP server for the IdP's tokens.
    static func deploy(_ idp: IdP, transport: URLSessionTransport) async throws -> Deployment {
        let routes = Routes()
        let host = try await MCPTestHTTPHost.start { await routes.handle($0) }
        let base = "http://127.0.0.1:\(host.port)"
        let resource = base + "/mcp"
        let document = ProtectedResourceDocument(
            resource: resource, authorizationServers: [idp.issuer], scopesSupported: ["read"],
            resourceName: "Moose test MCP server")
        var configuration = ResourceServerConfiguration(
            issuer: idp.issuer, resource: resource, algorithms: [.rs256, .es256])
        configuration.resourceMetadataURL = document.url
        configuration.introspectedTokensNeedAudience = true
        let introspector = TokenIntrospector(
            endpoint: idp.introspection, clientID: "moose-resource-server",
            clientSecret: "moose-resource-server-secret", transport: transport)
        // The IdP issues opaque tokens only: no JWT keys.
        let verifier = ResourceServer(
            configuration: configuration, keys: StaticAccessTokenKeys([]), introspector: introspector)
        let gate = MCPResourceGate(server: verifier, document: document, publicBaseURL: base, requiredScopes: ["read"])
        routes.handler.withLock { slot in
            slot = { request in await gate.serve(request) { principal in await mcpServer { _ in principal } } }
        }
        return Deployment(host: host, gate: gate, resource: resource, metadataURL: document.url ?? "")
    }

    /// An MCP `initialize` POST with `authorization` (if any).
    static func initialize(_ url: String, authorization: String?, _ transport: URLSessionTransport) async throws
        -> APIResponse
    {
        let body =
            #"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl-like","version":"1"}}}"#
        var request = APIRequest(method: .post, url: try #require(URL(string: url)), body: Data(body.utf8))
        request.headerFields[.contentType] = "application/json"
        request.headerFields[.accept] = "application/json, text/event-stream"
        if let authorization { request.headerFields[.authorization] = authorization }
        return try await transport.send(request)
    }

    /// An MCP `tools/call` of `whoami` with JSON-RPC id 1 (what every client of the test sends).
    static func callWhoami(_ url: String, authorization: String, _ transport: URLSessionTransport) async throws
        -> APIResponse
    {
        let body = #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}"#
        var request = APIRequest(method: .post, url: try #require(URL(string: url)), body: Data(body.utf8))
        request.headerFields[.contentType] = "application/json"
        request.headerFields[.accept] = "application/json, text/event-stream"
        if let version = HTTPField.Name("MCP-Protocol-Version") { request.headerFields[version] = "2025-06-18" }
        request.headerFields[.authorization] = authorization
        return try await transport.send(request)
    }

    /// `body`'s value, or `nil` when it has not finished after `seconds` (a hang).
    static func withDeadline<T: Sendable>(_ seconds: Int, _ body: @escaping @Sendable () async throws -> T)
        async throws -> T?
    {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// `withDeadline(30, body)`, an error thrown by `body` as its text.
    static func answerOrFailure(_ body: @escaping @Sendable () async throws -> String) async -> String? {
        do { return try await withDeadline(30, body) } catch { return "failed: \(error)" }
    }

    static func wwwAuthenticate(_ response: APIResponse) -> String {
        HTTPField.Name("WWW-Authenticate").flatMap { response.headerFields[$0] } ?? ""
    }

    /// tools/mcp's venv (mcp 2.3.0): `$MOOSE_MCP_VENV`, else the repository's, made by tools/mcp/start.
    static var python: String {
        if let venv = ProcessInfo.processInfo.environment["MOOSE_MCP_VENV"], !venv.isEmpty {
            return venv + "/bin/python"
        }
        let venv = LocalServer.repositoryRoot + "/tools/mcp/.state/venv/bin/python"
        if !FileManager.default.fileExists(atPath: venv) { _ = MCPTestServer.sse } // its start builds the venv
        return venv
    }

    // MARK: - (a) the challenge and the metadata

    @Test func noTokenIsAnswered401WithResourceMetadataAndTheDocumentIsServed() async throws {
        let transport = URLSessionTransport()
        let idp = try await IdP.discover(transport)
        let deployment = try await Self.deploy(idp, transport: transport)
        defer { Task { await deployment.stop() } }

        let refused = try await Self.initialize(deployment.resource, authorization: nil, transport)
        #expect(refused.status.code == 401)
        let challenge = Self.wwwAuthenticate(refused)
        #expect(challenge.hasPrefix("Bearer "))
        #expect(challenge.contains(#"resource_metadata="\#(deployment.metadataURL)""#), "\(challenge)")
        #expect(!challenge.contains("error="), "no credentials: no error code (RFC 6750 §3.1)")
        #expect(
            deployment.metadataURL
                == deployment.resource.replacingOccurrences(
                    of: "/mcp", with: "/.well-known/oauth-protected-resource/mcp"))

        let metadata = try await transport.send(APIRequest(url: try #require(URL(string: deployment.metadataURL))))
        #expect(metadata.status.code == 200)
        #expect(metadata.headerFields[.contentType] == "application/json")
        let document = try JSONValue(parsing: Array(metadata.body))
        #expect(document["resource"]?.stringValue == deployment.resource)
        #expect(document["authorization_servers"]?.arrayValue?.compactMap(\.stringValue) == [idp.issuer])
        #expect(document["scopes_supported"]?.arrayValue?.compactMap(\.stringValue) == ["read"])

        // A made-up token: invalid_token, still with resource_metadata.
        let forged = try await Self.initialize(
            deployment.resource, authorization: "Bearer not-a-token-\(UUID().uuidString)", transport)
        #expect(forged.status.code == 401)
        #expect(Self.wwwAuthenticate(forged).contains(#"error="invalid_token""#))
        #expect(Self.wwwAuthenticate(forged).contains("resource_metadata="))
    }

    // MARK: - (b) the Python MCP SDK's OAuth client

    @Test func thePythonSDKsOAuthClientDiscoversLogsInListsAndCallsTheTool() async throws {
        let transport = URLSessionTransport()
        let idp = try await IdP.discover(transport)
        let deployment = try await Self.deploy(idp, transport: transport)
        defer { Task { await deployment.stop() } }

        let script = LocalServer.repositoryRoot + "/tools/mcp/swift_server_client.py"
        let (status, output) = await runProcessOffThePool([Self.python, script, "oauth", deployment.resource])
        #expect(status == 0, "\(output)")
        let result = try JSONValue(parsing: Array(output.utf8))
        #expect(result["tools"]?.arrayValue?.compactMap(\.stringValue) == ["whoami"])
        // The principal reached the tool handler; the token did not.
        #expect(result["whoami"]?.stringValue == "alice via moose-cli; token passed on: no", "\(output)")
        #expect(result["isError"]?.boolValue == false)
        // The SDK's own discovery, from the 401: RFC 9728, RFC 8414, the login, the token, the retry.
        let requests = result["requests"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let origin = deployment.resource.replacingOccurrences(of: "/mcp", with: "")
        #expect(requests.first == "POST \(deployment.resource) -> 401", "\(requests)")
        #expect(requests.contains("GET \(origin)/.well-known/oauth-protected-resource/mcp -> 200"), "\(requests)")
        #expect(requests.contains("GET \(idp.issuer)/.well-known/oauth-authorization-server -> 200"), "\(requests)")
        #expect(requests.contains("POST \(idp.token.absoluteString) -> 200"), "\(requests)")
        #expect(requests.filter { $0 == "POST \(deployment.resource) -> 200" }.count >= 2, "\(requests)")
    }

    // MARK: - (c) audience and scope

    @Test func aTokenForAnotherAudienceIsRefusedAndOneForThisServerAccepted() async throws {
        let transport = URLSessionTransport()
        let idp = try await IdP.discover(transport)
        let deployment = try await Self.deploy(idp, transport: transport)
        defer { Task { await deployment.stop() } }

        let elsewhere = try await idp.serviceToken(scope: "read", resource: "http://other.example/mcp", transport)
        let refused = try await Self.initialize(deployment.resource, authorization: "Bearer \(elsewhere)", transport)
        #expect(refused.status.code == 401)
        #expect(Self.wwwAuthenticate(refused).contains(#"error="invalid_token""#))

        // Not bound to any resource (no aud in the introspection answer): refused too.
        let unbound = try await idp.serviceToken(scope: "read", resource: nil, transport)
        #expect(
            try await Self.initialize(deployment.resource, authorization: "Bearer \(unbound)", transport).status.code
                == 401)

        // The same client, the same scope, this server's resource: accepted, and the MCP server answers.
        let here = try await idp.serviceToken(scope: "read", resource: deployment.resource, transport)
        let accepted = try await Self.initialize(deployment.resource, authorization: "Bearer \(here)", transport)
        #expect(accepted.status.code == 200)
        #expect(
            try JSONValue(parsing: Array(accepted.body))["result"]?["serverInfo"]?["name"]?.stringValue
                == "moose-protected")

        // This server's resource without the scope it requires: 403 insufficient_scope naming it.
        let writer = try await idp.serviceToken(scope: "write", resource: deployment.resource, transport)
        let forbidden = try await Self.initialize(deployment.resource, authorization: "Bearer \(writer)", transport)
        #expect(forbidden.status.code == 403)
        #expect(Self.wwwAuthenticate(forbidden).contains(#"error="insufficient_scope""#))
        #expect(Self.wwwAuthenticate(forbidden).contains(#"scope="read""#))
    }

    // MARK: - (c2) users never cross

    /// docs/mcp.md's setup (`gate.serve`, an MCP server per request): alice and bob, 16 concurrent clients
    /// each, every one sending `initialize` then `tools/call whoami`, all with JSON-RPC id 1: every client
    /// is initialized, every answer names its own caller, none hangs. (One shared `Server` on one
    /// `StatelessHTTPServerTransport` answers one `initialize` only, and matches answers by JSON-RPC id.)
    @Test func twoUsersAt16ConcurrentRequestsEachGetOnlyTheirOwnAnswers() async throws {
        let issuer = "https://issuer.moose.test"
        let key = try PrivateKey.generate(.ec(.p256))
        let routes = Routes()
        let host = try await MCPTestHTTPHost.start { await routes.handle($0) }
        defer { Task { await host.stop() } }
        let base = "http://127.0.0.1:\(host.port)"
        let resource = base + "/mcp"
        var configuration = ResourceServerConfiguration(issuer: issuer, resource: resource, algorithms: [.es256])
        configuration.resourceMetadataURL = ProtectedResourceDocument.url(for: resource)
        let verifier = ResourceServer(
            configuration: configuration, keys: StaticAccessTokenKeys([try JWTKey(publicKey: key.publicKey())]))
        let gate = MCPResourceGate(
            server: verifier, document: ProtectedResourceDocument(for: verifier, scopesSupported: ["mcp"]),
            publicBaseURL: base, requiredScopes: ["mcp"])
        routes.handler.withLock { slot in
            slot = { request in await gate.serve(request) { caller in await Self.mcpServer { _ in caller } } }
        }
        func token(_ subject: String) throws -> String {
            let now = Int64(Date().timeIntervalSince1970)
            let claims: JSONObject = [
                "iss": .string(issuer), "sub": .string(subject), "aud": .string(resource), "client_id": "moose-app",
                "exp": .number(JSONNumber(now + 300)), "iat": .number(JSONNumber(now)),
                "jti": .string(UUID().uuidString), "scope": "mcp"
            ]
            return try JWTSigner(key: JWTKey(privateKey: key), algorithm: .es256).sign(
                claims, extraHeader: ["typ": "at+jwt"])
        }
        let transport = URLSessionTransport()
        let users = [("alice", try token("alice")), ("bob", try token("bob"))]
        let outcomes = try await withThrowingTaskGroup(of: (user: String, answer: String?).self) { group in
            for (user, token) in users {
                for _ in 0..<16 {
                    group.addTask {
                        // A request that fails (a transport timeout, say) counts as a wrong answer.
                        let answer = await Self.answerOrFailure {
                            let initialized = try await Self.initialize(
                                resource, authorization: "Bearer \(token)", transport)
                            let info = try? JSONValue(parsing: Array(initialized.body))["result"]?["serverInfo"]
                            guard initialized.status.code == 200, info?["name"]?.stringValue == "moose-protected" else {
                                return
                                    "initialize: \(initialized.status.code) \(String(decoding: initialized.body, as: UTF8.self))"
                            }
                            let called = try await Self.callWhoami(
                                resource, authorization: "Bearer \(token)", transport)
                            let result = try? JSONValue(parsing: Array(called.body))["result"]
                            return result?["content"]?.arrayValue?.first?["text"]?.stringValue
                                ?? "tools/call: \(called.status.code) \(String(decoding: called.body, as: UTF8.self))"
                        }
                        return (user, answer)
                    }
                }
            }
            var outcomes: [(user: String, answer: String?)] = []
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        #expect(outcomes.count == 32)
        let hangs = outcomes.filter { $0.answer == nil }
        let wrong = outcomes.filter { outcome in
            outcome.answer.map { $0 != "\(outcome.user) via moose-app; token passed on: no" } ?? false
        }
        #expect(hangs.isEmpty, "\(hangs.count) requests hung")
        #expect(wrong.isEmpty, "\(wrong.count) wrong answers, such as \(wrong.first.map { "\($0)" } ?? "")")
    }

    // MARK: - (c3) the stateful transport: a session per user

    /// An MCP endpoint of `MCPSessions` behind a gate, for JWTs of a local issuer key; `whoami` answers with
    /// the caller of the current request (`gate.principal(for:)`) when it is the session's opener, else
    /// "nobody".
    final class StatefulDeployment: Sendable {
        static let issuer = "https://issuer.moose.test"
        let host: MCPTestHTTPHost
        let sessions: MCPSessions
        let resource: String
        let key: PrivateKey
        /// The last server made for each subject (to send server-initiated messages from a test).
        let servers: Servers

        /// Servers by the subject they were made for.
        final class Servers: Sendable {
            let bySubject = Mutex<[String: Server]>([:])
        }

        init(host: MCPTestHTTPHost, sessions: MCPSessions, resource: String, key: PrivateKey, servers: Servers) {
            self.host = host
            self.sessions = sessions
            self.resource = resource
            self.key = key
            self.servers = servers
        }

        static func start(maximumSessions: Int = 64, perCaller: Int = 4, idle: Duration = .seconds(900)) async throws
            -> StatefulDeployment
        {
            let key = try PrivateKey.generate(.ec(.p256))
            let routes = Routes()
            let host = try await MCPTestHTTPHost.start { await routes.handle($0) }
            let base = "http://127.0.0.1:\(host.port)"
            var configuration = ResourceServerConfiguration(
                issuer: issuer, resource: base + "/mcp", algorithms: [.es256])
            configuration.resourceMetadataURL = ProtectedResourceDocument.url(for: base + "/mcp")
            let verifier = ResourceServer(
                configuration: configuration, keys: StaticAccessTokenKeys([try JWTKey(publicKey: key.publicKey())]))
            let gate = MCPResourceGate(
                server: verifier, document: ProtectedResourceDocument(for: verifier, scopesSupported: ["mcp"]),
                publicBaseURL: base, requiredScopes: ["mcp"])
            let servers = Servers()
            let sessions = MCPSessions(
                gate: gate, maximumSessions: maximumSessions, maximumSessionsPerCaller: perCaller, idleTimeout: idle
            ) { opener in
                let server = await MCPServerSideTests.mcpServer { request in
                    let current = gate.principal(for: request)
                    return current?.subject == opener.subject ? current : nil
                }
                servers.bySubject.withLock { $0[opener.subject] = server }
                return server
            }
            routes.handler.withLock { slot in slot = { request in await sessions.handle(request) } }
            return StatefulDeployment(
                host: host, sessions: sessions, resource: base + "/mcp", key: key, servers: servers)
        }

        func token(_ subject: String) throws -> String {
            let now = Int64(Date().timeIntervalSince1970)
            let claims: JSONObject = [
                "iss": .string(Self.issuer), "sub": .string(subject), "aud": .string(resource),
                "client_id": "moose-app", "exp": .number(JSONNumber(now + 300)), "iat": .number(JSONNumber(now)),
                "jti": .string(UUID().uuidString), "scope": "mcp"
            ]
            return try JWTSigner(key: JWTKey(privateKey: key), algorithm: .es256).sign(
                claims, extraHeader: ["typ": "at+jwt"])
        }

        func stop() async {
            await sessions.closeAll()
            await host.stop()
        }
    }

    /// A JSON-RPC POST (or a `DELETE`) to `url` with a token and, when given, `Mcp-Session-Id`.
    static func mcp(
        _ url: String, _ body: String, token: String, session: String? = nil, delete: Bool = false,
        _ transport: URLSessionTransport
    ) async throws -> APIResponse {
        var request = APIRequest(
            method: delete ? .delete : .post, url: try #require(URL(string: url)), body: Data(body.utf8))
        request.headerFields[.contentType] = "application/json"
        request.headerFields[.accept] = "application/json, text/event-stream"
        request.headerFields[.authorization] = "Bearer \(token)"
        if let version = HTTPField.Name("MCP-Protocol-Version") { request.headerFields[version] = "2025-06-18" }
        if let session, let name = HTTPField.Name("Mcp-Session-Id") { request.headerFields[name] = session }
        return try await transport.send(request)
    }

    /// The JSON-RPC message of an answer: its body, or the first `data:` of its server-sent events.
    static func message(_ response: APIResponse) -> JSONValue? {
        let text = String(decoding: response.body, as: UTF8.self)
        if let json = try? JSONValue(parsing: Array(text.utf8)) { return json }
        for line in text.split(separator: "\n") where line.hasPrefix("data: ") && line.count > 6 {
            if let json = try? JSONValue(parsing: Array(line.dropFirst(6).utf8)) { return json }
        }
        return nil
    }

    /// `initialize`, then `notifications/initialized`: the new session's id (nil, and an issue, if none).
    static func openSession(_ url: String, token: String, _ transport: URLSessionTransport) async throws -> String? {
        let initialize =
            #"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl-like","version":"1"}}}"#
        let opened = try await mcp(url, initialize, token: token, transport)
        let session = HTTPField.Name("Mcp-Session-Id").flatMap { opened.headerFields[$0] }
        #expect(opened.status.code == 200 && session != nil, "initialize: \(opened.status.code)")
        #expect(message(opened)?["result"]?["serverInfo"]?["name"]?.stringValue == "moose-protected")
        let initialized = #"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        let notified = try await mcp(url, initialized, token: token, session: session, transport)
        #expect(notified.status.code == 202)
        return session
    }

    /// `tools/call whoami` with JSON-RPC id `id` on `session`: the tool's text, or what came instead.
    static func whoami(_ url: String, id: Int = 1, token: String, session: String?, _ transport: URLSessionTransport)
        async throws -> String
    {
        let body = #"{"jsonrpc":"2.0","id":\#(id),"method":"tools/call","params":{"name":"whoami","arguments":{}}}"#
        let called = try await mcp(url, body, token: token, session: session, transport)
        return message(called)?["result"]?["content"]?.arrayValue?.first?["text"]?.stringValue
            ?? "\(called.status.code) \(String(decoding: called.body, as: UTF8.self))"
    }

    /// docs/mcp.md's stateful setup (`MCPSessions`: a `Server` and a `StatefulHTTPServerTransport` per MCP
    /// session): alice and bob each open a session and call `whoami` 8 times concurrently on it, with the
    /// same JSON-RPC ids 1…8: every answer names its own caller. Bob presenting alice's session id — to
    /// call, or to `DELETE` it — gets the 404 an unknown id gets, and her session goes on; an id differing
    /// in case only is unknown; her `DELETE` ends it.
    @Test func twoUsersWithAStatefulSessionEachNeverCrossAndASessionIdIsBoundToItsUser() async throws {
        let deployment = try await StatefulDeployment.start()
        defer { Task { await deployment.stop() } }
        let transport = URLSessionTransport()
        let url = deployment.resource
        let alice = try deployment.token("alice")
        let bob = try deployment.token("bob")
        let aliceSession = try #require(try await Self.openSession(url, token: alice, transport))
        let bobSession = try #require(try await Self.openSession(url, token: bob, transport))
        #expect(aliceSession != bobSession && deployment.sessions.count == 2)

        let users = [("alice", alice, aliceSession), ("bob", bob, bobSession)]
        let outcomes = try await withThrowingTaskGroup(of: (user: String, answer: String?).self) { group in
            for (user, token, session) in users {
                for id in 1...8 {
                    group.addTask {
                        let answer = await Self.answerOrFailure {
                            try await Self.whoami(url, id: id, token: token, session: session, transport)
                        }
                        return (user, answer)
                    }
                }
            }
            var outcomes: [(user: String, answer: String?)] = []
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        #expect(outcomes.count == 16)
        let wrong = outcomes.filter { $0.answer != "\($0.user) via moose-app; token passed on: no" }
        #expect(wrong.isEmpty, "\(wrong.count) wrong answers or hangs, such as \(wrong.first.map { "\($0)" } ?? "")")

        // Bob with alice's session id: the answer an unknown id gets; never hers.
        let unknown = try await Self.mcp(
            url, Self.whoamiBody, token: bob, session: String(repeating: "0", count: 64), transport)
        let stolen = try await Self.mcp(url, Self.whoamiBody, token: bob, session: aliceSession, transport)
        #expect(stolen.status.code == 404 && unknown.status.code == 404)
        // The same JSON-RPC error (its keys may come in any order), nothing of hers in it.
        let stolenError = Self.message(stolen)?["error"]
        let unknownError = Self.message(unknown)?["error"]
        #expect(stolenError?["message"]?.stringValue == "Invalid Request: Not Found: Session not found or expired")
        #expect(
            stolenError?["message"] == unknownError?["message"] && stolenError?["code"] == unknownError?["code"]
                && stolenError?["code"] != nil)
        #expect(!String(decoding: stolen.body, as: UTF8.self).contains("alice"))
        let deleted = try await Self.mcp(url, "", token: bob, session: aliceSession, delete: true, transport)
        #expect(deleted.status.code == 404)
        // Her session is still there, and still hers; an id differing in case only is not it.
        #expect(
            try await Self.whoami(url, token: alice, session: aliceSession, transport)
                == "alice via moose-app; token passed on: no")
        let upper = try await Self.mcp(
            url, Self.whoamiBody, token: alice, session: aliceSession.uppercased(), transport)
        #expect(upper.status.code == 404)
        // No session id on a request other than initialize: 400.
        #expect(try await Self.mcp(url, Self.whoamiBody, token: alice, transport).status.code == 400)
        // Her DELETE ends it.
        let ended = try await Self.mcp(url, "", token: alice, session: aliceSession, delete: true, transport)
        #expect(ended.status.code == 200 && deployment.sessions.count == 1)
        #expect(
            try await Self.mcp(url, Self.whoamiBody, token: alice, session: aliceSession, transport).status.code == 404)
        #expect(
            try await Self.whoami(url, token: bob, session: bobSession, transport)
                == "bob via moose-app; token passed on: no")
    }

    static let whoamiBody = #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}"#

    /// The table's bounds: a caller's sessions beyond its limit close its oldest; a full table answers
    /// 503; sessions unused for the idle timeout are ended by `closeIdleSessions()`.
    @Test func statefulSessionsAreBoundedAndEndWhenIdle() async throws {
        let deployment = try await StatefulDeployment.start(maximumSessions: 2, perCaller: 1, idle: .seconds(1))
        defer { Task { await deployment.stop() } }
        let transport = URLSessionTransport()
        let url = deployment.resource
        let alice = try deployment.token("alice")
        let first = try #require(try await Self.openSession(url, token: alice, transport))
        let second = try #require(try await Self.openSession(url, token: alice, transport))
        #expect(try await Self.mcp(url, Self.whoamiBody, token: alice, session: first, transport).status.code == 404)
        #expect(
            try await Self.whoami(url, token: alice, session: second, transport)
                == "alice via moose-app; token passed on: no")
        let bobSession = try #require(try await Self.openSession(url, token: try deployment.token("bob"), transport))
        #expect(deployment.sessions.count == 2)
        let initialize =
            #"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#
        let full = try await Self.mcp(url, initialize, token: try deployment.token("carol"), transport)
        #expect(full.status.code == 503 && deployment.sessions.count == 2)

        try await Task.sleep(for: .milliseconds(1200))
        #expect(await deployment.sessions.closeIdleSessions() == 2 && deployment.sessions.count == 0)
        #expect(try await Self.mcp(url, Self.whoamiBody, token: alice, session: second, transport).status.code == 404)
        _ = bobSession
    }

    // MARK: - (d) the synchronous validator

    /// JWTs from the test's own issuer key, its JWKS served over HTTP (slowly, on demand), rotated mid-test.
    @Test func theSynchronousValidatorRefusesAnUnknownKidAtOnceAndAcceptsItAfterTheBackgroundRefresh() async throws {
        let issuer = "https://issuer.moose.test"
        let first = try PrivateKey.generate(.ec(.p256))
        let second = try PrivateKey.generate(.ec(.p256))
        let published = Mutex<[JWK]>([try JWK(publicKey: first.publicKey(), keyID: "k1")])
        let jwksDelay = Mutex<Duration>(.zero)
        let routes = Routes()
        let host = try await MCPTestHTTPHost.start { await routes.handle($0) }
        let base = "http://127.0.0.1:\(host.port)"
        let resource = base + "/mcp"

        let transport = URLSessionTransport()
        let keys = WarmAccessTokenKeys(
            source: JWKSCache(url: try #require(URL(string: base + "/jwks")), transport: transport, cooldown: 0),
            unknownKeyCooldown: 0)
        var configuration = ResourceServerConfiguration(
            issuer: issuer, resource: resource, algorithms: [.es256], dpop: .disabled)
        configuration.resourceMetadataURL = base + "/.well-known/oauth-protected-resource/mcp"
        let validator = ResourceServerValidator(
            server: ResourceServer(configuration: configuration, keys: StaticAccessTokenKeys([])),
            keys: keys, requiredScopes: ["mcp"])
        let mcp = await Self.mcpServer { _ in nil }
        let mcpTransport = StatelessHTTPServerTransport(
            validationPipeline: StandardValidationPipeline(validators: [
                validator, OriginValidator.localhost(), AcceptHeaderValidator(mode: .jsonOnly), ContentTypeValidator(),
                ProtocolVersionValidator()
            ]))
        try await mcp.start(transport: mcpTransport)
        routes.handler.withLock { slot in
            slot = { request in
                guard request.path == "/jwks" else { return await mcpTransport.handleRequest(request) }
                try? await Task.sleep(for: jwksDelay.withLock { $0 })
                let document = JSONValue.object(["keys": .array(published.withLock { $0 }.map { .object($0.fields) })])
                    .serialized()
                return .data(Data(document.utf8), headers: ["Content-Type": "application/json"])
            }
        }
        defer {
            Task {
                await mcp.stop(); await host.stop()
            }
        }

        func token(_ key: PrivateKey, kid: String) throws -> String {
            let now = Int64(Date().timeIntervalSince1970)
            let claims: JSONObject = [
                "iss": .string(issuer), "sub": "bob", "aud": .string(resource), "client_id": "moose-app",
                "exp": .number(JSONNumber(now + 300)), "iat": .number(JSONNumber(now)),
                "jti": .string(UUID().uuidString),
                "scope": "mcp"
            ]
            return try JWTSigner(key: JWTKey(privateKey: key, keyID: kid), algorithm: .es256).sign(
                claims, extraHeader: ["typ": "at+jwt"])
        }

        try await keys.refresh()
        let known = try await Self.initialize(
            resource, authorization: "Bearer \(try token(first, kid: "k1"))", transport)
        #expect(known.status.code == 200)

        // Rotation: k2 is published, and the JWKS now takes 1.5 s to answer.
        let secondJWK = try JWK(publicKey: second.publicKey(), keyID: "k2")
        published.withLock { $0.append(secondJWK) }
        jwksDelay.withLock { $0 = .milliseconds(1500) }
        let rotated = try token(second, kid: "k2")
        let started = ContinuousClock.now
        let refused = try await Self.initialize(resource, authorization: "Bearer \(rotated)", transport)
        let waited = ContinuousClock.now - started
        #expect(refused.status.code == 401)
        #expect(Self.wwwAuthenticate(refused).contains(#"error="invalid_token""#))
        #expect(Self.wwwAuthenticate(refused).contains("resource_metadata="))
        #expect(waited < .milliseconds(1000), "the refusal waited \(waited) — for the 1.5 s JWKS fetch?")

        var acceptedAfter: Duration? = nil
        while ContinuousClock.now - started < .seconds(10) {
            try await Task.sleep(for: .milliseconds(200))
            if try await Self.initialize(resource, authorization: "Bearer \(rotated)", transport).status.code == 200 {
                acceptedAfter = ContinuousClock.now - started
                break
            }
        }
        let after = try #require(acceptedAfter, "k2 was never accepted")
        #expect(after >= .milliseconds(1500), "accepted before the JWKS answered: \(after)")

        // A kid nobody published stays refused; the old key still passes.
        #expect(
            try await Self.initialize(resource, authorization: "Bearer \(try token(second, kid: "k9"))", transport)
                .status.code == 401)
        #expect(
            try await Self.initialize(resource, authorization: "Bearer \(try token(first, kid: "k1"))", transport)
                .status.code == 200)
    }

    /// Opaque IdP tokens through the synchronous validator: the first sight refused, the next answered
    /// from the introspection done in the background.
    @Test func theSynchronousValidatorAnswersOpaqueTokensFromIntrospectionDoneInTheBackground() async throws {
        let transport = URLSessionTransport()
        let idp = try await IdP.discover(transport)
        let resource = "https://mcp.moose.test/mcp"
        var configuration = ResourceServerConfiguration(
            issuer: idp.issuer, resource: resource, algorithms: [.rs256], dpop: .disabled)
        configuration.resourceMetadataURL = "https://mcp.moose.test/.well-known/oauth-protected-resource/mcp"
        configuration.introspectedTokensNeedAudience = true
        let introspector = TokenIntrospector(
            endpoint: idp.introspection, clientID: "moose-resource-server",
            clientSecret: "moose-resource-server-secret", transport: transport)
        let answers = WarmIntrospectionAnswers(introspector: introspector)
        let validator = ResourceServerValidator(
            server: ResourceServer(
                configuration: configuration, keys: StaticAccessTokenKeys([]), introspector: introspector),
            keys: nil, introspection: answers, requiredScopes: ["read"])
        let token = try await idp.serviceToken(scope: "read", resource: resource, transport)
        let request = MCP.HTTPRequest(method: "POST", headers: ["Authorization": "Bearer \(token)"], path: "/mcp")
        let context = HTTPValidationContext(httpMethod: "POST")

        let first = validator.validate(request, context: context)
        #expect(first?.statusCode == 401)
        #expect(first?.headers["WWW-Authenticate"]?.contains(#"error="invalid_token""#) == true)
        var passed = false
        for _ in 0..<50 where !passed {
            try await Task.sleep(for: .milliseconds(100))
            passed = validator.validate(request, context: context) == nil
        }
        #expect(passed, "the introspection answer never arrived")
        #expect(await introspector.requestCount == 1)

        let elsewhere = try await idp.serviceToken(scope: "read", resource: "http://other.example/mcp", transport)
        let other = MCP.HTTPRequest(method: "POST", headers: ["Authorization": "Bearer \(elsewhere)"], path: "/mcp")
        try await answers.prefetch(elsewhere)
        #expect(validator.validate(other, context: context)?.statusCode == 401)
    }
}
#endif
