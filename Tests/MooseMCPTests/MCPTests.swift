#if MooseMCP
import Foundation
import MCP
import MooseHTTP
import MooseJWT
import MooseMCP
import MooseOAuth
import MooseOAuthSystem
import MooseSQLiteStorage
import MooseSecretStore
import MooseTestSupport
import MooseURLSession
import Synchronization
import Testing

/// How a test reaches the MCP server: which transport, and which of the two test servers (their
/// answers to a POST are `text/event-stream` or `application/json`).
enum Route: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// MooseMCPTransport against the server answering SSE (the Python SDK's default).
    case mooseSSE
    /// MooseMCPTransport against the server answering JSON.
    case mooseJSON
    /// The SDK's HTTPClientTransport (`streaming: false`) with MooseMCPAuthorizer, against the JSON
    /// server: the SDK's own path, which reads no SSE on Linux.
    case sdkJSON

    var answersJSON: Bool { self != .mooseSSE }
    var testDescription: String { rawValue }

    /// The server this route talks to.
    func server() throws -> MCPTestServer {
        try #require(answersJSON ? MCPTestServer.json : MCPTestServer.sse, "\(MCPTestServer.unavailable) (\(rawValue))")
    }
}

/// Every test that talks to the test MCP servers (tools/mcp: the Python MCP SDK's OAuth server and
/// MCP server in one process). One suite, serialized: they share the servers' counters and hostile modes.
@Suite(.serialized, .enabled(if: MCPTestServer.url != nil, "\(MCPTestServer.unavailable)"))
struct MCPServerTests {
    static var url: URL { URL(string: MCPTestServer.url ?? "http://127.0.0.1:1/mcp")! }
    static var resource: String { MCPTestServer.url ?? "" }
    static var issuer: String { MCPTestServer.issuer ?? "" }

    /// An authorizer that logs in through the server's auto-approving /authorize, counting logins.
    static func authorizer(
        _ server: MCPTestServer? = MCPTestServer.sse, storage: any SessionStorage, logins: Counter = Counter(),
        client: ResourceTokenManager.ClientIdentity = .dynamic(),
        transport: (any HTTPTransport)? = nil, maxStepUpAttempts: Int = 2,
        clock: (@Sendable () -> Date)? = nil
    ) throws -> MooseMCPAuthorizer {
        var configuration = RefreshCoordinator.Configuration()
        configuration.backoff = 0.05
        configuration.clock = clock
        let url = try #require(server.flatMap { URL(string: $0.url) }, "\(MCPTestServer.unavailable)")
        return try MooseMCPAuthorizer(
            serverURL: url, storage: storage,
            login: .loopback { authorizationURL in
                logins.increment()
                try await MCPTestServer.approve(authorizationURL)
            }, client: client, transport: transport, maxStepUpAttempts: maxStepUpAttempts, configuration: configuration)
    }

    /// The SDK's own client over `route`'s transport, authorized by `authorizer`.
    static func connect(_ authorizer: MooseMCPAuthorizer, route: Route = .mooseSSE) async throws -> Client {
        try await connected(authorizer, route: route).client
    }

    /// The client and its transport.
    static func connected(_ authorizer: MooseMCPAuthorizer, route: Route = .mooseSSE) async throws
        -> (client: Client, transport: any Transport, result: Initialize.Result)
    {
        let url = try #require(URL(string: try route.server().url))
        let transport: any Transport =
            switch route {
            case .mooseSSE, .mooseJSON: MooseMCPTransport(endpoint: url, authorizer: authorizer)
            case .sdkJSON:
                HTTPClientTransport(endpoint: url, configuration: .default, streaming: false, authorizer: authorizer)
            }
        let client = Client(name: "moose-tests", version: "1.0")
        let result = try await client.connect(transport: transport)
        return (client, transport, result)
    }

    static func call(_ client: Client, _ text: String, tool: String = "echo") async throws -> String {
        let (content, isError) = try await client.callTool(name: tool, arguments: ["text": .string(text)])
        guard isError != true, case .text(let answer, _, _)? = content.first else { return "(no text)" }
        return answer
    }

    static func stat(_ stats: JSONValue, _ path: String...) -> Int64 {
        var value: JSONValue? = stats
        for name in path { value = value?[name] }
        return value?.int64Value ?? 0
    }

    // MARK: - The issue's cases

    /// Nothing configured but the server's URL: discovery (RFC 9728 from the 401, RFC 8414), dynamic
    /// registration, login with PKCE + resource + iss, then tools/list and a tool call — over each
    /// route; the server answered in the shape the route names.
    @Test(arguments: Route.allCases)
    func onlyTheServerURLDiscoversRegistersLogsInAndCallsATool(_ route: Route) async throws {
        let server = try route.server()
        try await server.reset()
        let storage = InMemorySessionStorage()
        let logins = Counter()
        let authorizer = try Self.authorizer(server, storage: storage, logins: logins)
        let client = try await Self.connect(authorizer, route: route)
        let tools = try await client.listTools().tools.map(\.name)
        #expect(tools.contains("echo") && tools.contains("admin_echo"))
        #expect(try await Self.call(client, "hello") == "hello")
        await client.disconnect()

        let stats = try await server.stats()
        #expect(Self.stat(stats, "registrations") == 1 && logins.value == 1)
        #expect(
            Self.stat(stats, "authorize_redirects") == 1
                && Self.stat(stats, "token_requests_by_grant", "authorization_code") == 1)
        let authorize = try #require(stats["authorize_log"]?.arrayValue?.last)
        #expect(authorize["resource"]?.stringValue == server.url, "RFC 8707 resource on the authorization request")
        let token = try #require(stats["token_log"]?.arrayValue?.last)
        #expect(token["resource"]?.stringValue == server.url, "RFC 8707 resource on the token request")
        // The session: keyed by issuer + resource, with the registration sealed in it.
        let key = OAuthSession.storageKey(issuer: server.issuer, resource: server.url)
        let session = try #require(try await storage.load(key)?.session)
        #expect(
            session.resource == server.url && session.issuer == server.issuer && session.tokens.resource == server.url)
        #expect(session.registration?.clientID == session.clientID && session.registration?.issuer == server.issuer)
        #expect(session.tokens.scopes == ["mcp:tools"], "the scopes the resource's metadata lists")
        // The answers came in the shape this route is about.
        let sse = Self.stat(stats, "response_types", "POST 200 text/event-stream")
        let json = Self.stat(stats, "response_types", "POST 200 application/json")
        #expect(
            route.answersJSON ? (json >= 3 && sse == 0) : (sse >= 3 && json == 0),
            "\(String(describing: stats["response_types"]))")
    }

    /// Tokens expire mid-session (the server expires every token it issued): 8 concurrent calls over
    /// two connections sharing one authorizer cost one refresh, and all succeed.
    @Test(arguments: Route.allCases)
    func expiryMidSessionCostsOneRefreshAcrossConnections(_ route: Route) async throws {
        let server = try route.server()
        try await server.reset()
        let storage = InMemorySessionStorage()
        let logins = Counter()
        let authorizer = try Self.authorizer(server, storage: storage, logins: logins)
        let first = try await Self.connect(authorizer, route: route)
        let second = try await Self.connect(authorizer, route: route)
        #expect(try await Self.call(first, "before") == "before")
        try await server.reset(statsOnly: true)
        try await server.mode(#"{"expire_all": true}"#)
        let answers = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<8 {
                group.addTask { try await Self.call(index % 2 == 0 ? first : second, "call \(index)") }
            }
            var answers: [String] = []
            for try await answer in group { answers.append(answer) }
            return answers
        }
        #expect(answers.sorted() == (0..<8).map { "call \($0)" }.sorted())
        let stats = try await server.stats()
        #expect(Self.stat(stats, "refreshes") == 1, "one refresh for 8 rejected requests: \(stats)")
        #expect(Self.stat(stats, "refresh_reuse_detected") == 0 && Self.stat(stats, "invalid_grant") == 0)
        #expect(Self.stat(stats, "authorize_requests") == 0 && logins.value == 1, "no new login")
        await first.disconnect()
        await second.disconnect()
    }

    /// A token about to expire is refreshed before the request goes out (`prepareAuthorization`
    /// joins the coordinator's refresh): no 401 round trip. (Our clock runs 45 s ahead of the server's
    /// 60 s tokens: 15 s left, under the 30 s the coordinator wants.)
    @Test(arguments: [Route.mooseSSE, .sdkJSON])
    func aTokenAboutToExpireIsRefreshedBeforeTheRequest(_ route: Route) async throws {
        let server = try route.server()
        try await server.reset()
        let skew = Mutex<TimeInterval>(0)
        let authorizer = try Self.authorizer(
            server, storage: InMemorySessionStorage(),
            clock: { Date().addingTimeInterval(skew.withLock { $0 }) })
        let client = try await Self.connect(authorizer, route: route)
        #expect(try await Self.call(client, "fresh") == "fresh")
        try await server.reset(statsOnly: true)
        skew.withLock { $0 = 45 }
        #expect(try await Self.call(client, "ahead") == "ahead")
        skew.withLock { $0 = 0 }
        let stats = try await server.stats()
        #expect(Self.stat(stats, "refreshes") == 1 && Self.stat(stats, "responses", "POST /mcp 401") == 0, "\(stats)")
        await client.disconnect()
    }

    /// Two processes, each its own SDK client on a MooseMCPTransport and authorizer, one encrypted
    /// store, the server answering SSE: after the server expired the token, one refresh between them
    /// (the store's lease), no reuse detected.
    @Test func twoProcessesOnOneStoreRefreshOnce() async throws {
        try await MCPTestServer.reset()
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("moose-mcp-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let storePath = home.appendingPathComponent("store.sqlite").path,
            keyPath = home.appendingPathComponent("store.key").path
        let store = try SecretStore(path: storePath, masterKey: .keyFile(keyPath))
        let authorizer = try Self.authorizer(storage: EncryptedSessionStorage(store: store))
        let client = try await Self.connect(authorizer)
        #expect(try await Self.call(client, "login") == "login")
        await client.disconnect()
        try await MCPTestServer.reset(statsOnly: true)
        try await MCPTestServer.mode(#"{"expire_all": true}"#)

        let results = await withTaskGroup(of: (Int32, String).self) { group in
            for _ in 0..<2 {
                group.addTask { runCapturingStdout([Worker.binary, "echo", storePath, keyPath, Self.resource, "3"]) }
            }
            var results: [(Int32, String)] = []
            for await result in group { results.append(result) }
            return results
        }
        for (status, output) in results { #expect(status == 0, "worker: \(output)") }
        let tokens = Set(results.flatMap { $0.1.split(separator: "\n").filter { $0.hasPrefix("token ") } })
        #expect(tokens.count == 1, "both processes end with the same token: \(tokens)")
        let stats = try await MCPTestServer.stats()
        #expect(Self.stat(stats, "refreshes") == 1, "one refresh across two processes: \(stats)")
        #expect(Self.stat(stats, "refresh_reuse_detected") == 0 && Self.stat(stats, "authorize_requests") == 0)
        #expect(Self.stat(stats, "tool_calls_by_name", "echo") == 6)
    }

    /// A network failure during the refresh (injected by wrapping the real transport): the call fails
    /// with a transient error, the stored refresh token is the same, nobody logs in; once the network
    /// is back, the kept refresh token works.
    @Test func networkFailureDuringRefreshKeepsTheRefreshToken() async throws {
        try await MCPTestServer.reset()
        let storage = InMemorySessionStorage()
        let network = FailingTransport(wrapping: URLSessionTransport())
        let logins = Counter()
        let authorizer = try Self.authorizer(storage: storage, logins: logins, transport: network)
        let client = try await Self.connect(authorizer)
        #expect(try await Self.call(client, "up") == "up")
        let key = OAuthSession.storageKey(issuer: Self.issuer, resource: Self.resource)
        let before = try #require(try await storage.load(key)?.session.tokens.refreshToken)

        network.failRefreshes(true)
        try await MCPTestServer.reset(statsOnly: true)
        try await MCPTestServer.mode(#"{"expire_all": true}"#)
        await #expect(throws: MCPAuthorizationError.self) { _ = try await Self.call(client, "down") }
        #expect(
            authorizer.lastError?.oauthError?.code == OAuthError.transient,
            "\(String(describing: authorizer.lastError))")
        #expect(network.failures >= 1)
        let kept = try #require(try await storage.load(key)?.session)
        #expect(kept.state == .active && kept.tokens.refreshToken == before, "the refresh token is kept")
        var stats = try await MCPTestServer.stats()
        #expect(
            Self.stat(stats, "token_requests") == 0 && Self.stat(stats, "authorize_requests") == 0 && logins.value == 1)

        network.failRefreshes(false)
        #expect(try await Self.call(client, "back") == "back")
        stats = try await MCPTestServer.stats()
        #expect(
            Self.stat(stats, "refreshes") == 1 && Self.stat(stats, "invalid_grant") == 0,
            "the kept refresh token worked")
        await client.disconnect()
    }

    /// RFC 9207: a server that forges `iss`, or omits it while its metadata promises it, gets no
    /// login: the code is never redeemed.
    @Test func forgedOrMissingIssRefusesTheLogin() async throws {
        for mode in ["forge", "omit"] { try await issRefused(mode: mode) }
    }

    func issRefused(mode: String) async throws {
        try await MCPTestServer.reset()
        try await MCPTestServer.mode(#"{"iss": "\#(mode)"}"#)
        let authorizer = try Self.authorizer(storage: InMemorySessionStorage())
        await #expect(throws: (any Error).self) { _ = try await Self.connect(authorizer) }
        #expect(
            authorizer.lastError?.oauthError?.code == OAuthError.issuerMismatchInResponse,
            "\(String(describing: authorizer.lastError))")
        let stats = try await MCPTestServer.stats()
        #expect(
            Self.stat(stats, "authorize_redirects") == 1
                && Self.stat(stats, "token_requests_by_grant", "authorization_code") == 0,
            "the code was never redeemed")
        try await MCPTestServer.reset()
    }

    /// An authorization server whose metadata does not list S256 (an empty list, or no member at all)
    /// is refused before registration or the browser, with an error naming the member.
    @Test func authorizationServerWithoutS256IsRefused() async throws {
        for methods in ["[]", "null"] { try await s256Refused(methods: methods) }
    }

    func s256Refused(methods: String) async throws {
        try await MCPTestServer.reset()
        try await MCPTestServer.mode(#"{"pkce_methods": \#(methods)}"#)
        let logins = Counter()
        let authorizer = try Self.authorizer(storage: InMemorySessionStorage(), logins: logins)
        do {
            _ = try await Self.connect(authorizer)
            Issue.record("connected to a server without S256")
        } catch {
            #expect(
                "\(error)".contains("code_challenge_methods_supported"), "the error carries Moose's message: \(error)")
        }
        let failure = try #require(authorizer.lastError?.oauthError)
        #expect(
            failure.code == OAuthError.pkceNotSupported && failure.message.contains("code_challenge_methods_supported"))
        let stats = try await MCPTestServer.stats()
        #expect(
            Self.stat(stats, "registrations") == 0 && Self.stat(stats, "authorize_requests") == 0 && logins.value == 0)
        try await MCPTestServer.reset()
    }

    /// 403 insufficient_scope: a new login for the scopes the challenge names plus those granted (same
    /// client, same resource), then the call succeeds.
    @Test(arguments: Route.allCases)
    func insufficientScopeStepsUp(_ route: Route) async throws {
        let server = try route.server()
        try await server.reset()
        let storage = InMemorySessionStorage()
        let logins = Counter()
        let authorizer = try Self.authorizer(server, storage: storage, logins: logins)
        let client = try await Self.connect(authorizer, route: route)
        #expect(try await Self.call(client, "plain") == "plain")
        #expect(try await Self.call(client, "root", tool: "admin_echo") == "admin: root")
        let stats = try await server.stats()
        #expect(
            Self.stat(stats, "insufficient_scope_403") == 1 && logins.value == 2
                && Self.stat(stats, "registrations") == 1)
        let last = try #require(stats["authorize_log"]?.arrayValue?.last)
        #expect(last["scopes"]?.arrayValue?.compactMap(\.stringValue) == ["mcp:tools", "mcp:admin"])
        #expect(last["resource"]?.stringValue == server.url)
        let key = OAuthSession.storageKey(issuer: server.issuer, resource: server.url)
        #expect(try await storage.load(key)?.session.tokens.scopes == ["mcp:tools", "mcp:admin"])
        // The same challenge for scopes the token already has: refused, not another login.
        let header = #"Bearer error="insufficient_scope", scope="mcp:tools mcp:admin""#
        let endpoint = try #require(URL(string: server.url))
        // As the SDK's transport does, prepareAuthorization first: it forgets what an earlier task at
        // the same address carried (the authorizer tracks requests by task).
        let again = try await Task.detached {
            try await authorizer.prepareAuthorization(for: endpoint, session: .shared)
            return try await authorizer.handleChallenge(
                statusCode: 403, headers: ["WWW-Authenticate": header], endpoint: endpoint,
                operationKey: "tools/call", session: .shared)
        }.value
        #expect(!again && logins.value == 2)
        await client.disconnect()
    }

    /// Step-up is bounded: a client registered for mcp:tools only cannot get mcp:admin (the server
    /// refuses the authorization); two attempts per operation and scope set, then the 403 stands
    /// without another trip to the authorization server — through MooseMCPTransport as
    /// `OAuthError.insufficientScope` with the response's status and challenge.
    @Test(arguments: [Route.mooseSSE, .sdkJSON])
    func stepUpIsBounded(_ route: Route) async throws {
        let server = try route.server()
        try await server.reset()
        let logins = Counter()
        let authorizer = try Self.authorizer(
            server, storage: InMemorySessionStorage(), logins: logins,
            client: .dynamic(clientName: "narrow", scopes: ["mcp:tools"]), maxStepUpAttempts: 2)
        let client = try await Self.connect(authorizer, route: route)
        #expect(try await Self.call(client, "plain") == "plain")
        var errors: [any Error] = []
        for _ in 0..<3 {
            do {
                _ = try await Self.call(client, "no", tool: "admin_echo")
                Issue.record("admin_echo went through without mcp:admin")
            } catch {
                errors.append(error)
            }
        }
        let stats = try await server.stats()
        #expect(Self.stat(stats, "insufficient_scope_403") == 3)
        #expect(
            Self.stat(stats, "authorize_requests") == 3 && logins.value == 3,
            "one login, then two step-up attempts, then none: \(stats)")
        #expect(Self.stat(stats, "tool_calls_by_name", "admin_echo") == 0)
        if route == .mooseSSE {
            let last = try #require(errors.last as? OAuthError, "\(errors)")
            #expect(
                last.code == OAuthError.insufficientScope && last.status == 403 && last.scope == "mcp:tools mcp:admin")
            let challenge = try #require(last.challenges.first)
            #expect(challenge.hasScheme("Bearer") && challenge["error"] == "insufficient_scope")
            #expect(challenge["resource_metadata"] == server.issuer + "/.well-known/oauth-protected-resource/mcp")
        }
        await client.disconnect()
    }

    // MARK: - MooseMCPTransport

    /// A token the server refuses whatever happens (its `reject_tokens` mode): the transport refreshes
    /// (twice: one per rejected attempt, each for the token that attempt carried), then stops and
    /// throws `OAuthError.tokenRejected` with the 401 and its parsed `WWW-Authenticate` challenge; no
    /// login. When the server takes tokens again, the same client works on.
    @Test func aRejectedTokenSurfacesTheStatusAndTheChallenge() async throws {
        let server = try Route.mooseSSE.server()
        try await server.reset()
        let logins = Counter()
        let authorizer = try Self.authorizer(server, storage: InMemorySessionStorage(), logins: logins)
        let client = try await Self.connect(authorizer)
        #expect(try await Self.call(client, "accepted") == "accepted")
        try await server.reset(statsOnly: true)
        try await server.mode(#"{"reject_tokens": true}"#)
        do {
            _ = try await Self.call(client, "rejected")
            Issue.record("a call with rejected tokens succeeded")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.tokenRejected && error.status == 401, "\(error)")
            let challenge = try #require(error.challenges.first, "\(error)")
            #expect(challenge.hasScheme("Bearer") && challenge["error"] == "invalid_token")
            #expect(challenge["resource_metadata"] == server.issuer + "/.well-known/oauth-protected-resource/mcp")
            #expect(!error.description.contains("mat_"), "no token in the error")
        }
        var stats = try await server.stats()
        #expect(Self.stat(stats, "responses", "POST /mcp 401") == 3 && Self.stat(stats, "refreshes") == 2, "\(stats)")
        #expect(
            Self.stat(stats, "authorize_requests") == 0 && logins.value == 1,
            "a refused token is not a reason to log in")
        try await server.mode(#"{"reject_tokens": false}"#)
        #expect(try await Self.call(client, "again") == "again")
        stats = try await server.stats()
        #expect(Self.stat(stats, "refreshes") == 2, "the last refreshed token works: no further refresh")
        await client.disconnect()
    }

    /// Notifications the server sends inside a POST's event stream (two log messages before a tool's
    /// answer) reach the client through MooseMCPTransport, in order, before the answer. Through the
    /// SDK's transport with Moose's Linux configuration (the README's line) the answer comes and the
    /// notifications are dropped, as documented: a JSON answer cannot carry them.
    @Test func notificationsInsideAnAnswerReachTheClientInOrder() async throws {
        let server = try Route.mooseSSE.server()
        try await server.reset()
        let url = try #require(URL(string: server.url))
        let authorizer = try Self.authorizer(server, storage: InMemorySessionStorage())
        let logs = Mutex<[String]>([])
        let client = Client(name: "moose-tests", version: "1.0")
        await client.onNotification(LogMessageNotification.self) { message in
            logs.withLock { $0.append(message.params.data.stringValue ?? "(not text)") }
        }
        _ = try await client.connect(transport: MooseMCPTransport(endpoint: url, authorizer: authorizer))
        #expect(try await Self.call(client, "hello", tool: "chatty_echo") == "hello")
        #expect(
            logs.withLock { $0 } == ["chatty_echo: 5 characters", "chatty_echo: echoing"], "before the answer, in order"
        )
        await client.disconnect()

        let sdkClient = Client(name: "moose-tests", version: "1.0")
        await sdkClient.onNotification(LogMessageNotification.self) { message in
            logs.withLock { $0.append(message.params.data.stringValue ?? "(not text)") }
        }
        _ = try await sdkClient.connect(
            transport: HTTPClientTransport(endpoint: url, streaming: false, authorizer: authorizer))
        #expect(try await Self.call(sdkClient, "again", tool: "chatty_echo") == "again")
        #if canImport(FoundationNetworking)
        #expect(logs.withLock { $0.count } == 2, "the SDK's transport on Linux gets the answer only")
        #endif
        await sdkClient.disconnect()
        let stats = try await server.stats()
        #expect(Self.stat(stats, "tool_calls_by_name", "chatty_echo") == 2)
        #expect(
            Self.stat(stats, "response_types", "POST 200 application/json") == 0,
            "\(String(describing: stats["response_types"]))")
    }

    /// A transport to another server than the one its authorizer's tokens are for (the JSON server,
    /// with an authorizer for the SSE one) sends no token and logs in nowhere: the 401 stands, as
    /// `OAuthError.tokenRejected` with its challenge.
    @Test func aTransportToAnotherServerGetsNoTokenAndNoLogin() async throws {
        let sse = try Route.mooseSSE.server(), json = try Route.mooseJSON.server()
        try await sse.reset()
        try await json.reset()
        let logins = Counter()
        let authorizer = try Self.authorizer(sse, storage: InMemorySessionStorage(), logins: logins)
        #expect(try await Self.call(try await Self.connect(authorizer), "mine") == "mine")
        let other = try #require(URL(string: json.url))
        do {
            _ = try await Client(name: "moose-tests", version: "1.0").connect(
                transport: MooseMCPTransport(endpoint: other, authorizer: authorizer))
            Issue.record("connected to another server")
        } catch let error as OAuthError {
            #expect(
                error.code == OAuthError.tokenRejected && error.status == 401
                    && error.message.contains("no token could be sent"), "\(error)")
            #expect(
                error.challenges.first?["resource_metadata"] == json.issuer
                    + "/.well-known/oauth-protected-resource/mcp")
        }
        #expect(logins.value == 1)
        let stats = try await json.stats()
        #expect(
            Self.stat(stats, "responses", "POST /mcp 401") == 1 && Self.stat(stats, "registrations") == 0
                && Self.stat(stats, "token_requests") == 0)
    }

    /// The session and version headers: the transport keeps the server's `MCP-Session-Id`, sends the
    /// version the server chose in `MCP-Protocol-Version` on every request after `initialize` (none
    /// before), and ends the session with a DELETE on disconnect — the server answering SSE.
    @Test func theSessionIDAndTheNegotiatedVersionGoWithEveryLaterRequest() async throws {
        let server = try Route.mooseSSE.server()
        try await server.reset()
        let authorizer = try Self.authorizer(server, storage: InMemorySessionStorage())
        let (client, transport, result) = try await Self.connected(authorizer)
        let moose = try #require(transport as? MooseMCPTransport)
        #expect(try await Self.call(client, "one") == "one")
        #expect(try await Self.call(client, "two") == "two")
        let session = try #require(await moose.sessionID)
        #expect(MooseMCPTransport.isValidSessionID(session))
        #expect(await moose.protocolVersion == result.protocolVersion)
        await client.disconnect()
        #expect(await moose.sessionID == nil)

        let stats = try await server.stats()
        let versions = try #require(stats["protocol_versions"]?.objectValue)
        // initialize twice (the 401, then with the token) without the header; the rest with it:
        // notifications/initialized, two tools/call, the DELETE.
        #expect(Self.stat(stats, "protocol_versions", "POST (none)") == 2, "\(versions)")
        #expect(Self.stat(stats, "protocol_versions", "POST \(result.protocolVersion)") == 3, "\(versions)")
        #expect(Self.stat(stats, "protocol_versions", "DELETE \(result.protocolVersion)") == 1, "\(versions)")
        #expect(Self.stat(stats, "responses", "DELETE /mcp 200") == 1, "the session was ended")
    }
}

/// Counts, from any task.
final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// The real transport, with refresh-grant requests failing as a dropped connection would while
/// `failRefreshes(true)`: a fault injected around the real part.
final class FailingTransport: HTTPTransport, Sendable {
    private let base: any HTTPTransport
    private let failing = Mutex(false)
    private let failed = Mutex(0)

    init(wrapping base: any HTTPTransport) { self.base = base }

    func failRefreshes(_ on: Bool) { failing.withLock { $0 = on } }
    var failures: Int { failed.withLock { $0 } }

    func send(_ request: APIRequest) async throws -> APIResponse {
        let body = request.body.map { String(decoding: $0, as: UTF8.self) } ?? ""
        if failing.withLock({ $0 }), body.contains("grant_type=refresh_token") {
            failed.withLock { $0 += 1 }
            throw HTTPRequestError.transportFailure("connection reset (injected)", request)
        }
        return try await base.send(request)
    }
}

/// The worker executable, next to the test bundle.
enum Worker {
    static let binary = builtExecutable("moose-mcp-worker")
}

/// The MCP tests are skipped when the server cannot run; this one fails then, so a run says so.
@Test func theTestMCPServerRuns() {
    #expect(MCPTestServer.url != nil, "\(MCPTestServer.unavailable): the MCP tests did not run")
}
#endif
