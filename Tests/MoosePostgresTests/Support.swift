#if MoosePostgres
import Foundation
import MooseCrypto
import MooseHTTP
import MooseOAuth
import MooseOAuthSystem
import MoosePostgres
import MooseSealing
import MooseTestSupport
import MooseURLSession
import PostgresNIO
import Synchronization
import Testing

/// The test PostgreSQL and PgBouncer (tools/postgres): from the environment tools/test exports
/// (`MOOSE_PG_URL`, `MOOSE_PGBOUNCER_URL`, `MOOSE_PG_CA`, `MOOSE_PG_STATE`), else started here
/// (tools/postgres/start is idempotent). `nil` — and every PostgreSQL test skipped, with the
/// reason on standard error — only when PostgreSQL cannot run on this machine.
enum PG {
    struct Servers: Sendable {
        let url: String
        let bouncerURL: String
        let ca: String
        let state: String?
        let host: String
        let port: Int
    }

    static let servers: Servers? = {
        var environment = ProcessInfo.processInfo.environment
        if let reason = environment["MOOSE_PG_UNAVAILABLE"], !reason.isEmpty {
            FileHandle.standardError.write(Data("PostgreSQL tests SKIPPED: \(reason)\n".utf8))
            return nil
        }
        if environment["MOOSE_PG_URL"]?.isEmpty ?? true {
            let (status, output) = run(LocalServer.repositoryRoot + "/tools/postgres/start", [], timeout: 300)
            guard status == 0 else {
                FileHandle.standardError.write(
                    Data(
                        "PostgreSQL tests SKIPPED: tools/postgres/start could not run PostgreSQL here (exit \(status)):\n\(output.suffix(2000))\n"
                            .utf8))
                return nil
            }
            for line in output.split(separator: "\n") {
                let parts = line.split(separator: "=", maxSplits: 1)
                if parts.count == 2 {
                    environment[String(parts[0])] = String(parts[1]).trimmingCharacters(
                        in: CharacterSet(charactersIn: "'"))
                }
            }
        }
        guard let url = environment["MOOSE_PG_URL"], let bouncer = environment["MOOSE_PGBOUNCER_URL"],
            let ca = environment["MOOSE_PG_CA"]
        else {
            FileHandle.standardError.write(
                Data("PostgreSQL tests SKIPPED: MOOSE_PG_URL, MOOSE_PGBOUNCER_URL or MOOSE_PG_CA missing\n".utf8))
            return nil
        }
        return Servers(
            url: url, bouncerURL: bouncer, ca: ca, state: environment["MOOSE_PG_STATE"],
            host: environment["MOOSE_PG_HOST"] ?? "127.0.0.1", port: Int(environment["MOOSE_PG_PORT"] ?? "") ?? 55432)
    }()

    static var available: Bool { servers != nil }

    /// The test role's password: it must never appear in anything Moose prints.
    static let password = "moose-test-password"

    static func require() throws -> Servers {
        try #require(servers, "PostgreSQL is not available")
    }

    /// A schema no other test uses.
    static func freshSchema() -> String {
        "t_" + ((try? SecureRandom.bytes(count: 6)) ?? [1, 2, 3, 4, 5, 6]).map { String(format: "%02x", $0) }.joined()
    }

    /// `base` with `schema` and more parameters (`base` has no query of its own).
    static func url(_ base: String, schema: String, _ parameters: String = "") -> String {
        base + "?schema=\(schema)&connect_timeout=5" + (parameters.isEmpty ? "" : "&" + parameters)
    }

    /// The direct URL, TLS verified against the test CA, notifications on.
    static func direct(schema: String, _ parameters: String = "") throws -> String {
        let servers = try require()
        return url(
            servers.url, schema: schema,
            "sslmode=verify-full&sslrootcert=\(servers.ca)" + (parameters.isEmpty ? "" : "&" + parameters))
    }

    /// Through PgBouncer (transaction pooling), LISTEN on PostgreSQL itself.
    static func bouncer(schema: String, _ parameters: String = "") throws -> String {
        let servers = try require()
        return url(
            servers.bouncerURL, schema: schema,
            "listen_port=\(servers.port)" + (parameters.isEmpty ? "" : "&" + parameters))
    }

    /// tools/postgres/ctl COMMAND (stop-db, start-db, restart-db…) for the servers above.
    static func ctl(_ command: String) throws {
        var environment: [String: String] = [:]
        if let state = servers?.state { environment["MOOSE_PG_STATE"] = state }
        let (status, output) = run(
            LocalServer.repositoryRoot + "/tools/postgres/ctl", [command], environment: environment, timeout: 120)
        guard status == 0 else { throw CLIFailure(message: "tools/postgres/ctl \(command) failed: \(output)") }
    }

    struct CLIFailure: Error, CustomStringConvertible { let message: String; var description: String { message } }

    /// Runs SQL as the test role on a direct connection (tests look at and tamper with rows).
    static func sql(_ query: PostgresQuery) async throws -> [PostgresRow] {
        let servers = try require()
        let settings = try PostgresStorageConfiguration(url: servers.url + "?sslmode=disable")
        guard case .tcp(let host, let port) = settings.endpoint else { throw CLIFailure(message: "not tcp") }
        let configuration = PostgresConnection.Configuration(
            host: host, port: port, username: settings.username,
            password: settings.password, database: settings.database, tls: .disable)
        let connection = try await PostgresConnection.connect(
            configuration: configuration, id: 1, logger: Logger(label: "test"))
        do {
            let rows = try await connection.query(query, logger: Logger(label: "test")).collect()
            try await connection.close()
            return rows
        } catch {
            try? await connection.close()
            throw error
        }
    }

    static func dropSchema(_ schema: String) async {
        _ = try? await sql(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE"))
    }

    /// Runs an executable with arguments (and extra environment); status and combined output.
    static func run(
        _ path: String, _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil,
        timeout: TimeInterval = 60
    ) -> (Int32, String) {
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        let input = Pipe()
        process.standardInput = input
        do { try process.run() } catch { return (-1, "cannot run \(path): \(error)") }
        if let stdin { try? input.fileHandleForWriting.write(contentsOf: Data(stdin.utf8)) }
        try? input.fileHandleForWriting.close()
        let collected = Mutex(Data())
        let reader = Thread {
            let data = output.fileHandleForReading.readDataToEndOfFile()
            collected.withLock { $0 = data }
        }
        reader.start()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(5_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        while reader.isExecuting || !reader.isFinished { usleep(1_000) }
        return (process.terminationStatus, String(decoding: collected.withLock { $0 }, as: UTF8.self))
    }
}

/// Storages running for the length of a test, stopped (their pools closed) at its end.
final class Fleet: Sendable {
    private let tasks = Mutex<[Task<Void, Never>]>([])

    /// A new storage on `url`, its `run()` going on in the background.
    func storage(_ url: String, key: MasterKeySource, logger: Logger? = nil) throws -> PostgresSessionStorage {
        let storage = try PostgresSessionStorage(url: url, masterKey: key, logger: logger)
        let task = Task { await storage.run() }
        tasks.withLock { $0.append(task) }
        return storage
    }

    func stop() async {
        let all = tasks.withLock { tasks in
            defer { tasks.removeAll() }
            return tasks
        }
        for task in all { task.cancel() }
        for task in all { await task.value }
    }

    /// Runs `body` with a fleet and stops it afterwards, also when `body` throws.
    static func with<R>(_ body: (Fleet) async throws -> R) async throws -> R {
        let fleet = Fleet()
        do {
            let result = try await body(fleet)
            await fleet.stop()
            return result
        } catch {
            await fleet.stop()
            throw error
        }
    }
}

/// The real test identity provider, a logged-in session, and the provider's own count of the
/// refresh tokens it issued (tools/idp/token_family.py reads its database).
enum IdP {
    static var issuer: String { TestIdentityProvider.issuer }
    static let transport = URLSessionTransport()

    static func client(transport: any HTTPTransport = IdP.transport) async throws -> OAuthClient {
        let metadata = try await Discovery(transport: transport).metadata(for: issuer)
        return OAuthClient(metadata: metadata, clientID: "moose-cli", authentication: .none, transport: transport)
    }

    /// Signs alice in (code + PKCE, the provider's own login form) and returns the tokens.
    static func login() async throws -> TokenSet {
        let client = try await client()
        let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: transport)
        let agent = try LoopbackUserAgent(timeout: 30) { url in
            let redirect =
                URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?
                .first { $0.name == "redirect_uri" }?.value ?? "http://127.0.0.1:0/callback"
            try await browser.visit(url, stopAt: redirect)
        }
        let validator = IDTokenValidator(
            issuer: client.metadata.issuer, clientID: client.clientID,
            jwks: JWKSCache(url: try #require(client.metadata.jwksURI), transport: transport))
        let flow = AuthorizationCodeFlow(
            client: client, redirectURI: agent.redirectURI, userAgent: agent, idTokens: validator)
        return try await flow.authorize(AuthorizationParameters(scopes: ["openid"]))
    }

    /// A logged-in session whose access token looks expired (as time would make it).
    static func expiredSession() async throws -> OAuthSession {
        var tokens = try await login()
        tokens.expiresAt = Date().addingTimeInterval(-5)
        return OAuthSession(issuer: issuer, clientID: "moose-cli", tokens: tokens)
    }

    /// How many refresh tokens the provider issued in the family of `refreshToken` (1 after the
    /// login, +1 per refresh): exact, whatever other tests do at the same time.
    static func familySize(of refreshToken: String) -> Int {
        let (status, output) = PG.run(
            "/usr/bin/env", ["python3", LocalServer.repositoryRoot + "/tools/idp/token_family.py"],
            stdin: refreshToken, timeout: 30)
        guard status == 0 else { return -1 }
        return Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }
}

/// The real transport, wrapped: counts token-endpoint requests, can delay them (a slow provider)
/// and can run a hook just before one is sent.
final class TokenSpy: HTTPTransport, Sendable {
    let inner: any HTTPTransport
    private let state = Mutex<(calls: Int, delay: TimeInterval)>((0, 0))
    private let hook = Mutex<(@Sendable () async -> Void)?>(nil)

    init(_ inner: any HTTPTransport = IdP.transport) { self.inner = inner }

    var tokenCalls: Int { state.withLock { $0.calls } }
    func delay(_ seconds: TimeInterval) { state.withLock { $0.delay = seconds } }
    func beforeTokenRequest(_ body: @escaping @Sendable () async -> Void) { hook.withLock { $0 = body } }

    func send(_ request: APIRequest) async throws -> APIResponse {
        guard (request.url?.path ?? "").hasPrefix("/token") else { return try await inner.send(request) }
        let delay = state.withLock { state -> TimeInterval in
            state.calls += 1
            return state.delay
        }
        if let hook = hook.withLock({ $0 }) { await hook() }
        if delay > 0 { try await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000)) }
        return try await inner.send(request)
    }
}

/// The `moose-store-worker` binary built next to the tests.
enum WorkerBinary {
    static let path = builtExecutable("moose-store-worker")
}

/// A child process whose output lines are read as they come (the kill -9 tests wait for a line).
final class Child: Sendable {
    let process = TestProcess()
    private let pipe = Pipe()
    private let lines = Mutex<(buffer: String, lines: [String])>(("", []))

    init(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lines.withLock { state in
                state.buffer += String(decoding: data, as: UTF8.self)
                while let newline = state.buffer.firstIndex(of: "\n") {
                    state.lines.append(String(state.buffer[..<newline]))
                    state.buffer = String(state.buffer[state.buffer.index(after: newline)...])
                }
            }
        }
        try process.run()
    }

    var output: [String] { lines.withLock { $0.lines } }

    func waitForLine(timeout: TimeInterval = 30, _ predicate: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = output.first(where: predicate) { return line }
            if !process.isRunning { usleep(50_000); return output.first(where: predicate) }
            usleep(2_000)
        }
        return nil
    }

    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Waits for the exit (SIGKILL after `timeout`) and returns the status.
    func finish(timeout: TimeInterval = 60) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(5_000) }
        if process.isRunning { kill9() }
        process.waitUntilExit()
        usleep(50_000)
        pipe.fileHandleForReading.readabilityHandler = nil
        let rest = pipe.fileHandleForReading.readDataToEndOfFile()
        lines.withLock { state in
            state.buffer += String(decoding: rest, as: UTF8.self)
            for line in state.buffer.split(separator: "\n") { state.lines.append(String(line)) }
            state.buffer = ""
        }
        return process.terminationStatus
    }
}
#endif
