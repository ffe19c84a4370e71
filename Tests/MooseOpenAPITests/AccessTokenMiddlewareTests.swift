#if ExampleService
import AsyncHTTPClient
import Foundation
import HTTPTypes
import MooseAsyncHTTPClient
import MooseCrypto
import MooseExampleAPI
import MooseHTTP
import MooseOAuth
import MooseOpenAPI
import MooseTestSupport
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime
import Synchronization
import Testing

/// One AsyncHTTPClient client for the whole test process (never shut down: it lives as long as the process).
enum Shared {
    static let httpClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()
    static let transport = HTTPClientTransport(client: httpClient)
    static let openAPITransport = AsyncHTTPClientTransport(configuration: .init(client: httpClient))
    /// tools/resource/api_server.py against the real test IdP. Its introspection cache (3 s) keeps
    /// the IdP's load to one look-up per token; each test revokes its token before the token's first
    /// use, so the first (and cached) answer is already "inactive". Started once, off the cooperative pool.
    static func api() async throws -> SpawnedServer { try await servers.get("api", []) }
    /// The same API, requiring a scope the client-credentials token does not have.
    static func scoped() async throws -> SpawnedServer { try await servers.get("scoped", ["--require-scope", "write"]) }
    static let servers = Servers()

    /// The resource servers of this test process, started on first use (they exit with it).
    actor Servers {
        private var started: [String: Task<SpawnedServer, any Error>] = [:]
        func get(_ name: String, _ arguments: [String]) async throws -> SpawnedServer {
            if let task = started[name] { return try await task.value }
            let issuer = TestIdentityProvider.issuer
            let task = Task { try await ResourceServer.start(issuer: issuer, arguments) }
            started[name] = task
            return try await task.value
        }
    }
}

/// Counts the token grants that reach the real IdP (wrapping the real transport).
final class GrantCounter: HTTPTransport, @unchecked Sendable {
    let inner: any HTTPTransport
    private let grants = Mutex(0)
    init(_ inner: any HTTPTransport) { self.inner = inner }
    var count: Int { grants.withLock { $0 } }
    func send(_ request: APIRequest) async throws -> APIResponse {
        if request.method == .post, let body = request.body,
            String(decoding: body, as: UTF8.self).contains("grant_type=")
        {
            grants.withLock { $0 += 1 }
        }
        return try await inner.send(request)
    }
}

/// A client-credentials session at the real IdP (moose-service), with its grants counted.
struct Service {
    let grants: GrantCounter
    let moose: TokenManager
    let storage = InMemorySessionStorage()

    init() async throws {
        grants = GrantCounter(Shared.transport)
        moose = TokenManager(
            issuer: TestIdentityProvider.issuer, clientID: "moose-service",
            authentication: .clientSecretBasic("moose-service-secret"), storage: storage,
            key: "svc-\(UUID().uuidString)", transport: grants, scopes: ["read"])
        try await moose.login(with: .clientCredentials)
    }

    /// The generated client for `server`, with `middlewares` (default: Moose's alone).
    func client(
        _ server: SpawnedServer, middlewares: [any ClientMiddleware]? = nil,
        transport: (any ClientTransport)? = nil
    ) -> Client {
        Client(
            serverURL: server.url, transport: transport ?? Shared.openAPITransport,
            middlewares: middlewares ?? [AccessTokenMiddleware(coordinator: moose.coordinator)])
    }

    /// Revokes `token` at the IdP (RFC 7009): the API refuses it from now on, the coordinator still holds it.
    func revoke(_ token: AccessToken) async throws {
        try await OAuthClient(
            metadata: try await moose.metadata(), clientID: "moose-service",
            authentication: .clientSecretBasic("moose-service-secret"), transport: Shared.transport
        )
        .revoke(token.value, hint: "access_token")
    }

    /// Makes the stored token look expired to this process (and forgets the in-memory copy).
    func expireLocally() async throws {
        let stored = try #require(try await storage.load(moose.key))
        var session = stored.session
        session.tokens.expiresAt = Date().addingTimeInterval(-5)
        _ = try await storage.save(session, key: moose.key, expectedGeneration: stored.generation, lease: nil)
        await moose.coordinator.didLogIn()
    }
}

func fingerprint(_ token: String) -> String { Hex.encode(DigestAlgorithm.sha256.hash(Array(token.utf8))) }

/// What the resource server saw (`GET /_test/stats`), after `POST /_test/reset` at the start of a test.
struct Stats {
    let json: JSON
    static func reset(_ server: SpawnedServer) async throws {
        _ = try await Shared.transport.send(
            APIRequest(method: .post, url: server.url.appendingPathComponent("_test/reset")))
    }
    static func read(_ server: SpawnedServer) async throws -> Stats {
        let response = try await Shared.transport.send(
            APIRequest(url: server.url.appendingPathComponent("_test/stats")))
        return Stats(json: try JSONDecoder().decode(JSON.self, from: response.body))
    }
    func count(_ key: String) -> Int { Int(json[key]?.number ?? -1) }
    func accepted(_ fingerprint: String) -> Int { Int(json["by_fingerprint"]?[fingerprint]?["accepted"]?.number ?? 0) }
    func refused(_ fingerprint: String) -> Int { Int(json["by_fingerprint"]?[fingerprint]?["refused"]?.number ?? 0) }
}

/// The OpenAPI-generated client (tools/example-service/Sources/MooseExampleAPI) against the protected
/// API (tools/resource/api_server.py), with real client-credentials tokens from the real test IdP.
/// Each test uses its own resource-server counters, so they run one at a time.
@Suite(.serialized)
struct AccessTokenMiddlewareTests {
    /// 200 concurrent calls on a token the client sees expired (and the IdP has revoked) → one grant at
    /// the IdP, 200 answers with the one new token, and no call ever sent the old one.
    @Test func twoHundredConcurrentCallsOnAnExpiredTokenRefreshOnce() async throws {
        let service = try await Service()
        let old = try await service.moose.accessToken()
        try await service.revoke(old)
        try await service.expireLocally()
        let api = try await Shared.api()
        try await Stats.reset(api)
        let client = service.client(api)
        let fingerprints = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<200 { group.addTask { try await client.getMe().ok.body.json.tokenFingerprint } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        let fresh = try await service.moose.accessToken()
        #expect(service.grants.count == 2, "login + exactly one refresh")
        #expect(fingerprints.count == 200 && Set(fingerprints) == [fingerprint(fresh.value)])
        let stats = try await Stats.read(api)
        #expect(stats.accepted(fingerprint(fresh.value)) == 200)
        #expect(stats.count("refused") == 0, "a call carried the expired token")
    }

    /// 200 concurrent calls with a token the IdP revoked (the client still holds it): every 401
    /// calls refresh(rejecting:) with that token → one grant, and each call is sent once more.
    @Test func twoHundredConcurrent401sCauseOneRefresh() async throws {
        let service = try await Service()
        let old = try await service.moose.accessToken()
        try await service.revoke(old)
        let api = try await Shared.api()
        try await Stats.reset(api)
        let client = service.client(api)
        let fingerprints = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<200 { group.addTask { try await client.getMe().ok.body.json.tokenFingerprint } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        let fresh = try await service.moose.accessToken()
        #expect(service.grants.count == 2, "login + exactly one refresh for 200 rejections")
        #expect(Set(fingerprints) == [fingerprint(fresh.value)])
        let stats = try await Stats.read(api)
        #expect(stats.refused(fingerprint(old.value)) >= 1 && stats.refused(fingerprint(old.value)) <= 200)
        #expect(stats.accepted(fingerprint(fresh.value)) == 200)
    }

    /// A 401 for a token another caller already replaced: no refresh, the call is resent with the
    /// current token. (Fault injection: the real OpenAPI transport, wrapped so that another caller's
    /// refresh lands while this request — carrying the old token — is on its way.)
    @Test func a401ForAnAlreadyReplacedTokenCausesNoRefresh() async throws {
        let service = try await Service()
        let old = try await service.moose.accessToken()
        try await service.revoke(old)
        let api = try await Shared.api()
        try await Stats.reset(api)
        let coordinator = service.moose.coordinator
        let raced = RaceOnce(inner: Shared.openAPITransport) { _ = try await coordinator.refresh(rejecting: old) }
        let me = try await service.client(api, transport: raced).getMe().ok.body.json
        let current = try await service.moose.accessToken()
        #expect(
            service.grants.count == 2,
            "login + the other caller's refresh; the 401 for the replaced token refreshed nothing")
        #expect(me.tokenFingerprint == fingerprint(current.value))
        let stats = try await Stats.read(api)
        #expect(stats.refused(fingerprint(old.value)) == 1 && stats.accepted(fingerprint(current.value)) == 1)
    }

    /// A streamed (single-pass) body is never replayed: the 401 refreshes the token, the call fails
    /// with OAuthError.tokenRejected (carrying the 401 and its challenge), and the server saw the request once; the caller's own second try
    /// works. A replayable JSON body (what the generated client makes) is resent, byte for byte.
    @Test func aStreamedBodyIsNotReplayedAndTheErrorSaysSo() async throws {
        let service = try await Service()
        let old = try await service.moose.accessToken()
        try await service.revoke(old)
        let api = try await Shared.api()
        try await Stats.reset(api)
        let payload = Array(#"{"streamed":true,"n":42}"#.utf8)
        func streamed() -> HTTPBody {
            let (stream, continuation) = AsyncStream<ArraySlice<UInt8>>.makeStream()
            continuation.yield(payload[...])
            continuation.finish()
            return HTTPBody(stream, length: .known(Int64(payload.count)))
        }
        #expect(streamed().iterationBehavior == .single)
        switch await service.rawEcho(body: streamed(), server: api) {
        case .success: Issue.record("a streamed body was replayed")
        case .failure(let error):
            let oauth = (error as? ClientError)?.underlyingError as? OAuthError ?? error as? OAuthError
            #expect(oauth?.code == OAuthError.tokenRejected, "got \(error)")
            #expect(oauth?.message.contains("only once") == true)
            // What the server said: the 401 and its challenge, parsed.
            #expect(
                oauth?.status == 401 && oauth?.challenges.first?.hasScheme("Bearer") == true,
                "got \(String(describing: oauth))")
            #expect(oauth?.challenges.first?["error"] == "invalid_token")
        }
        #expect(service.grants.count == 2, "the rejected token was refreshed all the same")
        if case .failure(let error) = await service.rawEcho(body: streamed(), server: api) {
            Issue.record("the caller's own second try failed: \(error)")
        }

        // A replayable body after the next revocation: resent with the fresh token, byte for byte. (A new
        // token, revoked before its first use: the API caches introspection answers for 3 s.)
        let second = try await service.moose.coordinator.refreshNow()
        try await service.revoke(second)
        let echoed = try await service.client(api).echo(
            body: .json(.init(additionalProperties: try OpenAPIObjectContainer(unvalidatedValue: ["n": 7]))))
        #expect(try echoed.ok.body.json.additionalProperties.value["n"] as? Int == 7)
        #expect(service.grants.count == 4, "login, the stream's refresh, refreshNow, the JSON body's refresh")
        let stats = try await Stats.read(api)
        var recent: [JSON] = []
        if case .array(let items)? = stats.json["recent"] { recent = items }
        let echoes = recent.filter { $0["path"]?.string == "/v1/echo" }
        #expect(
            echoes.map { $0["outcome"]?.string ?? "" } == ["refused", "accepted", "refused", "accepted"],
            "stream: refused once, not resent; the caller's try: accepted; JSON body: refused, resent, accepted")
    }

    /// A 403 insufficient_scope is a typed error naming the scope, and is not retried.
    @Test func insufficientScopeIsATypedErrorAndNotRetried() async throws {
        let service = try await Service()
        let scoped = try await Shared.scoped()
        try await Stats.reset(scoped)
        do {
            _ = try await service.client(scoped).getMe()
            Issue.record("a token without the scope was accepted")
        } catch {
            let oauth = (error as? ClientError)?.underlyingError as? OAuthError
            #expect(oauth?.code == OAuthError.insufficientScope, "got \(error)")
            #expect(oauth?.requiredScopes == ["write"] && oauth?.status == 403)
        }
        let stats = try await Stats.read(scoped)
        #expect(
            stats.count("insufficient_scope") == 1 && stats.count("accepted") == 0 && stats.count("refused") == 0,
            "one call, refused for its scope, not sent again")
        #expect(service.grants.count == 1, "no refresh for a scope problem")
    }

    /// The documented order: `[retry, AccessTokenMiddleware, logging]`. The logging middleware (inside)
    /// sees both attempts — the rejected token, then the fresh one — and the retry middleware (outside)
    /// sees one call that succeeded: a 401 is Moose's to handle, never a retry policy's.
    @Test func orderRetryOutsideLoggingInside() async throws {
        let service = try await Service()
        let old = try await service.moose.accessToken()
        try await service.revoke(old)
        let retry = Recorder(name: "retry"), logging = Recorder(name: "logging")
        let api = try await Shared.api()
        let client = service.client(
            api, middlewares: [retry, AccessTokenMiddleware(coordinator: service.moose.coordinator), logging])
        _ = try await client.getMe().ok
        let fresh = try await service.moose.accessToken()
        #expect(retry.seen == ["retry 200"])
        #expect(logging.seen == ["logging 401 \(fingerprint(old.value))", "logging 200 \(fingerprint(fresh.value))"])
    }
}

extension Service {
    /// `POST /v1/echo` with a raw body, through the generated client's runtime machinery (the generated
    /// `echo` always makes a replayable JSON body).
    func rawEcho(body: HTTPBody, server: SpawnedServer) async -> Result<Void, any Error> {
        let middleware = AccessTokenMiddleware(coordinator: moose.coordinator)
        var request = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/v1/echo")
        request.headerFields[.contentType] = "application/json"
        do {
            let (response, _) = try await middleware.intercept(
                request, body: body, baseURL: server.url, operationID: "echo"
            ) { request, body, url in
                try await Shared.openAPITransport.send(request, body: body, baseURL: url, operationID: "echo")
            }
            guard response.status == .ok else {
                return .failure(
                    HTTPRequestError.transportFailure("echo answered \(response.status)", APIRequest(url: server.url)))
            }
            return .success(())
        } catch {
            return .failure(error)
        }
    }
}

/// Records each response's status (and the fingerprint of the token the request carried).
final class Recorder: ClientMiddleware, @unchecked Sendable {
    let name: String
    private let lines = Mutex<[String]>([])
    init(name: String) { self.name = name }
    var seen: [String] { lines.withLock { $0 } }
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let result = try await next(request, body, baseURL)
        let token = request.headerFields[.authorization].map { String($0.dropFirst("Bearer ".count)) }
        lines.withLock { $0.append("\(name) \(result.0.status.code)" + (token.map { " \(fingerprint($0))" } ?? "")) }
        return result
    }
}

/// Wraps the real OpenAPI transport: before the first request goes out, runs `race` (another
/// caller's refresh), then sends that request as it was.
final class RaceOnce: ClientTransport, @unchecked Sendable {
    let inner: any ClientTransport
    let race: @Sendable () async throws -> Void
    private let done = Mutex(false)
    init(inner: any ClientTransport, race: @escaping @Sendable () async throws -> Void) {
        self.inner = inner
        self.race = race
    }
    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (
        HTTPResponse, HTTPBody?
    ) {
        let first = done.withLock { alreadyRaced in
            defer { alreadyRaced = true }
            return !alreadyRaced
        }
        if first { try await race() }
        return try await inner.send(request, body: body, baseURL: baseURL, operationID: operationID)
    }
}
#endif
