import Foundation
import MooseCrypto
import MooseHTTP
@testable import MooseOAuth
import MooseSQLiteStorage
import MooseSecretStore
import MooseTestSupport
import MooseURLSession
import Synchronization
import Testing

/// Wraps the real transport: counts token-endpoint calls and can inject failures before them.
final class TokenEndpointSpy: HTTPTransport, Sendable {
    let inner: any HTTPTransport
    private let state = Mutex<(calls: Int, failuresLeft: Int, delay: TimeInterval)>((0, 0, 0))
    init(_ inner: any HTTPTransport) { self.inner = inner }
    var tokenCalls: Int { state.withLock { $0.calls } }
    func failNext(_ count: Int) { state.withLock { $0.failuresLeft = count } }
    func delay(_ seconds: TimeInterval) { state.withLock { $0.delay = seconds } }

    func send(_ request: APIRequest) async throws -> APIResponse {
        guard (request.url?.path ?? "").hasPrefix("/token") else { return try await inner.send(request) }
        let (fail, delay) = state.withLock { state -> (Bool, TimeInterval) in
            if state.failuresLeft > 0 { state.failuresLeft -= 1; return (true, state.delay) }
            state.calls += 1
            return (false, state.delay)
        }
        if delay > 0 { try await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000)) }
        if fail { return APIResponse(status: 503, headerFields: [.retryAfter: "0"], body: Data("busy".utf8)) }
        return try await inner.send(request)
    }
}

/// A logged-in session in a fresh store whose access token is made to look expired.
struct CoordinatorFixture {
    let folder: URL
    let key: [UInt8]
    let sessions: EncryptedSessionStorage
    let spy: TokenEndpointSpy
    let client: OAuthClient
    let original: TokenSet

    init() async throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-coordinator-\(UUID().uuidString)")
        key = try SecureRandom.bytes(count: 32)
        let store = try SecretStore(path: folder.appendingPathComponent("store.sqlite").path, masterKey: .raw(key))
        sessions = EncryptedSessionStorage(store: store)
        let (_, tokens, _) = try await LoginIntegrationTests.login(scopes: ["openid"])
        var expired = tokens
        expired.expiresAt = Date().addingTimeInterval(-5)
        original = expired
        try sessions.replaceNow(
            OAuthSession(issuer: TestIdP.issuer, clientID: "moose-cli", tokens: expired), key: "default")
        spy = TokenEndpointSpy(TestIdP.transport)
        client = OAuthClient(metadata: try await TestIdP.metadata(), clientID: "moose-cli", transport: spy)
    }

    func coordinator(_ configuration: RefreshCoordinator.Configuration = RefreshCoordinator.Configuration())
        -> RefreshCoordinator
    {
        let client = self.client
        return RefreshCoordinator(key: "default", storage: sessions, configuration: configuration) {
            try await client.refresh($0)
        }
    }

    func cleanUp() { try? FileManager.default.removeItem(at: folder) }

    /// A short lease (0.3 s) for the lapsed-lease tests.
    static var shortLease: RefreshCoordinator.Configuration {
        var configuration = RefreshCoordinator.Configuration()
        configuration.leaseTTL = 0.3
        return configuration
    }

    /// A coordinator on the real storage whose lease (`shortLease`) is never renewed: it lapses during
    /// any refresh slower than 0.3 s.
    func lapsingCoordinator(_ refresh: @escaping @Sendable (TokenSet) async throws -> TokenSet)
        -> RefreshCoordinator
    {
        let noRenewals = FaultyStorage(sessions, failingSaves: 0, failingRenewals: true)
        return RefreshCoordinator(
            key: "default", storage: noRenewals, configuration: Self.shortLease, refresher: refresh)
    }
}

struct RefreshCoordinatorTests {
    @Test func aThousandConcurrentCallersCauseOneRefresh() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let coordinator = fixture.coordinator()
        #expect(coordinator.cachedAccessToken() == nil) // expired: the hot path says so without a hop
        let tokens = try await withThrowingTaskGroup(of: AccessToken.self) { group in
            for _ in 0..<1000 { group.addTask { try await coordinator.accessToken() } }
            var all: [AccessToken] = []
            for try await token in group { all.append(token) }
            return all
        }
        #expect(fixture.spy.tokenCalls == 1)
        #expect(Set(tokens.map(\.value)).count == 1 && tokens.count == 1000)
        #expect(tokens.first?.value != fixture.original.accessToken)
        // The rotated refresh token was committed before anyone got the new access token.
        let stored = try #require(try fixture.sessions.loadNow("default")?.session)
        #expect(stored.tokens.accessToken == tokens.first?.value)
        #expect(stored.tokens.refreshToken != fixture.original.refreshToken)
        // And now the hot path answers from the snapshot.
        #expect(coordinator.cachedAccessToken()?.value == tokens.first?.value)
    }

    @Test func parallel401sForOneStaleTokenCauseOneRefresh() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let coordinator = fixture.coordinator()
        let stale = AccessToken(value: fixture.original.accessToken, tokenType: "Bearer", expiresAt: nil, generation: 0)
        let fresh = try await withThrowingTaskGroup(of: AccessToken.self) { group in
            for _ in 0..<50 { group.addTask { try await coordinator.refresh(rejecting: stale) } }
            var all: [AccessToken] = []
            for try await token in group { all.append(token) }
            return all
        }
        #expect(fixture.spy.tokenCalls == 1 && Set(fresh.map(\.value)).count == 1)
        // A 401 for the already replaced token: no refresh, the newer token comes back.
        let again = try await coordinator.refresh(rejecting: stale)
        #expect(again.value == fresh.first?.value && fixture.spy.tokenCalls == 1)
    }

    @Test func aCancelledWaiterLeavesAndTheOthersGetTheToken() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        fixture.spy.delay(0.5)
        let coordinator = fixture.coordinator()
        let others = (0..<5).map { _ in Task { try await coordinator.accessToken() } }
        let cancelled = Task { try await coordinator.accessToken() }
        try await Task.sleep(nanoseconds: 100_000_000)
        cancelled.cancel()
        do {
            _ = try await cancelled.value
            Issue.record("the cancelled waiter got a token")
        } catch {
            #expect(error is CancellationError, "\(error)")
        }
        var values = Set<String>()
        for task in others { values.insert(try await task.value.value) }
        #expect(values.count == 1 && fixture.spy.tokenCalls == 1)
    }

    @Test func invalidGrantReachesEveryWaiterAndIsFinal() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        _ = await fixture.client.logout(fixture.original) // revoke the refresh token at the provider
        let callsBefore = fixture.spy.tokenCalls
        let coordinator = fixture.coordinator()
        let results = await withTaskGroup(of: (any Error)?.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    do { _ = try await coordinator.accessToken(); return nil } catch { return error }
                }
            }
            var all: [(any Error)?] = []
            for await result in group { all.append(result) }
            return all
        }
        #expect(results.allSatisfy { ($0 as? OAuthError)?.code == OAuthError.invalidGrant }, "\(results)")
        #expect(fixture.spy.tokenCalls == callsBefore + 1)
        #expect(try fixture.sessions.loadNow("default")?.session.state == .needsReauthentication)
        // A second call makes no network request.
        do {
            _ = try await coordinator.accessToken()
            Issue.record("refreshed a session marked for re-authentication")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.needsLogin)
        }
        #expect(fixture.spy.tokenCalls == callsBefore + 1)
    }

    @Test func transientFailuresRetryWithBoundedDelay() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        fixture.spy.failNext(2)
        var configuration = RefreshCoordinator.Configuration()
        configuration.backoff = 0.1
        let coordinator = fixture.coordinator(configuration)
        let started = Date()
        let token = try await coordinator.accessToken()
        #expect(!token.value.isEmpty && fixture.spy.tokenCalls == 1)
        #expect(Date().timeIntervalSince(started) < 15, "loose: the suite can starve the cooperative pool for seconds")
    }

    @Test func refreshWindowStopsLoops() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        var configuration = RefreshCoordinator.Configuration()
        configuration.refreshLimit = 2
        let coordinator = fixture.coordinator(configuration)
        // The first refresh gave a usable token: it does not count. Each 401 says the token a
        // refresh gave was not usable after all: two of them fill the window, the third is refused.
        var token = try await coordinator.accessToken()
        token = try await coordinator.refresh(rejecting: token)
        token = try await coordinator.refresh(rejecting: token)
        do {
            _ = try await coordinator.refresh(rejecting: token)
            Issue.record("a third refresh for a rejected token inside the window went through")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.refreshLimit)
        }
        #expect(fixture.spy.tokenCalls == 3)
    }

    @Test func authMiddlewareSendsA401dRequestOnceMoreWithTheNewToken() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let coordinator = fixture.coordinator()
        struct UserInfoEndpoint: Endpoint {
            var baseURL: URL { URL(string: TestIdP.issuer)! }
            var path: String { "/userinfo/" }
            var requiresAuthentication: Bool { true }
        }
        let client = APIClient(transport: TestIdP.transport, middlewares: [AuthMiddleware(coordinator: coordinator)])
        let info = try await client.json(from: UserInfoEndpoint())
        #expect(info["sub"]?.string != nil)
        #expect(fixture.spy.tokenCalls == 1) // the expired token was refreshed before the first request

        // A token the provider refuses although it looks valid here: one 401, one refresh, one
        // more send — with RetryPolicy.none too (it used to spend the refresh and then fail as
        // "gave up after 1 attempts").
        var session = try #require(try fixture.sessions.loadNow("default")?.session)
        session.tokens.accessToken = "revoked-but-unexpired"
        session.tokens.expiresAt = Date().addingTimeInterval(3600)
        try fixture.sessions.replaceNow(session, key: "default")
        let strict = APIClient(
            transport: TestIdP.transport, middlewares: [AuthMiddleware(coordinator: fixture.coordinator())],
            retryPolicy: .none)
        let again = try await strict.json(from: UserInfoEndpoint())
        #expect(again["sub"]?.string != nil)
        #expect(fixture.spy.tokenCalls == 2)
    }
}

struct RefreshCoordinatorRobustnessTests {
    @Test func aReadOnlyStoreSpendsNoRefreshToken() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let readOnly = try SecretStore(
            path: fixture.folder.appendingPathComponent("store.sqlite").path,
            masterKey: .raw(fixture.key), readOnly: true)
        let client = fixture.client
        let coordinator = RefreshCoordinator(key: "default", storage: EncryptedSessionStorage(store: readOnly)) {
            try await client.refresh($0)
        }
        do {
            _ = try await coordinator.accessToken()
            Issue.record("refreshed with a read-only store")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.storeUnavailable, "\(error)")
        }
        #expect(
            fixture.spy.tokenCalls == 0, "a refresh token was spent although the store could not keep its successor")
        // The old refresh token still works: nothing was lost.
        #expect(try await fixture.client.refresh(fixture.original).accessToken.isEmpty == false)
    }

    @Test func twoHundredRefreshCyclesWithRotation() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        var configuration = RefreshCoordinator.Configuration()
        configuration.refreshLimit = 1000
        let coordinator = fixture.coordinator(configuration)
        var token = try await coordinator.accessToken()
        var seen = Set([token.value])
        for _ in 0..<199 {
            token = try await coordinator.refresh(rejecting: token)
            seen.insert(token.value)
        }
        #expect(seen.count == 200 && fixture.spy.tokenCalls == 200)
        let stored = try #require(try fixture.sessions.loadNow("default")?.session)
        #expect(stored.state == .active && stored.tokens.accessToken == token.value)
        // The last refresh token in the store still works.
        #expect(try await fixture.client.refresh(stored.tokens).refreshToken != nil)
    }

    @Test func aProcessWhoseRefreshLostTheRaceAdoptsTheOthersTokens() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let client = fixture.client, sessions = fixture.sessions
        // "Process B" spends the old refresh token after "process A" (an old client that takes no
        // lease) has already rotated it and written its tokens: B gets invalid_grant, re-reads, adopts.
        let b = RefreshCoordinator(key: "default", storage: sessions) { old in
            let rotated = try await client.refresh(old)
            var session = try #require(try sessions.loadNow("default")?.session)
            session.tokens = rotated
            try sessions.replaceNow(session, key: "default")
            return try await client.refresh(old) // the old refresh token: invalid_grant
        }
        let token = try await b.accessToken()
        let stored = try #require(try sessions.loadNow("default")?.session)
        #expect(stored.state == .active, "a lost race logged the user out")
        #expect(token.value == stored.tokens.accessToken)
    }

    @Test func aStoreWriteThatFailsAfterTheIdPAnsweredLosesNothing() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let client = fixture.client, sessions = fixture.sessions
        // The real storage, wrapped: its first fenced write fails after the IdP answered (the old
        // refresh token is spent by then).
        let faulty = FaultyStorage(sessions, failingSaves: 1)
        let fresh = Mutex<TokenSet?>(nil)
        let coordinator = RefreshCoordinator(key: "default", storage: faulty) { old in
            let rotated = try await client.refresh(old)
            fresh.withLock { $0 = rotated }
            return rotated
        }
        let token = try await coordinator.accessToken()
        let rotated = try #require(fresh.withLock { $0 })
        #expect(token.value == rotated.accessToken, "the new tokens did not reach the caller")
        #expect(faulty.failedSaves == 1, "the injected write failure did not happen")
        // The coordinator keeps retrying the write: the rotated refresh token reaches the store.
        let deadline = Date().addingTimeInterval(10)
        while try sessions.loadNow("default")?.session.tokens.refreshToken != rotated.refreshToken, Date() < deadline {
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        let stored = try #require(try sessions.loadNow("default")?.session)
        #expect(stored.tokens.refreshToken == rotated.refreshToken, "the rotated refresh token never reached the store")
        #expect(stored.state == .active)
        // And it is the live one.
        _ = try await client.refresh(stored.tokens)
    }

    /// The same failed write, and the app lets go of its coordinator at once (a view model closed, a
    /// request handler done): the background retry keeps it alive until the rotated refresh token is
    /// written — a dropped coordinator does not drop a rotation.
    @Test func aCoordinatorLetGoWithAPendingWriteStillWritesIt() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let client = fixture.client, sessions = fixture.sessions
        let faulty = FaultyStorage(sessions, failingSaves: 1)
        let fresh = Mutex<TokenSet?>(nil)
        var coordinator: RefreshCoordinator? = RefreshCoordinator(key: "default", storage: faulty) { old in
            let rotated = try await client.refresh(old)
            fresh.withLock { $0 = rotated }
            return rotated
        }
        _ = try await coordinator?.accessToken()
        #expect(await coordinator?.hasPendingWrite == true, "the injected write failure did not happen")
        coordinator = nil
        let rotated = try #require(fresh.withLock { $0 })
        let deadline = Date().addingTimeInterval(20)
        while try sessions.loadNow("default")?.session.tokens.refreshToken != rotated.refreshToken, Date() < deadline {
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        #expect(
            try sessions.loadNow("default")?.session.tokens.refreshToken == rotated.refreshToken,
            "the rotated refresh token died with the coordinator")
    }

    /// A refresh slower than the lease's ttl keeps its lease (renewed while it runs): another
    /// "process" waits for it and adopts its tokens instead of refreshing a second time.
    @Test func aSlowRefreshKeepsItsLeaseAndNoSecondRefreshHappens() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let client = fixture.client
        var configuration = RefreshCoordinator.Configuration()
        // A ttl long enough that a starved 2-core machine still renews in time (renewed every ttl/3),
        // short against the refresh: 2.5 lease lifetimes.
        configuration.leaseTTL = 2
        let started = Mutex(false)
        let slow = RefreshCoordinator(key: "default", storage: fixture.sessions, configuration: configuration) { old in
            started.withLock { $0 = true }
            try await Task.sleep(nanoseconds: 5_000_000_000)
            return try await client.refresh(old)
        }
        let other = fixture.coordinator(configuration)
        async let first = slow.accessToken()
        while !started.withLock({ $0 }) { try await Task.sleep(nanoseconds: 10_000_000) }
        let second = try await other.accessToken()
        #expect(try await first.value == second.value)
        #expect(fixture.spy.tokenCalls == 1, "the lease lapsed during a slow refresh and a second refresh ran")
    }

    /// When a refresher's lease does lapse (its renewals fail) and another holder commits first,
    /// its own fenced commit fails and it adopts the winner's tokens. The loser's answer stands for a
    /// provider with a reuse grace period, which answers the old refresh token again.
    @Test func aLostLeaseMakesTheCommitFailAndTheWinnersTokensAreAdopted() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let sessions = fixture.sessions, original = fixture.original
        let configuration = CoordinatorFixture.shortLease
        let started = Mutex(false)
        let loser = fixture.lapsingCoordinator { old in
            started.withLock { $0 = true }
            // The order is the point, not the timing: the loser's answer comes after the winner's commit.
            let deadline = Date().addingTimeInterval(60)
            while try sessions.loadNow("default")?.session.tokens.refreshToken == original.refreshToken,
                Date() < deadline
            {
                try await Task.sleep(nanoseconds: 20_000_000)
            }
            var graced = old
            graced.accessToken = "graced-" + UUID().uuidString
            graced.refreshToken = "graced-" + UUID().uuidString
            graced.expiresAt = Date().addingTimeInterval(300)
            return graced
        }
        async let lost = loser.accessToken()
        while !started.withLock({ $0 }) { try await Task.sleep(nanoseconds: 10_000_000) }
        try await Task.sleep(nanoseconds: 400_000_000) // the loser's lease has lapsed
        let winner = try await fixture.coordinator(configuration).refreshNow()
        let adopted = try await lost
        #expect(adopted.value == winner.value, "the loser's tokens overwrote the winner's or were handed out")
        #expect(try sessions.loadNow("default")?.session.tokens.accessToken == winner.value)
    }

    /// The other order, at the real provider (no reuse grace): a refresher whose lease lapsed is
    /// answered first, and the holder that took the lease over sends the same refresh token and is
    /// refused. The first answer is the live one: it is committed over the lapsed lease, and the
    /// refused holder waits for it and adopts it — the session is not lost and nobody is logged out.
    @Test func aLapsedHolderAnsweredFirstCommitsAndTheRefusedHolderAdoptsItsTokens() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let client = fixture.client, sessions = fixture.sessions
        let configuration = CoordinatorFixture.shortLease
        let started = Mutex(false), takenOver = Mutex(false), answered = Mutex(false)
        let lapsed = fixture.lapsingCoordinator { old in
            started.withLock { $0 = true }
            while !takenOver.withLock({ $0 }) { try await Task.sleep(nanoseconds: 10_000_000) }
            let rotated = try await client.refresh(old)
            answered.withLock { $0 = true }
            return rotated
        }
        let successor = RefreshCoordinator(key: "default", storage: sessions, configuration: configuration) { old in
            takenOver.withLock { $0 = true }
            while !answered.withLock({ $0 }) { try await Task.sleep(nanoseconds: 10_000_000) }
            return try await client.refresh(old) // the spent refresh token: invalid_grant
        }
        async let first = lapsed.accessToken()
        while !started.withLock({ $0 }) { try await Task.sleep(nanoseconds: 10_000_000) }
        try await Task.sleep(nanoseconds: 400_000_000) // the first holder's lease has lapsed
        let second = try await successor.refreshNow()
        let firstToken = try await first
        #expect(firstToken.value == second.value, "the refused holder did not adopt the first answer")
        let stored = try #require(try sessions.loadNow("default")?.session)
        #expect(stored.state == .active, "the refusal caused by the first answer logged the session out")
        #expect(stored.tokens.accessToken == firstToken.value)
        #expect(stored.attributes[RefreshCoordinator.rotationAttribute] == nil)
        // The committed refresh token is the live one at the provider.
        #expect(try await client.refresh(stored.tokens).refreshToken != nil)
    }

    /// A refresher whose lease lapsed while nobody else took it (a starved machine missed the
    /// renewals) commits its answer at once, by compare-and-set alone: the store holds the rotated
    /// refresh token before the caller is handed the new access token — not later, from a
    /// background retry that dies with a dropped coordinator (CI's ASan run, 2026-11-28).
    @Test func aLapsedLeaseNobodyTookCommitsBeforeTheTokenIsHandedOut() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let client = fixture.client, sessions = fixture.sessions
        let slow = fixture.lapsingCoordinator { old in
            try await Task.sleep(nanoseconds: 600_000_000) // twice the lease's ttl, never renewed
            return try await client.refresh(old)
        }
        let token = try await slow.refreshNow()
        let stored = try #require(try sessions.loadNow("default")?.session)
        #expect(stored.tokens.accessToken == token.value, "the answer was handed out before it was stored")
        #expect(stored.attributes[RefreshCoordinator.rotationAttribute] == nil)
        #expect(stored.state == .active)
        // The committed refresh token is the live one at the provider.
        #expect(try await client.refresh(stored.tokens).refreshToken != nil)
    }

    @Test func aRefresherKilledWhileHoldingTheLeaseDelaysButLosesNothing() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        // Another "process" took the lease and died: the lease lapses after its ttl, then we refresh.
        let dead = try #require(
            try fixture.sessions.store.tryAcquireLease(name: "refresh:default", ttl: 1.5, as: SessionLease.self))
        _ = dead // never released, as after kill -9
        let started = Date()
        let token = try await fixture.coordinator().accessToken()
        #expect(Date().timeIntervalSince(started) >= 1.2)
        #expect(try fixture.sessions.loadNow("default")?.session.tokens.accessToken == token.value)
        #expect(fixture.spy.tokenCalls == 1)
    }
}

/// The real storage with injected faults: the first `failingSaves` fenced saves fail as if the
/// store were unwritable; with `failingRenewals`, lease renewals fail (the lease lapses).
final class FaultyStorage: SessionStorage, Sendable {
    let base: any SessionStorage
    private let state: Mutex<(remaining: Int, failed: Int)>
    let failingRenewals: Bool

    init(_ base: any SessionStorage, failingSaves: Int, failingRenewals: Bool = false) {
        self.base = base
        state = Mutex((failingSaves, 0))
        self.failingRenewals = failingRenewals
    }

    var failedSaves: Int { state.withLock { $0.failed } }

    func load(_ key: String) async throws -> StoredSession? { try await base.load(key) }
    func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?, lease: SessionLease?) async throws
        -> Int64
    {
        // The record of a refresh about to be sent is written; the fenced writes of answers fail.
        let fail =
            lease != nil && session.attributes[RefreshCoordinator.rotationAttribute] == nil
            && state.withLock { state -> Bool in
                guard state.remaining > 0 else { return false }
                state.remaining -= 1
                state.failed += 1
                return true
            }
        if fail { throw OAuthError.injectedStoreFailure }
        return try await base.save(session, key: key, expectedGeneration: expectedGeneration, lease: lease)
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
        if failingRenewals { throw OAuthError.injectedStoreFailure }
        return try await base.renewLease(lease, ttl: ttl)
    }
    func releaseLease(_ lease: SessionLease) async throws { try await base.releaseLease(lease) }
}

extension OAuthError {
    /// What `FaultyStorage` throws.
    static var injectedStoreFailure: OAuthError {
        OAuthError(OAuthError.storeUnavailable, "injected: the store cannot be written")
    }
}
