#if MoosePostgres
import Foundation
import MooseCrypto
import MooseHTTP
import MooseOAuth
import MoosePostgres
import MooseSealing
import MooseTestSupport
import Synchronization
import Testing

/// A logged-in session with an expired access token in a fresh schema, and a key file the
/// replicas (processes or in-process storages) share.
struct FleetFixture {
    let schema = PG.freshSchema()
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-pg-fleet-\(UUID().uuidString)")
    let keyFile: String
    let original: OAuthSession

    init() async throws {
        keyFile = folder.appendingPathComponent("store.key").path
        original = try await IdP.expiredSession()
        let session = original
        try await PostgresSessionStorage.withRunning(
            try PostgresStorageConfiguration(url: try PG.direct(schema: schema)),
            masterKey: .keyFile(keyFile)
        ) { storage in
            _ = try await storage.replace(session, key: "default")
        }
    }

    var key: MasterKeySource { .keyFile(keyFile) }
    var firstRefreshToken: String { original.tokens.refreshToken ?? "" }

    func cleanUp() async {
        try? FileManager.default.removeItem(at: folder)
        await PG.dropSchema(schema)
    }

    /// A replica in this process: its own storage (pool) and coordinator, refreshing at the IdP through `spy`.
    func coordinator(
        _ storage: any SessionStorage, spy: TokenSpy, configuration: RefreshCoordinator.Configuration = .init(),
        after: (@Sendable () async throws -> Void)? = nil
    ) async throws -> RefreshCoordinator {
        let client = try await IdP.client(transport: spy)
        return RefreshCoordinator(key: "default", storage: storage, configuration: configuration) { old in
            let fresh = try await client.refresh(old)
            try await after?()
            return fresh
        }
    }

    /// What the store holds now.
    func stored() async throws -> StoredSession? {
        try await PostgresSessionStorage.withRunning(
            try PostgresStorageConfiguration(url: try PG.direct(schema: schema)), masterKey: key
        ) {
            try await $0.load("default")
        }
    }
}

extension PostgresTests {
    @Suite struct Replicas {
        /// 8 replica processes × 50 tasks, each process with its own pool and coordinator, on an
        /// expired session: one refresh at the provider (counted in its database), one token
        /// everywhere, and the refresh token left in the store still works.
        @Test(arguments: ["direct", "pgbouncer"])
        func eightReplicaProcessesOfFiftyTasksCauseOneRefresh(_ route: String) async throws {
            let fixture = try await FleetFixture()
            let url = route == "direct" ? try PG.direct(schema: fixture.schema) : try PG.bouncer(schema: fixture.schema)
            let workers = try (0..<8).map { _ in
                try Child(WorkerBinary.path, ["pg-tokens", url, fixture.keyFile, "default", "50"])
            }
            var printed: [String] = []
            for worker in workers {
                let status = worker.finish(timeout: 60)
                let output = worker.output
                #expect(status == 0, "worker said: \(output)")
                let tokens = output.filter { $0.hasPrefix("token ") }
                #expect(tokens.count == 1, "one process's 50 tasks got different tokens: \(output)")
                printed += tokens
                #expect(!output.joined().contains(PG.password))
            }
            #expect(printed.count == 8 && Set(printed).count == 1, "the replicas got different tokens: \(printed)")
            #expect(
                IdP.familySize(of: fixture.firstRefreshToken) == 2,
                "the provider issued more than one refresh for this session")
            let stored = try #require(try await fixture.stored()?.session)
            #expect(
                stored.state == .active && printed.first == "token \(TokenSet.fingerprint(stored.tokens.accessToken))")
            // The stored refresh token is the live one.
            let client = try await IdP.client()
            #expect(try await client.refresh(stored.tokens).refreshToken != nil)
            #expect(IdP.familySize(of: fixture.firstRefreshToken) == 3)
            await fixture.cleanUp()
        }

        /// The replica holding the lease is killed (-9) while its refresh waits to be sent, ten times:
        /// each time another replica refreshes once the lease lapsed; nothing is lost, no invalid_grant.
        @Test func aRefresherKilledMidRefreshTenTimesLosesNothing() async throws {
            let fixture = try await FleetFixture()
            let url = try PG.direct(schema: fixture.schema)
            for round in 1...10 {
                // Expire the stored token again (as time would).
                try await PostgresSessionStorage.withRunning(
                    try PostgresStorageConfiguration(url: url), masterKey: fixture.key
                ) { storage in
                    let stored = try #require(try await storage.load("default"))
                    var session = stored.session
                    session.tokens.expiresAt = Date().addingTimeInterval(-5)
                    _ = try await storage.save(
                        session, key: "default", expectedGeneration: stored.generation, lease: nil)
                }
                let doomed = try Child(
                    WorkerBinary.path, ["pg-tokens", url, fixture.keyFile, "default", "5", "1", "60"])
                let refreshing = doomed.waitForLine(timeout: 30) { $0 == "refreshing" }
                #expect(refreshing != nil, "round \(round): the replica never started its refresh: \(doomed.output)")
                doomed.kill9()
                let killedAt = Date()
                let survivor = try Child(WorkerBinary.path, ["pg-tokens", url, fixture.keyFile, "default", "5", "1"])
                #expect(survivor.finish(timeout: 30) == 0, "round \(round): \(survivor.output)")
                #expect(
                    survivor.output.filter { $0.hasPrefix("token ") }.count == 1, "round \(round): \(survivor.output)")
                #expect(!survivor.output.contains { $0.contains("invalidGrant") || $0.contains("needsLogin") })
                #expect(
                    Date().timeIntervalSince(killedAt) >= 0.5,
                    "round \(round): the lease of the killed replica did not hold")
                #expect(
                    IdP.familySize(of: fixture.firstRefreshToken) == round + 1,
                    "round \(round): a refresh token was spent twice or lost")
            }
            let stored = try #require(try await fixture.stored()?.session)
            #expect(stored.state == .active)
            #expect(try await IdP.client().refresh(stored.tokens).refreshToken != nil)
            await fixture.cleanUp()
        }

        /// With the coordinator's default 30 s `leaseTTL`, a replica killed while it holds the lease
        /// keeps the others waiting only the storage's `leaseLifetime` (5 s), not 30 s (issue "A
        /// refresh survives its caller", §1): the survivor refreshes within seconds, nothing is lost.
        @Test func aKilledReplicasLeaseLapsesAfterTheStoragesShortLifetime() async throws {
            let fixture = try await FleetFixture()
            let url = try PG.direct(schema: fixture.schema)
            let doomed = try Child(WorkerBinary.path, ["pg-tokens", url, fixture.keyFile, "default", "5", "30", "60"])
            #expect(
                doomed.waitForLine(timeout: 30) { $0 == "refreshing" } != nil,
                "the replica never started its refresh: \(doomed.output)")
            doomed.kill9()
            let killedAt = Date()
            let survivor = try Child(WorkerBinary.path, ["pg-tokens", url, fixture.keyFile, "default", "5", "30"])
            #expect(survivor.finish(timeout: 60) == 0, "\(survivor.output)")
            let waited = Date().timeIntervalSince(killedAt)
            #expect(survivor.output.filter { $0.hasPrefix("token ") }.count == 1, "\(survivor.output)")
            #expect(
                waited >= 2 && waited < 12,
                "the survivor waited \(waited) s (the lease lives 5 s between renewals; the coordinator's ttl is 30 s)")
            #expect(IdP.familySize(of: fixture.firstRefreshToken) == 2, "a refresh token was spent twice or lost")
            await fixture.cleanUp()
        }

        /// A refresh slower than the lease's ttl (the real transport, delayed) keeps its lease —
        /// renewed while it runs — so another replica waits and adopts instead of refreshing again.
        @Test func aRefreshSlowerThanTheLeaseTTLKeepsItsLease() async throws {
            let fixture = try await FleetFixture()
            try await Fleet.with { fleet in
                let url = try PG.direct(schema: fixture.schema)
                let slowSpy = TokenSpy(), otherSpy = TokenSpy()
                slowSpy.delay(3) // three lease lifetimes (renewed every third of one: a loaded machine may stall it)
                var configuration = RefreshCoordinator.Configuration()
                configuration.leaseTTL = 1
                let slow = try await fixture.coordinator(
                    try fleet.storage(url, key: fixture.key), spy: slowSpy, configuration: configuration)
                let other = try await fixture.coordinator(
                    try fleet.storage(url, key: fixture.key), spy: otherSpy, configuration: configuration)
                async let first = slow.accessToken()
                while slowSpy.tokenCalls == 0 { try await Task.sleep(nanoseconds: 10_000_000) }
                let second = try await other.accessToken()
                #expect(try await first.value == second.value)
                #expect(
                    slowSpy.tokenCalls == 1 && otherSpy.tokenCalls == 0,
                    "the lease lapsed during a slow refresh and a second refresh ran")
                #expect(IdP.familySize(of: fixture.firstRefreshToken) == 2)
            }
            await fixture.cleanUp()
        }

        /// A lease that lapses anyway (its renewals fail) and is taken over: the old holder's
        /// commit cannot land, the session stays whole, and the winner's tokens are adopted.
        @Test func aLostLeaseCommitsNothingAndTheWinnersTokensAreAdopted() async throws {
            let fixture = try await FleetFixture()
            try await Fleet.with { fleet in
                let url = try PG.direct(schema: fixture.schema)
                var configuration = RefreshCoordinator.Configuration()
                configuration.leaseTTL = 0.5
                let loserSpy = TokenSpy(), winnerSpy = TokenSpy()
                loserSpy.delay(1.5)
                let loser = try await fixture.coordinator(
                    NoRenewals(try fleet.storage(url, key: fixture.key)), spy: loserSpy, configuration: configuration)
                let winner = try await fixture.coordinator(
                    try fleet.storage(url, key: fixture.key), spy: winnerSpy, configuration: configuration)
                async let lost = loser.accessToken()
                while loserSpy.tokenCalls == 0 { try await Task.sleep(nanoseconds: 10_000_000) }
                try await Task.sleep(nanoseconds: 700_000_000) // the loser's lease has lapsed
                let won = try await winner.refreshNow()
                let adopted = try await lost
                #expect(adopted.value == won.value, "the loser's tokens overwrote the winner's or were handed out")
                let stored = try #require(try await fixture.stored()?.session)
                #expect(stored.state == .active && stored.tokens.accessToken == won.value)
                #expect(IdP.familySize(of: fixture.firstRefreshToken) == 2)
            }
            await fixture.cleanUp()
        }

        /// PostgreSQL is down before a refresh: "store unavailable", and the provider sees no
        /// refresh request (no refresh token spent, nothing marked as needing a login).
        @Test func postgresStoppedBeforeARefreshIsStoreUnavailable() async throws {
            let fixture = try await FleetFixture()
            try await Fleet.with { fleet in
                let storage = try fleet.storage(
                    try PG.direct(schema: fixture.schema, "connect_timeout=2"), key: fixture.key)
                try await storage.prepare()
                let spy = TokenSpy()
                let coordinator = try await fixture.coordinator(storage, spy: spy)
                try PG.ctl("stop-db")
                let outcome: (any Error)?
                do {
                    _ = try await coordinator.accessToken()
                    outcome = nil
                } catch {
                    outcome = error
                }
                try PG.ctl("start-db")
                #expect((outcome as? OAuthError)?.code == OAuthError.storeUnavailable, "\(String(describing: outcome))")
                #expect(!"\(String(describing: outcome))".contains(PG.password))
                #expect(spy.tokenCalls == 0, "a refresh token was spent while the store was down")
                #expect(IdP.familySize(of: fixture.firstRefreshToken) == 1)
                // Nothing was marked as needing a login: once PostgreSQL is back, the same coordinator refreshes.
                let token = try await coordinator.accessToken()
                #expect(spy.tokenCalls == 1 && token.value != fixture.original.tokens.accessToken)
                #expect(try await fixture.stored()?.session.state == .active)
            }
            await fixture.cleanUp()
        }

        /// PostgreSQL restarts while the provider is answering: the rotated tokens reach the store
        /// (the write is retried on a new connection) and the stored refresh token is the live one.
        @Test func postgresRestartedDuringARefreshLosesNothing() async throws {
            let fixture = try await FleetFixture()
            try await Fleet.with { fleet in
                let storage = try fleet.storage(try PG.direct(schema: fixture.schema), key: fixture.key)
                try await storage.prepare()
                let started = try await PG.sql("SELECT pg_postmaster_start_time()::text").first?.decode(String.self)
                let spy = TokenSpy()
                spy.beforeTokenRequest { try? PG.ctl("restart-db") } // the IdP is asked while PostgreSQL restarts
                let coordinator = try await fixture.coordinator(storage, spy: spy)
                let token = try await coordinator.accessToken()
                #expect(spy.tokenCalls == 1)
                let restarted = try await PG.sql("SELECT pg_postmaster_start_time()::text").first?.decode(String.self)
                #expect(started != nil && restarted != started, "PostgreSQL did not restart during the refresh")
                if await coordinator.hasPendingWrite { #expect(await coordinator.persistPendingWrite(timeout: 10)) }
                let stored = try #require(try await fixture.stored()?.session)
                #expect(stored.tokens.accessToken == token.value, "the rotated tokens never reached the store")
                #expect(
                    try await IdP.client().refresh(stored.tokens).refreshToken != nil,
                    "the stored refresh token is not the live one")
            }
            await fixture.cleanUp()
        }

        /// 200 refresh cycles, rotation on, across 4 replicas (each its own pool and coordinator)
        /// racing: every refresh uses the refresh token the previous one stored — no invalid_grant,
        /// no lost session.
        @Test func twoHundredRotationsAcrossFourReplicas() async throws {
            let fixture = try await FleetFixture()
            try await Fleet.with { fleet in
                let url = try PG.direct(schema: fixture.schema)
                var configuration = RefreshCoordinator.Configuration()
                configuration.refreshLimit = 1000
                let spy = TokenSpy()
                var replicas: [RefreshCoordinator] = []
                for _ in 0..<4 {
                    replicas.append(
                        try await fixture.coordinator(
                            try fleet.storage(url, key: fixture.key), spy: spy, configuration: configuration))
                }
                let failures = try await withThrowingTaskGroup(of: [String].self) { group in
                    for replica in replicas {
                        group.addTask {
                            var failures: [String] = []
                            for _ in 0..<50 {
                                do { _ = try await replica.refreshNow() } catch { failures.append("\(error)") }
                            }
                            return failures
                        }
                    }
                    var all: [String] = []
                    for try await failures in group { all += failures }
                    return all
                }
                #expect(failures.isEmpty, "\(failures.count) refreshes failed: \(failures.prefix(3))")
                #expect(spy.tokenCalls == 200)
                #expect(IdP.familySize(of: fixture.firstRefreshToken) == 201)
                let stored = try #require(try await fixture.stored()?.session)
                #expect(stored.state == .active)
                #expect(try await IdP.client().refresh(stored.tokens).refreshToken != nil)
            }
            await fixture.cleanUp()
        }
    }
}

/// The real storage whose lease renewals fail (as if its database connection hung): the lease lapses.
struct NoRenewals: SessionStorage {
    let base: PostgresSessionStorage
    init(_ base: PostgresSessionStorage) { self.base = base }
    func load(_ key: String) async throws -> StoredSession? { try await base.load(key) }
    func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?, lease: SessionLease?) async throws
        -> Int64
    {
        try await base.save(session, key: key, expectedGeneration: expectedGeneration, lease: lease)
    }
    func replace(_ session: OAuthSession, key: String) async throws -> Int64 {
        try await base.replace(session, key: key)
    }
    func delete(_ key: String) async throws -> Bool { try await base.delete(key) }
    func keys() async throws -> [String] { try await base.keys() }
    func acquireLease(_ name: String, ttl: TimeInterval, timeout: TimeInterval) async throws -> SessionLease {
        try await base.acquireLease(name, ttl: ttl, timeout: timeout)
    }
    func renewLease(_ lease: SessionLease, ttl: TimeInterval) async throws -> SessionLease {
        throw OAuthError(OAuthError.storeUnavailable, "injected: the renewal did not reach the database")
    }
    func releaseLease(_ lease: SessionLease) async throws { try await base.releaseLease(lease) }
}
#endif
