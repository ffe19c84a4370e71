import Foundation
import MooseCrypto
import MooseHTTP
import MooseOAuth
import MooseOAuthSystem
import MoosePostgres
import MooseSealing
import MooseSecretStore
import MooseSQLiteStorage
import MooseURLSession
import Synchronization

/// The PostgreSQL storage against its anchors, in one run: the coordinator's hot path (PostgreSQL-
/// vs SQLite-backed), one refresh through each storage (and a bare refresh request), 16 replicas
/// × 100 callers after expiry against one bare refresh, and 1,000 sessions refreshing at once
/// through one pool against the same through one SQLite file.
enum PostgresBench {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    static func ms(_ start: UInt64) -> Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6 }
    static func f(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }

    static func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let base = environment["MOOSE_PG_URL"], let issuer = environment["MOOSE_IDP_ISSUER"] else {
            print("\n(PostgreSQL benchmarks skipped: set MOOSE_PG_URL and MOOSE_IDP_ISSUER, as tools/bench/run does)")
            return
        }
        let key = MasterKeySource.raw(try SecureRandom.bytes(count: 32))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-pg-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        func url(_ schema: String, _ extra: String = "") -> String { base + "?schema=\(schema)" + extra }
        let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 16)

        try await hotPath(url("bench_hot_\(suffix)"), key: key, folder: folder)
        try await oneRefresh(url("bench_one_\(suffix)"), key: key, folder: folder, issuer: issuer)
        try await herd(url("bench_herd_\(suffix)"), key: key, issuer: issuer)
        try await throughput(url("bench_many_\(suffix)", "&pool_max=20"), key: key, folder: folder)
        for schema in ["hot", "one", "herd", "many"] { await dropSchema(base, "bench_\(schema)_\(suffix)") }
    }

    /// Only the 16 × 100 row, `runs` times (its spread on a shared machine is wide).
    /// `moose-bench pg-ops`: the storage's own steps, uncontended, one after another (ms per step): a
    /// read, a lease taken and released, and a refresher's whole storage path (lease, read,
    /// compare-and-set, release) — to set against the herd's added time.
    static func runOps() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let base = environment["MOOSE_PG_URL"] else { return }
        let key = MasterKeySource.raw(try SecureRandom.bytes(count: 32))
        let schema = "bench_ops_" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        try await withStorages([base + "?schema=\(schema)&pool_max=4"], key: key) { storages in
            let storage = storages[0]
            var tokens = TokenSet(accessToken: String(repeating: "a", count: 800), expiresAt: Date())
            tokens.refreshToken = String(repeating: "r", count: 40)
            tokens.idToken = String(repeating: "i", count: 900)
            let session = OAuthSession(issuer: "https://x", clientID: "c", tokens: tokens)
            _ = try await storage.replace(session, key: "p")
            func time(_ what: String, _ n: Int, _ body: () async throws -> Void) async rethrows {
                let t = DispatchTime.now().uptimeNanoseconds
                for _ in 0..<n { try await body() }
                print(what, f(ms(t) / Double(n)), "ms")
            }
            for _ in 0..<2 {
                try await time("load", 200) { _ = try await storage.load("p") }
                try await time("lease+release", 200) {
                    let lease = try await storage.acquireLease("refresh:p", ttl: 5, timeout: 1)
                    try await storage.releaseLease(lease)
                }
                try await time("lease+save+release", 200) {
                    let lease = try await storage.acquireLease("refresh:p", ttl: 5, timeout: 1)
                    let stored = try await storage.load("p")
                    _ = try await storage.save(session, key: "p", expectedGeneration: stored?.generation, lease: lease)
                    try await storage.releaseLease(lease)
                }
            }
        }
        await dropSchema(base, schema)
    }

    static func runHerd(runs: Int) async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let base = environment["MOOSE_PG_URL"], let issuer = environment["MOOSE_IDP_ISSUER"] else { return }
        let key = MasterKeySource.raw(try SecureRandom.bytes(count: 32))
        for run in 0..<runs {
            let schema = "bench_herd_\(run)_" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
            try await herd(base + "?schema=\(schema)", key: key, issuer: issuer)
            await dropSchema(base, schema)
        }
    }

    // MARK: - Helpers

    /// Runs `body` with storages that run (pools open) for its length.
    static func withStorages<R>(
        _ urls: [String], key: MasterKeySource,
        _ body: ([PostgresSessionStorage]) async throws -> R
    ) async throws -> R {
        let storages = try urls.map { try PostgresSessionStorage(url: $0, masterKey: key) }
        let tasks = storages.map { storage in Task { await storage.run() } }
        defer { for task in tasks { task.cancel() } }
        for storage in storages { try await storage.prepare() }
        return try await body(storages)
    }

    static func dropSchema(_ base: String, _ schema: String) async {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["psql", "-X", "-q", base, "-c", "DROP SCHEMA IF EXISTS \(schema) CASCADE"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try? process.run()
        process.waitUntilExit()
    }

    static func client(_ issuer: String, transport: any HTTPTransport) async throws -> OAuthClient {
        OAuthClient(
            metadata: try await Discovery(transport: transport).metadata(for: issuer), clientID: "moose-cli",
            transport: transport)
    }

    /// A real login at the test provider (code + PKCE; tools/idp/headless_browser.py signs in).
    static func login(_ client: OAuthClient, transport: any HTTPTransport) async throws -> TokenSet {
        let script = root.appendingPathComponent("tools/idp/headless_browser.py").path
        let agent = try LoopbackUserAgent(timeout: 60) { url in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, url.absoluteString]
            process.standardOutput = FileHandle.nullDevice
            try process.run()
        }
        guard let jwks = client.metadata.jwksURI else {
            throw OAuthError(OAuthError.discovery, "the test provider names no jwks_uri")
        }
        let validator = IDTokenValidator(
            issuer: client.metadata.issuer, clientID: client.clientID,
            jwks: JWKSCache(url: jwks, transport: transport))
        let flow = AuthorizationCodeFlow(
            client: client, redirectURI: agent.redirectURI, userAgent: agent, idTokens: validator)
        return try await flow.authorize(AuthorizationParameters(scopes: ["openid"]))
    }

    static func expired(_ tokens: TokenSet, issuer: String) -> OAuthSession {
        var tokens = tokens
        tokens.expiresAt = Date().addingTimeInterval(-5)
        return OAuthSession(issuer: issuer, clientID: "moose-cli", tokens: tokens)
    }

    // MARK: - Hot path

    /// A valid cached token: the coordinator never touches its storage, whichever it is.
    static func hotPath(_ url: String, key: MasterKeySource, folder: URL) async throws {
        let tokens = TokenSet(
            accessToken: String(repeating: "a", count: 40), expiresAt: Date().addingTimeInterval(3600))
        let session = OAuthSession(issuer: "https://x", clientID: "c", tokens: tokens)
        let store = try SecretStore(
            path: folder.appendingPathComponent("hot.sqlite").path, masterKey: .raw(try SecureRandom.bytes(count: 32)))
        let sqlite = EncryptedSessionStorage(store: store)
        try sqlite.replaceNow(session, key: "p")
        try await withStorages([url], key: key) { storages in
            _ = try await storages[0].replace(session, key: "p")
            let onSQLite = benchCoordinator(key: "p", storage: sqlite) { $0 }
            let onPostgres = benchCoordinator(key: "p", storage: storages[0]) { $0 }
            _ = try await onSQLite.accessToken()
            _ = try await onPostgres.accessToken()
            let stats = try await compare(
                ["sqlite", "postgres"], rounds: 15, batch: 200_000,
                [
                    { n in for _ in 0..<n { blackHole(try await onSQLite.accessToken()) } },
                    { n in for _ in 0..<n { blackHole(try await onPostgres.accessToken()) } }
                ])
            let s = stats["sqlite"]?.median ?? 0, p = stats["postgres"]?.median ?? 0
            print(
                "\n## PostgreSQL storage: the coordinator's hot path (valid cached token, ns per call, median of 15 rounds)\n"
            )
            print("| SQLite-backed coordinator | PostgreSQL-backed coordinator | ratio | target |")
            print("|---|---|---|---|")
            print("| \(f(s, 1)) | \(f(p, 1)) | \(f(p / s))x | unchanged (≈ 1.0x) |")
        }
    }

    // MARK: - One refresh

    /// One refresh through the coordinator (unleased read, lease, re-read, the IdP's refresh_token
    /// grant, compare-and-set, release) on PostgreSQL and on SQLite, and a bare grant: three refresh
    /// chains at the test provider (rotation on), interleaved, median of 21.
    static func oneRefresh(_ url: String, key: MasterKeySource, folder: URL, issuer: String) async throws {
        let transport = URLSessionTransport()
        let client = try await client(issuer, transport: transport)
        var bareTokens = try await login(client, transport: transport)
        let store = try SecretStore(
            path: folder.appendingPathComponent("one.sqlite").path, masterKey: .raw(try SecureRandom.bytes(count: 32)))
        let sqlite = EncryptedSessionStorage(store: store)
        try sqlite.replaceNow(expired(try await login(client, transport: transport), issuer: issuer), key: "p")
        var configuration = RefreshCoordinator.Configuration()
        configuration.refreshLimit = 10_000
        try await withStorages([url], key: key) { storages in
            _ = try await storages[0].replace(
                expired(try await login(client, transport: transport), issuer: issuer), key: "p")
            let onSQLite = benchCoordinator(key: "p", storage: sqlite, configuration: configuration) {
                try await client.refresh($0)
            }
            let onPostgres = benchCoordinator(key: "p", storage: storages[0], configuration: configuration) {
                try await client.refresh($0)
            }
            var bare: [Double] = [], lite: [Double] = [], postgres: [Double] = []
            for round in 0..<22 {
                var t = DispatchTime.now().uptimeNanoseconds
                bareTokens = try await client.refresh(bareTokens)
                let b = ms(t)
                t = DispatchTime.now().uptimeNanoseconds
                _ = try await onSQLite.refreshNow()
                let l = ms(t)
                t = DispatchTime.now().uptimeNanoseconds
                _ = try await onPostgres.refreshNow()
                let p = ms(t)
                if round > 0 { bare.append(b); lite.append(l); postgres.append(p) } // the first round warms up
            }
            let b = median(bare), l = median(lite), p = median(postgres)
            print(
                "\n## PostgreSQL storage: one refresh through the coordinator (ms, median of 21 interleaved rounds)\n")
            print(
                "| bare refresh_token grant | through SQLite | through PostgreSQL | PostgreSQL / SQLite | target | PostgreSQL / bare |"
            )
            print("|---|---|---|---|---|---|")
            print("| \(f(b)) | \(f(l)) | \(f(p)) | \(f(p / l))x | ≤ 1.3x | \(f(p / b))x |")
        }
    }

    // MARK: - 16 replicas × 100 callers

    /// 16 replicas (each its own pool, LISTEN connection and coordinator) × 100 callers on an expired
    /// session, until all 1,600 hold the fresh token, against one bare refresh_token grant.
    static func herd(_ url: String, key: MasterKeySource, issuer: String) async throws {
        let transport = URLSessionTransport()
        let client = try await client(issuer, transport: transport)
        var bareTokens = try await login(client, transport: transport)
        let first = try await login(client, transport: transport)
        try await withStorages(Array(repeating: url + "&pool_max=4", count: 16), key: key) { storages in
            _ = try await storages[0].replace(expired(first, issuer: issuer), key: "p")
            for storage in storages { _ = try await storage.load("p") } // every pool has a connection
            let deadline = Date().addingTimeInterval(10)
            while !storages.allSatisfy(\.notificationsAreLive), Date() < deadline {
                try await Task.sleep(nanoseconds: 20_000_000)
            }
            var bare: [Double] = [], herd: [Double] = [], before: [Double] = [], after: [Double] = []
            for round in 0..<8 {
                var t = DispatchTime.now().uptimeNanoseconds
                bareTokens = try await client.refresh(bareTokens)
                let b = ms(t)
                // When the one grant starts and ends, to split the herd's added time around it.
                let grant = Mutex<(start: UInt64, end: UInt64)>((0, 0))
                let replicas = storages.map { storage in
                    benchCoordinator(key: "p", storage: storage) { old in
                        grant.withLock { $0.start = DispatchTime.now().uptimeNanoseconds }
                        defer { grant.withLock { $0.end = DispatchTime.now().uptimeNanoseconds } }
                        return try await client.refresh(old)
                    }
                }
                t = DispatchTime.now().uptimeNanoseconds
                let values = try await withThrowingTaskGroup(of: String.self) { group in
                    for replica in replicas {
                        for _ in 0..<100 { group.addTask { try await replica.accessToken().value } }
                    }
                    var values = Set<String>()
                    for try await value in group { values.insert(value) }
                    return values
                }
                let h = ms(t)
                precondition(values.count == 1, "the replicas got \(values.count) different tokens")
                let (start, end) = grant.withLock { $0 }
                if round > 0 {
                    bare.append(b)
                    herd.append(h)
                    before.append(Double(start - t) / 1e6)
                    after.append(h - Double(end - t) / 1e6)
                }
                // Expire the stored session again for the next round.
                let stored = try await storages[0].load("p")
                if let stored {
                    var session = stored.session
                    session.tokens.expiresAt = Date().addingTimeInterval(-5)
                    _ = try await storages[0].save(session, key: "p", expectedGeneration: stored.generation, lease: nil)
                }
            }
            let b = median(bare), h = median(herd)
            print(
                "\n## PostgreSQL storage: 16 replicas × 100 callers after expiry, until all hold the fresh token (ms, median of 7)\n"
            )
            print("| one bare refresh_token grant | 16 replicas × 100 callers | ratio | target |")
            print("|---|---|---|---|")
            print("| \(f(b)) | \(f(h)) | \(f(h / b))x | ≤ 1.3x |")
            print(
                "\nSplit (medians): \(f(median(before))) ms before the one grant starts, \(f(median(after))) ms after it ends."
            )
        }
    }

    // MARK: - 1,000 sessions through one pool

    /// 1,000 expired sessions, each with its own coordinator, all refreshing at once through one
    /// storage — one pool of 20 connections, against one SQLite file. The refresh itself is an
    /// in-process stand-in (no provider could answer 1,000 grants fast enough to measure the storage):
    /// this measures the storage's part — reads, lease, compare-and-set, release.
    static func throughput(_ url: String, key: MasterKeySource, folder: URL) async throws {
        let count = 1000
        let refresher: @Sendable (TokenSet) async throws -> TokenSet = { old in
            var fresh = old
            fresh.accessToken = "at-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            fresh.refreshToken = "rt-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            fresh.expiresAt = Date().addingTimeInterval(3600)
            return fresh
        }
        func expiredSession(_ index: Int) -> OAuthSession {
            OAuthSession(
                issuer: "https://id.example.com", clientID: "bench",
                tokens: TokenSet(
                    accessToken: "old-\(index)", refreshToken: "r-\(index)", expiresAt: Date().addingTimeInterval(-5)))
        }
        func refreshAll(_ storage: any SessionStorage) async throws -> Double {
            let coordinators = (0..<count).map {
                benchCoordinator(key: "s\($0)", storage: storage, refresh: refresher)
            }
            let t = DispatchTime.now().uptimeNanoseconds
            try await withThrowingTaskGroup(of: Void.self) { group in
                for coordinator in coordinators { group.addTask { _ = try await coordinator.accessToken() } }
                try await group.waitForAll()
            }
            return ms(t)
        }
        let store = try SecretStore(
            path: folder.appendingPathComponent("many.sqlite").path, masterKey: .raw(try SecureRandom.bytes(count: 32)))
        let sqlite = EncryptedSessionStorage(store: store)
        try await withStorages([url], key: key) { storages in
            var lite: [Double] = [], postgres: [Double] = []
            for _ in 0..<3 {
                for index in 0..<count {
                    try sqlite.replaceNow(expiredSession(index), key: "s\(index)")
                    _ = try await storages[0].replace(expiredSession(index), key: "s\(index)")
                }
                lite.append(try await refreshAll(sqlite))
                postgres.append(try await refreshAll(storages[0]))
            }
            let l = median(lite), p = median(postgres)
            print("\n## PostgreSQL storage: 1,000 sessions refreshing at once (median of 3)\n")
            print("| | ms for all 1,000 | sessions/s |")
            print("|---|---|---|")
            print("| one SQLite file (`synchronous=FULL`) | \(f(l, 0)) | \(f(1000 / l * 1000, 0)) |")
            print("| one PostgreSQL pool (20 connections) | \(f(p, 0)) | \(f(1000 / p * 1000, 0)) |")
            print("\nPostgreSQL / SQLite, time for all 1,000: \(f(p / l))x")
        }
    }
}
