import Foundation
import MooseOAuth
import MooseTesting
import Synchronization
import Testing

/// The coordinator's timing on a `TestClock`, without a provider: a scripted refresher, an in-memory
/// storage on the same clock, and every wait (backoff, write retry, lease renewal) ending only when
/// the test moves the clock. `RefreshCoordinatorTests` proves the same paths against the real provider.
struct RefreshCoordinatorClockTests {
    @Test func aCachedTokenIsServedUntilItsMarginCappedAtAShareOfItsLifetime() async throws {
        let fixture = ClockFixture()
        try await fixture.seed(expiresIn: 3600)
        let coordinator = fixture.coordinator()
        // The stored token answers: adopted, not refreshed.
        #expect(try await coordinator.accessToken().value == "access-0")
        #expect(fixture.refresher.calls == 0)

        // The default margin (30 s; a quarter of an hour's lifetime is more) decides.
        fixture.clock.advance(by: 3600 - 31)
        #expect(coordinator.cachedAccessToken()?.value == "access-0", "31 s left: still served")
        #expect(try await coordinator.accessToken().value == "access-0")
        #expect(fixture.refresher.calls == 0)
        fixture.clock.advance(by: 2)
        #expect(coordinator.cachedAccessToken() == nil, "29 s left: inside the margin")
        #expect(try await coordinator.accessToken().value == "access-1")
        #expect(fixture.refresher.calls == 1)

        // A token living 20 s: every margin is capped at a quarter of it (5 s), the caller's too.
        fixture.refresher.then(.tokens(lifetime: 20))
        #expect(try await coordinator.refreshNow().value == "access-2")
        #expect(
            coordinator.cachedAccessToken()?.value == "access-2",
            "a fresh 20 s token is not 'about to expire' for a 30 s margin")
        fixture.clock.advance(by: 14)
        #expect(coordinator.cachedAccessToken()?.value == "access-2", "6 s left of 20")
        #expect(
            coordinator.cachedAccessToken(minimumValidity: 60)?.value == "access-2",
            "a caller's 60 s margin is capped too")
        #expect(try await coordinator.accessToken().value == "access-2")
        #expect(fixture.refresher.calls == 2)
        fixture.clock.advance(by: 1.5)
        #expect(coordinator.cachedAccessToken() == nil, "4.5 s left of 20: inside the capped margin")
        #expect(try await coordinator.accessToken().value == "access-3")
        #expect(fixture.refresher.calls == 3)
    }

    @Test func aHundredConcurrentCallersAfterExpiryCauseOneRefresh() async throws {
        let fixture = ClockFixture()
        try await fixture.seed(expiresIn: 3600)
        let coordinator = fixture.coordinator()
        _ = try await coordinator.accessToken()
        fixture.clock.advance(by: 3600)
        // The refresh takes a second of the test clock: every caller arrives while it runs.
        fixture.refresher.then(.slowTokens(lifetime: 3600, taking: 1))
        let callers = Counter()
        async let all = withThrowingTaskGroup(of: AccessToken.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    callers.increment()
                    return try await coordinator.accessToken()
                }
            }
            return try await group.reduce(into: [AccessToken]()) { $0.append($1) }
        }
        // The refresher and the lease renewal sleep; so does every caller, waiting for the refresh.
        try await waitUntil("100 callers wait on one refresh") { callers.value == 100 && fixture.clock.sleepers == 2 }
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(fixture.refresher.calls == 1)
        fixture.clock.advance(by: 1)
        let tokens = try await all
        #expect(tokens.count == 100 && Set(tokens.map(\.value)) == ["access-1"])
        #expect(Set(tokens.map(\.generation)).count == 1)
        #expect(fixture.refresher.calls == 1)
        #expect(try await fixture.storage.load("k")?.session.tokens.refreshToken == "refresh-1")
    }

    @Test func transientFailuresRetryWithABackoffThatEndsOnlyWhenTheClockMoves() async throws {
        let fixture = ClockFixture {
            $0.backoff = 1; $0.transientAttempts = 3
        }
        try await fixture.seed(expiresIn: -5)
        let coordinator = fixture.coordinator()
        fixture.refresher.then(.failure(.transientFailure), .failure(.transientFailure))
        async let token = coordinator.accessToken()

        // First backoff: 1 s, jittered to 0.5–1 s. The lease renewal (every 10 s) sleeps too.
        try await waitUntil("the first backoff sleeps") { fixture.refresher.calls == 1 && fixture.clock.sleepers == 2 }
        let first = try #require(fixture.clock.nextDeadline).timeIntervalSince(fixture.clock.now)
        #expect((0.5 - 1e-3...1.0 + 1e-3).contains(first), "\(first)")
        try await Task.sleep(nanoseconds: 100_000_000)
        #expect(fixture.refresher.calls == 1, "the second attempt did not wait for the clock")
        fixture.clock.advance(by: 1) // the jitter's upper bound: past the deadline, whatever it drew

        // Second backoff: doubled, 1–2 s.
        try await waitUntil("the second backoff sleeps") { fixture.refresher.calls == 2 && fixture.clock.sleepers == 2 }
        let second = try #require(fixture.clock.nextDeadline).timeIntervalSince(fixture.clock.now)
        #expect((1.0 - 1e-3...2.0 + 1e-3).contains(second), "\(second)")
        try await Task.sleep(nanoseconds: 100_000_000)
        #expect(fixture.refresher.calls == 2, "the third attempt did not wait for the clock")
        fixture.clock.advance(by: 2)

        #expect(try await token.value == "access-3")
        #expect(fixture.refresher.calls == 3)
        #expect(fixture.clock.sleepers == 0, "the lease renewal was stopped")
    }

    @Test func theLoopGuardCountsOnly401dRefreshesAndItsWindowPassesWithTheClock() async throws {
        let fixture = ClockFixture {
            $0.refreshLimit = 2; $0.refreshWindow = 30
        }
        try await fixture.seed(expiresIn: 3600)
        let coordinator = fixture.coordinator()
        // Refreshes that give a usable token are not futile: any number of them within the window.
        for n in 1...5 { #expect(try await coordinator.refreshNow().value == "access-\(n)") }
        // Each 401 says a refresh's token was not usable after all: two fill the window.
        var token = try await coordinator.refresh(rejecting: try await coordinator.accessToken())
        token = try await coordinator.refresh(rejecting: token)
        #expect(fixture.refresher.calls == 7)
        await #expect(throws: OAuthError.self) { _ = try await coordinator.refresh(rejecting: token) }
        do { _ = try await coordinator.refresh(rejecting: token) } catch let error as OAuthError {
            #expect(error.code == OAuthError.refreshLimit)
        }
        #expect(fixture.refresher.calls == 7, "a refused refresh reached the refresher")
        // 29 s later the window still holds both; past 30 s it is empty again.
        fixture.clock.advance(by: 29)
        await #expect(throws: OAuthError.self) { _ = try await coordinator.refresh(rejecting: token) }
        fixture.clock.advance(by: 2)
        #expect(try await coordinator.refresh(rejecting: token).value == "access-8")
    }

    @Test func theLoopGuardCountsFailedRefreshesAndItsWindowPassesWithTheClock() async throws {
        let fixture = ClockFixture {
            $0.refreshLimit = 2
            $0.refreshWindow = 30
            $0.transientAttempts = 1 // no retries: one call, one failure
        }
        try await fixture.seed(expiresIn: -5)
        let coordinator = fixture.coordinator()
        fixture.refresher.then(.failure(.transientFailure), .failure(.transientFailure))
        for _ in 0..<2 {
            do { _ = try await coordinator.accessToken(); Issue.record("a scripted failure succeeded") } catch let error
                as OAuthError
            {
                #expect(error.code == OAuthError.transient)
            }
        }
        do { _ = try await coordinator.accessToken(); Issue.record("a third refresh inside the window ran") } catch let
            error as OAuthError
        {
            #expect(error.code == OAuthError.refreshLimit)
        }
        #expect(fixture.refresher.calls == 2)
        fixture.clock.advance(by: 31)
        #expect(try await coordinator.accessToken().value == "access-3")
        #expect(fixture.refresher.calls == 3)
    }

    @Test func aFailedStoreWriteKeepsTheTokensAndTheBackgroundRetryWritesThemWhenTheClockMoves() async throws {
        let fixture = ClockFixture()
        try await fixture.seed(expiresIn: -5)
        // The refresh's fenced write fails, and so does the first background retry.
        let storage = SaveFailingStorage(fixture.storage, failures: 2)
        let coordinator = fixture.coordinator(storage: storage)
        let token = try await coordinator.accessToken()
        #expect(token.value == "access-1", "the refreshed tokens reach the caller although the store refused them")
        #expect(storage.failedSaves == 1)
        #expect(await coordinator.hasPendingWrite)
        #expect(coordinator.cachedAccessToken()?.value == "access-1")
        #expect(try await fixture.storage.load("k")?.session.tokens.refreshToken == "refresh-0")

        // The retry waits ¼ s on the clock (the lease renewal has stopped: it is the only sleeper).
        try await waitUntil("the write retry sleeps") { fixture.clock.sleepers == 1 }
        #expect(abs(try #require(fixture.clock.nextDeadline).timeIntervalSince(fixture.clock.now) - 0.25) < 1e-3)
        try await Task.sleep(nanoseconds: 100_000_000)
        #expect(storage.failedSaves == 1, "the write was retried before the clock moved")
        fixture.clock.advance(by: 0.25)
        try await waitUntil("the first retry fails and the next one sleeps") {
            storage.failedSaves == 2 && fixture.clock.sleepers == 1
        }
        #expect(await coordinator.hasPendingWrite)
        #expect(
            abs(try #require(fixture.clock.nextDeadline).timeIntervalSince(fixture.clock.now) - 0.5) < 1e-3,
            "the retry backs off")
        fixture.clock.advance(by: 0.5)
        try await waitUntil("the second retry writes the tokens") { await !coordinator.hasPendingWrite }
        let stored = try #require(try await fixture.storage.load("k")?.session)
        #expect(
            stored.tokens.refreshToken == "refresh-1" && stored.state == .active,
            "the rotated refresh token reached the store")
        #expect(fixture.clock.sleepers == 0)
        #expect(fixture.refresher.calls == 1)
    }

    @Test func invalidGrantMarksTheSessionForReauthentication() async throws {
        let fixture = ClockFixture()
        try await fixture.seed(expiresIn: -5)
        let coordinator = fixture.coordinator()
        let events = coordinator.events
        fixture.refresher.then(.failure(OAuthError(OAuthError.invalidGrant, "scripted: the refresh token was revoked")))
        do { _ = try await coordinator.accessToken(); Issue.record("a refused refresh token gave a token") } catch let
            error as OAuthError
        {
            #expect(error.code == OAuthError.invalidGrant)
        }
        #expect(try await fixture.storage.load("k")?.session.state == .needsReauthentication)
        var listener = events.makeAsyncIterator()
        let event = await listener.next()
        guard case .needsReauthentication = event else {
            Issue.record("expected needsReauthentication, got \(String(describing: event))")
            return
        }
        // Final: no further refresh, however long the app waits.
        fixture.clock.advance(by: 3600)
        do {
            _ = try await coordinator.accessToken(); Issue.record("refreshed a session marked for re-authentication")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.needsLogin)
        }
        #expect(fixture.refresher.calls == 1)
    }
}

/// The test clock's sleepers themselves.
struct TestClockSleepTests {
    @Test func aSleeperWakesOnlyWhenTheClockPassesItsDeadline() async throws {
        let clock = TestClock()
        let woke = Counter()
        let sleeper = Task {
            try await clock.sleep(for: 10); woke.increment()
        }
        try await waitUntil("the sleeper sleeps") { clock.sleepers == 1 }
        clock.advance(by: 9.5)
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(woke.value == 0 && clock.sleepers == 1)
        clock.advance(by: 0.5)
        try await sleeper.value
        #expect(woke.value == 1 && clock.sleepers == 0)
        try await clock.sleep(for: 0) // nothing to wait for
    }

    @Test func aCancelledSleeperThrowsCancellationError() async throws {
        let clock = TestClock()
        let sleeper = Task { try await clock.sleep(for: 10) }
        try await waitUntil("the sleeper sleeps") { clock.sleepers == 1 }
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleepers == 0)
        // Already cancelled before it sleeps: at once.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: 10)
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(clock.sleepers == 0)
    }
}

// MARK: - Fixtures

/// A test clock, an in-memory storage on it, a scripted refresher on it, and a configuration that
/// reads and sleeps on it.
struct ClockFixture {
    let clock: TestClock
    let storage: InMemorySessionStorage
    let refresher: ScriptedRefresher
    let configuration: RefreshCoordinator.Configuration

    init(_ configure: (inout RefreshCoordinator.Configuration) -> Void = { _ in }) {
        clock = TestClock()
        storage = InMemorySessionStorage(clock: clock.read)
        refresher = ScriptedRefresher(clock: clock)
        var configuration = RefreshCoordinator.Configuration()
        configuration.clock = clock.read
        configuration.sleep = clock.sleep(for:)
        configure(&configuration)
        self.configuration = configuration
    }

    /// Stores `access-0`/`refresh-0` under `k`, expiring in `expiresIn` seconds (negative: already
    /// expired) after a lifetime of `lifetime`.
    func seed(expiresIn: TimeInterval, lifetime: TimeInterval = 3600) async throws {
        let expiresAt = clock.now.addingTimeInterval(expiresIn)
        let tokens = TokenSet(
            accessToken: "access-0", refreshToken: "refresh-0", expiresAt: expiresAt,
            requestedAt: expiresAt.addingTimeInterval(-lifetime))
        try await storage.replace(
            OAuthSession(issuer: "https://id.example.com", clientID: "app", tokens: tokens), key: "k")
    }

    func coordinator(storage: (any SessionStorage)? = nil) -> RefreshCoordinator {
        let refresher = self.refresher
        return RefreshCoordinator(key: "k", storage: storage ?? self.storage, configuration: configuration) {
            try await refresher.refresh($0)
        }
    }
}

/// A refresher that follows a script (then hands out hour-long tokens): call n returns `access-n` and
/// `refresh-n`, issued on the test clock.
final class ScriptedRefresher: Sendable {
    enum Step: Sendable {
        case tokens(lifetime: TimeInterval)
        /// Tokens after `taking` seconds of the test clock.
        case slowTokens(lifetime: TimeInterval, taking: TimeInterval)
        case failure(OAuthError)
    }

    let clock: TestClock
    private let state = Mutex<(calls: Int, script: [Step])>((0, []))

    init(clock: TestClock) { self.clock = clock }

    /// How many times the coordinator called it.
    var calls: Int { state.withLock { $0.calls } }

    /// Appends steps to the script.
    func then(_ steps: Step...) { state.withLock { $0.script += steps } }

    func refresh(_ old: TokenSet) async throws -> TokenSet {
        let (call, step) = state.withLock { state -> (Int, Step) in
            state.calls += 1
            return (state.calls, state.script.isEmpty ? .tokens(lifetime: 3600) : state.script.removeFirst())
        }
        switch step {
        case .tokens(let lifetime):
            return tokens(call, lifetime: lifetime)
        case .slowTokens(let lifetime, let taking):
            try await clock.sleep(for: taking)
            return tokens(call, lifetime: lifetime)
        case .failure(let error):
            throw error
        }
    }

    private func tokens(_ call: Int, lifetime: TimeInterval) -> TokenSet {
        let now = clock.now
        return TokenSet(
            accessToken: "access-\(call)", refreshToken: "refresh-\(call)", expiresAt: now.addingTimeInterval(lifetime),
            requestedAt: now)
    }
}

/// A thread-safe count.
final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func increment() { count.withLock { $0 += 1 } }
}

/// A storage whose first `failures` compare-and-set writes (`save`) fail as if it were unwritable;
/// everything else goes to `base`.
final class SaveFailingStorage: SessionStorage {
    let base: any SessionStorage
    private let state: Mutex<(remaining: Int, failed: Int)>

    init(_ base: any SessionStorage, failures: Int) {
        self.base = base
        state = Mutex((failures, 0))
    }

    /// How many writes failed so far.
    var failedSaves: Int { state.withLock { $0.failed } }

    func load(_ key: String) async throws -> StoredSession? { try await base.load(key) }
    func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?, lease: SessionLease?) async throws
        -> Int64
    {
        // The record of a refresh about to be sent is written; the writes of answers fail.
        let fail =
            session.attributes[RefreshCoordinator.rotationAttribute] == nil
            && state.withLock { state -> Bool in
                guard state.remaining > 0 else { return false }
                state.remaining -= 1
                state.failed += 1
                return true
            }
        if fail { throw OAuthError(OAuthError.storeUnavailable, "scripted: the store cannot be written") }
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
        try await base.renewLease(lease, ttl: ttl)
    }
    func releaseLease(_ lease: SessionLease) async throws { try await base.releaseLease(lease) }
}

extension OAuthError {
    /// A scripted network failure (retried with backoff).
    static var transientFailure: OAuthError {
        OAuthError(OAuthError.transient, "scripted: the provider is unreachable")
    }
}

/// Polls `condition` (in real time, up to 90 s: a full run on 2 busy cores has starved the
/// cooperative pool for tens of seconds; a passing run returns as soon as it holds) until it holds.
func waitUntil(_ what: String, _ condition: @Sendable () async -> Bool) async throws {
    let deadline = Date().addingTimeInterval(90)
    while await !condition() {
        guard Date() < deadline else {
            Issue.record("timed out waiting until \(what)")
            throw CancellationError()
        }
        try await Task.sleep(nanoseconds: 5_000_000)
    }
}
