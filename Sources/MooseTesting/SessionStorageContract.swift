#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseOAuth

/// The storage contract as executable checks: run it against any `SessionStorage` — Moose's own
/// and an app's (a Keychain storage, a database) — from any test framework. Each check throws a
/// `SessionStorageContract.Violation` naming the rule it found broken.
///
/// ```swift
/// @Test func myStorageKeepsTheContract() async throws {
///     try await SessionStorageContract.verify { MyKeychainStorage(service: "test-\(UUID())") }
/// }
/// ```
///
/// `make` must return an empty storage each time it is called (checks do not share state). The
/// lease-expiry check waits a third of a second; the whole suite takes about a second. Give `damage`
/// — a way to spoil one stored row as bit rot would (flip a byte of its sealed value) — and the
/// damaged-row rules are checked too.
public enum SessionStorageContract {
    /// A broken rule.
    public struct Violation: Error, CustomStringConvertible {
        /// Which rule, and what was seen.
        public let description: String
    }

    /// Every check, in order; with `damage` (spoils the row under the key it is given, in the
    /// storage it is given), the damaged-row checks as well.
    public static func verify(
        _ make: @Sendable () async throws -> any SessionStorage,
        damage: (@Sendable (any SessionStorage, String) async throws -> Void)? = nil
    ) async throws {
        if let damage {
            try await damagedRowsNeverLockAPersonOut(make(), damage: damage)
        }
        try await roundTripAndGenerations(make())
        try await compareAndSetRefusesAStaleGeneration(make())
        try await fencedWritesNeedTheCurrentLease(make())
        try await leasesExcludeAndLapse(make())
        try await compareAndSetUnderContention(make())
        try await deleteAndKeys(make())
    }

    static func session(_ access: String, _ refresh: String = "r") -> OAuthSession {
        OAuthSession(
            issuer: "https://id.example.com", clientID: "contract",
            tokens: TokenSet(accessToken: access, refreshToken: refresh),
            attributes: ["note": "contract"])
    }

    static func require(_ condition: Bool, _ rule: String) throws {
        if !condition { throw Violation(description: rule) }
    }

    static func expectCode(_ code: OAuthError.Code, _ rule: String, _ body: () async throws -> Void) async throws {
        do {
            try await body()
            throw Violation(description: "\(rule): no error was thrown")
        } catch let error as OAuthError {
            try require(error.code == code, "\(rule): expected \(code), got \(error.code)")
        }
    }

    /// A session comes back as written (tokens, state, attributes); every write raises the generation.
    public static func roundTripAndGenerations(_ storage: any SessionStorage) async throws {
        try require(try await storage.load("a") == nil, "an empty storage has no session")
        let first = try await storage.save(session("at1"), key: "a", expectedGeneration: nil, lease: nil)
        let loaded = try await storage.load("a")
        try require(
            loaded?.session.tokens.accessToken == "at1" && loaded?.session.attributes["note"] == "contract",
            "a saved session loads back unchanged")
        try require(loaded?.generation == first, "load reports the generation save returned")
        let second = try await storage.replace(session("at2"), key: "a")
        try require(second > first, "every write raises the generation (\(first) → \(second))")
    }

    /// A compare-and-set naming an old generation, or "nothing stored" when something is, fails
    /// with `storageConflict` and changes nothing.
    public static func compareAndSetRefusesAStaleGeneration(_ storage: any SessionStorage) async throws {
        let generation = try await storage.save(session("at1"), key: "b", expectedGeneration: nil, lease: nil)
        try await expectCode(OAuthError.storageConflict, "a save expecting nothing stored, over a stored session") {
            _ = try await storage.save(session("evil"), key: "b", expectedGeneration: nil, lease: nil)
        }
        let next = try await storage.save(session("at2"), key: "b", expectedGeneration: generation, lease: nil)
        try await expectCode(OAuthError.storageConflict, "a save naming a stale generation") {
            _ = try await storage.save(session("evil"), key: "b", expectedGeneration: generation, lease: nil)
        }
        let stored = try await storage.load("b")
        try require(
            stored?.session.tokens.accessToken == "at2" && stored?.generation == next, "a refused save changes nothing")
    }

    /// A write fenced by a lease commits only while that exact acquisition holds it.
    public static func fencedWritesNeedTheCurrentLease(_ storage: any SessionStorage) async throws {
        let generation = try await storage.save(session("at1"), key: "c", expectedGeneration: nil, lease: nil)
        let lease = try await storage.acquireLease("refresh:c", ttl: 30, timeout: 1)
        let next = try await storage.save(session("at2"), key: "c", expectedGeneration: generation, lease: lease)
        try await storage.releaseLease(lease)
        try await expectCode(OAuthError.leaseLost, "a write fenced by a released lease") {
            _ = try await storage.save(session("evil"), key: "c", expectedGeneration: next, lease: lease)
        }
        let newer = try await storage.acquireLease("refresh:c", ttl: 5, timeout: 2)
        try require(newer.fencingToken > lease.fencingToken, "every acquisition has a larger fencing token")
        try await expectCode(OAuthError.leaseLost, "a write fenced by a lease someone else now holds") {
            _ = try await storage.save(session("evil"), key: "c", expectedGeneration: next, lease: lease)
        }
        try await storage.releaseLease(newer)
        try require(
            try await storage.load("c")?.session.tokens.accessToken == "at2", "fenced-out writes change nothing")
    }

    /// One holder at a time; renewal extends a lease; a holder that never releases (a crash) loses
    /// it at its expiry; renewing a lost lease fails; releasing it does not free the new holder's.
    /// (Long ttls where timing must not matter: a loaded machine may stall a test for seconds.)
    public static func leasesExcludeAndLapse(_ storage: any SessionStorage) async throws {
        // Released explicitly: a ttl of minutes only keeps a starved run (a sanitizer build beside
        // another build stalled one for over 30 s) from seeing the lease lapse mid-test.
        let held = try await storage.acquireLease("refresh:d", ttl: 600, timeout: 1)
        try await expectCode(OAuthError.leaseBusy, "a second holder while the first holds the lease") {
            _ = try await storage.acquireLease("refresh:d", ttl: 5, timeout: 0.2)
        }
        let renewed = try await storage.renewLease(held, ttl: 1200)
        try require(
            renewed.fencingToken == held.fencingToken && renewed.expiresAt > held.expiresAt,
            "renewal keeps the fencing token and extends the expiry")
        try await storage.releaseLease(renewed)

        // A holder that "crashes": never releases. The lease lapses by the storage's clock.
        let crashed = try await storage.acquireLease("refresh:e", ttl: 0.3, timeout: 1)
        let next = try await storage.acquireLease("refresh:e", ttl: 600, timeout: 10)
        try require(
            Date() >= crashed.expiresAt.addingTimeInterval(-0.05), "a held lease was handed out before it lapsed")
        try require(next.fencingToken > crashed.fencingToken, "the next holder gets a larger fencing token")
        try await expectCode(OAuthError.leaseLost, "renewing a lease that lapsed and was taken over") {
            _ = try await storage.renewLease(crashed, ttl: 5)
        }
        try await storage.releaseLease(crashed) // releasing a lost lease is no error…
        try await expectCode(OAuthError.leaseBusy, "…and does not release the new holder's") {
            _ = try await storage.acquireLease("refresh:e", ttl: 5, timeout: 0.2)
        }
        try await storage.releaseLease(next)
        _ = try await storage.acquireLease("refresh:e", ttl: 5, timeout: 1) // released: free at once
    }

    /// 20 tasks each read, then compare-and-set: exactly one write per generation wins.
    public static func compareAndSetUnderContention(_ storage: any SessionStorage) async throws {
        var generation = try await storage.save(session("at0"), key: "e", expectedGeneration: nil, lease: nil)
        for round in 1...5 {
            let expected = generation
            let winners = try await withThrowingTaskGroup(of: Int64?.self) { group in
                for task in 0..<20 {
                    group.addTask {
                        do {
                            return try await storage.save(
                                session("at\(round)-\(task)"), key: "e", expectedGeneration: expected, lease: nil)
                        } catch let error as OAuthError where error.code == OAuthError.storageConflict {
                            return nil
                        }
                    }
                }
                var won: [Int64] = []
                for try await result in group { if let result { won.append(result) } }
                return won
            }
            try require(
                winners.count == 1, "round \(round): \(winners.count) compare-and-set writes won, expected exactly one")
            generation = winners[0]
        }
    }

    /// Delete always wipes (no lease, no generation) and `keys` lists what is stored; generations
    /// keep growing across a delete, so a save prepared before a logout fails on the next login.
    public static func deleteAndKeys(_ storage: any SessionStorage) async throws {
        let before = try await storage.save(session("g1"), key: "g", expectedGeneration: nil, lease: nil)
        _ = try await storage.delete("g")
        let after = try await storage.replace(session("g2"), key: "g")
        try require(
            after > before, "a generation after delete + replace (\(after)) is not larger than before (\(before))")
        try await expectCode(OAuthError.storageConflict, "a save prepared before a logout, landing on the next login") {
            _ = try await storage.save(session("stale"), key: "g", expectedGeneration: before, lease: nil)
        }
        _ = try await storage.delete("g")
        _ = try await storage.replace(session("x"), key: "k2")
        _ = try await storage.replace(session("y"), key: "k1")
        try require(try await storage.keys() == ["k1", "k2"], "keys lists every stored key, sorted")
        try require(try await storage.delete("k1"), "delete reports a removed session")
        try require(!(try await storage.delete("k1")), "delete of nothing reports false")
        try require(try await storage.keys() == ["k2"], "a deleted key is gone")
        try require(try await storage.load("k1") == nil, "a deleted session does not load")
    }

    /// A row that cannot be opened never locks a person out: `load` says `sessionDamaged` for that key
    /// only, `keys` lists it, `replace` writes over it and `delete`
    /// removes it, generations keep growing, and every other key keeps working.
    public static func damagedRowsNeverLockAPersonOut(
        _ storage: any SessionStorage,
        damage: @Sendable (any SessionStorage, String) async throws -> Void
    ) async throws {
        let before = try await storage.save(session("d1"), key: "d", expectedGeneration: nil, lease: nil)
        _ = try await storage.replace(session("ok"), key: "ok")
        try await damage(storage, "d")
        try await expectCode(OAuthError.sessionDamaged, "load of a damaged row") { _ = try await storage.load("d") }
        try require(
            try await storage.load("ok")?.session.tokens.accessToken == "ok",
            "another key still loads beside a damaged row")
        try require(try await storage.keys() == ["d", "ok"], "keys lists a damaged row")
        let replaced = try await storage.replace(session("d2"), key: "d")
        try require(
            replaced > before, "replace over a damaged row gives a larger generation (\(replaced) after \(before))")
        try require(
            try await storage.load("d")?.session.tokens.accessToken == "d2", "replace writes over a damaged row")
        try await damage(storage, "d")
        try require(try await storage.delete("d"), "delete removes a damaged row (and says so)")
        try require(try await storage.load("d") == nil, "a deleted damaged row does not load")
        try require(try await storage.keys() == ["ok"], "a deleted damaged row is not listed")
        let after = try await storage.save(session("d3"), key: "d", expectedGeneration: nil, lease: nil)
        try require(
            after > replaced, "generations keep growing across a damaged row's delete (\(after) after \(replaced))")
    }
}
