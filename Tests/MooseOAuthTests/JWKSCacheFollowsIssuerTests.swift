import Foundation
import HTTPTypes
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseSQLiteStorage
import MooseSecretStore
import MooseTesting
import Synchronization
import Testing

/// `JWKSCache` follows the issuer's key set over time (panva/jose's `createRemoteJWKSet`, Microsoft's
/// `ConfigurationManager`): a maximum age, a refetch after a failed signature, failures cached like answers,
/// a bounded wait on a hanging endpoint, and kept sets judged by their age. Every time is the test's clock;
/// only the hanging endpoint's test waits in real time (its wait limit, a fraction of a second).
@Suite struct JWKSCacheFollowsIssuerTests {
    /// An issuer's `jwks_uri` in memory: serves whichever JWKS is current, with a `Cache-Control` and a
    /// status the test sets; counts every request; can hang until released.
    final class IssuerJWKS: HTTPTransport, Sendable {
        private struct State {
            var document = Data()
            var status = 200
            var cacheControl: String? = nil
            var attempts = 0
            var hanging = false
            var held: [CheckedContinuation<Void, Never>] = []
        }

        private let state = Mutex(State())

        /// Requests received, answered or not.
        var attempts: Int { state.withLock { $0.attempts } }

        /// Publishes `keys` (public halves, ES256) under their `kid`s.
        func publish(_ keys: [(kid: String, key: PrivateKey)]) throws {
            let jwks = JWKS(
                keys: try keys.map { try JWK(publicKey: $0.key.publicKey(), keyID: $0.kid, algorithm: .es256) })
            state.withLock { $0.document = Data(jwks.json.utf8) }
        }

        /// Answers `status` from now on (200: the document).
        func answer(_ status: Int) { state.withLock { $0.status = status } }

        /// Sends `value` as `Cache-Control` (`nil`: none).
        func cacheControl(_ value: String?) { state.withLock { $0.cacheControl = value } }

        /// Holds every request from now on until `release()`.
        func hang() { state.withLock { $0.hanging = true } }

        /// Whether requests are being held now (`hang()` until `release()`).
        var isHanging: Bool { state.withLock { $0.hanging } }

        /// Answers the held requests (with what is published then) and stops holding.
        func release() {
            let held = state.withLock { state in
                state.hanging = false
                defer { state.held = [] }
                return state.held
            }
            for continuation in held { continuation.resume() }
        }

        func send(_ request: APIRequest) async throws -> APIResponse {
            let hanging = state.withLock { state in
                state.attempts += 1
                return state.hanging
            }
            if hanging {
                await withCheckedContinuation { continuation in
                    let resumeNow = state.withLock { state in
                        guard state.hanging else { return true }
                        state.held.append(continuation)
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
            let (document, status, cacheControl) = state.withLock { ($0.document, $0.status, $0.cacheControl) }
            var fields: HTTPFields = [.contentType: "application/json"]
            if let cacheControl { fields[.cacheControl] = cacheControl }
            return APIResponse(
                status: HTTPResponse.Status(code: status), headerFields: fields,
                body: status == 200 ? document : Data("unavailable".utf8))
        }
    }

    static let url = URL(string: "https://id.example.com/jwks")!
    static let issuer = "https://id.example.com"

    let clock = TestClock(now: Date(timeIntervalSince1970: 1_800_000_000))
    let endpoint = IssuerJWKS()

    func cache(cooldown: TimeInterval = 30, persistence: JWKSCache.Persistence? = nil, waitLimit: TimeInterval = 2)
        -> JWKSCache
    {
        JWKSCache(
            url: Self.url, transport: endpoint, cooldown: cooldown, persistence: persistence, waitLimit: waitLimit,
            now: clock.read)
    }

    func validator(_ cache: JWKSCache) -> IDTokenValidator {
        IDTokenValidator(issuer: Self.issuer, clientID: "app", jwks: cache, algorithms: [.es256], clock: clock.read)
    }

    /// An ID token issued now, signed by `key` and naming `kid`.
    func token(_ kid: String, _ key: PrivateKey) throws -> String {
        let now = Int64(clock.now.timeIntervalSince1970)
        return try JWTSigner(key: JWTKey(privateKey: key, keyID: kid), algorithm: .es256).sign([
            "iss": .string(Self.issuer), "sub": "alice", "aud": "app", "iat": .number(JSONNumber(now)),
            "exp": .number(JSONNumber(now + 300))
        ])
    }

    func accepted(_ validator: IDTokenValidator, _ token: String) async -> Bool {
        (try? await validator.validate(token, nonce: nil)) != nil
    }

    static func key() throws -> PrivateKey { try PrivateKey.generate(.ec(.p256)) }

    /// The issuer replaces the key material behind a `kid` it keeps: the first token signed with the new
    /// material fails with the cached key, refetches once, and passes; a forged token right after costs
    /// no request (the cooldown).
    @Test func aKeyRotatedUnderTheSameKidIsFetchedAfterAFailedSignature() async throws {
        let (old, new) = (try Self.key(), try Self.key())
        try endpoint.publish([("k1", old)])
        let cache = self.cache()
        let validator = self.validator(cache)
        #expect(await accepted(validator, try token("k1", old)))
        #expect(endpoint.attempts == 1)
        clock.advance(by: 45)
        try endpoint.publish([("k1", new)])
        #expect(await accepted(validator, try token("k1", new)))
        #expect(endpoint.attempts == 2)
        #expect(!(await accepted(validator, try token("k1", try Self.key()))))
        #expect(endpoint.attempts == 2)
        #expect(await cache.fetchAttempts == 2)
        #expect(await cache.fetchCount == 2)
    }

    /// A key the issuer withdrew is trusted while the set is younger than its maximum age (10 minutes by
    /// default), and no longer once it is older: the next use refetches.
    @Test func aWithdrawnKeyStopsBeingTrustedAfterTheMaximumAge() async throws {
        let (k1, k2) = (try Self.key(), try Self.key())
        try endpoint.publish([("k1", k1), ("k2", k2)])
        let validator = self.validator(cache())
        #expect(await accepted(validator, try token("k2", k2)))
        try endpoint.publish([("k1", k1)])
        clock.advance(by: 599)
        #expect(await accepted(validator, try token("k2", k2)))
        #expect(endpoint.attempts == 1)
        clock.advance(by: 2)
        #expect(!(await accepted(validator, try token("k2", k2))))
        #expect(await accepted(validator, try token("k1", k1)))
        #expect(endpoint.attempts == 2)
    }

    /// A refetch that answers the same document keeps the keys as they were (the resource server's remembered
    /// tokens are tied to them); a changed document gives new ones.
    @Test func aRefetchOfAnUnchangedSetKeepsItsKeys() async throws {
        let (k1, k2) = (try Self.key(), try Self.key())
        try endpoint.publish([("k1", k1)])
        let cache = self.cache()
        let first = try await cache.keys(for: "k1").map(\.identity)
        clock.advance(by: 601)
        let again = try await cache.keys(for: "k1").map(\.identity)
        #expect(endpoint.attempts == 2)
        #expect(!first.isEmpty && again == first)
        try endpoint.publish([("k1", k1), ("k2", k2)])
        clock.advance(by: 601)
        let changed = try await cache.keys(for: "k1").map(\.identity)
        #expect(endpoint.attempts == 3)
        #expect(!changed.isEmpty && Set(changed).isDisjoint(with: first))
    }

    /// With the endpoint failing, 100 tokens naming unknown `kid`s make one attempt per cooldown, and the
    /// last good set keeps serving (up to its stale limit, then the failure is thrown).
    @Test func aFailingEndpointGetsOneAttemptPerCooldownAndTheLastGoodSetServes() async throws {
        let k1 = try Self.key()
        try endpoint.publish([("k1", k1)])
        let cache = JWKSCache(url: Self.url, transport: endpoint, staleLimit: 3600, now: clock.read)
        #expect(try await cache.keys(for: "k1").map(\.keyID) == ["k1"])
        endpoint.answer(503)
        clock.advance(by: 601) // stale: the next use refetches
        try await withThrowingTaskGroup(of: [String?].self) { group in
            for index in 0..<100 { group.addTask { try await cache.keys(for: "made-up-\(index)").map(\.keyID) } }
            for try await kids in group { #expect(kids == ["k1"]) }
        }
        #expect(endpoint.attempts == 2)
        clock.advance(by: 29)
        for index in 0..<100 { #expect(try await cache.keys(for: "made-up-\(index)").map(\.keyID) == ["k1"]) }
        #expect(endpoint.attempts == 2)
        clock.advance(by: 2)
        _ = try await cache.keys(for: "made-up")
        #expect(endpoint.attempts == 3)
        #expect(await cache.fetchAttempts == 3)
        #expect(await cache.fetchCount == 1)
        // Past the stale limit (an hour past the maximum age): the failure, not the old keys.
        clock.advance(by: 3600)
        await #expect(throws: OAuthError.self) { try await cache.keys(for: "k1") }
        #expect(endpoint.attempts == 4)
    }

    /// No good set ever: the failure is thrown, and thrown again at once (no request) inside the cooldown.
    @Test func withoutAGoodSetTheFailureIsCachedForTheCooldown() async throws {
        endpoint.answer(503)
        let cache = self.cache()
        for _ in 0..<100 {
            do {
                _ = try await cache.keys(for: "k1")
                Issue.record("keys from a failing endpoint")
            } catch let error as OAuthError {
                #expect(error.code == OAuthError.transient && error.status == 503)
            }
        }
        #expect(endpoint.attempts == 1)
        clock.advance(by: 30)
        try endpoint.publish([("k1", try Self.key())])
        endpoint.answer(200)
        #expect(try await cache.keys(for: "k1").count == 1)
        #expect(endpoint.attempts == 2)
    }

    /// A token naming a made-up `kid` makes the cache fetch, but a real rotation one cooldown (30 s) later
    /// is accepted at once.
    @Test func aMadeUpKidDelaysARotationByAtMostTheCooldown() async throws {
        let (k1, k2) = (try Self.key(), try Self.key())
        try endpoint.publish([("k1", k1)])
        let validator = self.validator(JWKSCache(url: Self.url, transport: endpoint, now: clock.read))
        #expect(await accepted(validator, try token("k1", k1)))
        clock.advance(by: 100)
        #expect(!(await accepted(validator, try token("made-up", try Self.key()))))
        #expect(endpoint.attempts == 2)
        clock.advance(by: 31)
        try endpoint.publish([("k1", k1), ("k2", k2)])
        #expect(await accepted(validator, try token("k2", k2)))
        #expect(endpoint.attempts == 3)
    }

    /// `Cache-Control: max-age` sets the set's maximum age, kept between the cooldown and one day;
    /// `no-store`, `no-cache` and unreadable values give the default (10 minutes).
    @Test(arguments: [
        ("max-age=120", 120.0), ("public, max-age=5", 30), ("max-age=99999999999999999999999", 86_400),
        ("no-store", 600), ("max-age=60, no-cache", 600), ("max-age=-1", 600), ("max-age=1e3", 600),
        ("max-age=12, max-age=900", 600), ("MAX-AGE=\"300\"", 300), ("private", 600)
    ])
    func cacheControlMaxAgeIsHonouredAndBounded(header: String, maximumAge: TimeInterval) async throws {
        try endpoint.publish([("k1", try Self.key())])
        endpoint.cacheControl(header)
        let cache = self.cache()
        _ = try await cache.keys(for: "k1")
        #expect(endpoint.attempts == 1)
        clock.advance(by: maximumAge - 1)
        _ = try await cache.keys(for: "k1")
        #expect(endpoint.attempts == 1, "\(header): refetched before \(maximumAge) s")
        clock.advance(by: 1)
        _ = try await cache.keys(for: "k1")
        #expect(endpoint.attempts == 2, "\(header): not refetched after \(maximumAge) s")
    }

    /// A hanging endpoint holds no request longer than the wait limit while a set is at hand; the answer,
    /// when it comes, is adopted without another request.
    @Test func aHangingFetchDoesNotHoldARequestPastTheWaitLimit() async throws {
        let (k1, k2) = (try Self.key(), try Self.key())
        try endpoint.publish([("k1", k1)])
        // No cooldown: an unknown kid may fetch at once (an old cache then waited for the hanging answer).
        let cache = self.cache(cooldown: 0, waitLimit: 0.2)
        _ = try await cache.keys(for: "k1")
        endpoint.hang()
        // The endpoint holds its answer until this test releases it; only so that a cache that waits for
        // it (the old one) fails this test instead of hanging it, it is released after two minutes. No
        // stopwatch: a request that came back while the endpoint still held its answer did not wait for it.
        let endpoint = self.endpoint
        let guardTask = Task {
            try? await Task.sleep(for: .seconds(120))
            endpoint.release()
        }
        defer { guardTask.cancel() }
        clock.advance(by: 601)
        #expect(try await cache.keys(for: "k1").map(\.keyID) == ["k1"])
        #expect(endpoint.isHanging, "the stale set's request waited for the hanging fetch")
        #expect(try await cache.keys(for: "k2").map(\.keyID) == ["k1"])
        #expect(endpoint.isHanging, "the unknown kid's request waited for the hanging fetch")
        #expect(endpoint.attempts == 2)
        try endpoint.publish([("k1", k1), ("k2", k2)])
        endpoint.release()
        var waited = 0
        while await cache.fetchCount < 2, waited < 500 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(try await cache.keys(for: "k2").compactMap(\.keyID).sorted() == ["k1", "k2"])
        #expect(endpoint.attempts == 2)
    }

    /// A kept set younger than its maximum age is used without a request; one past it is fetched again,
    /// and serves as the last good set (within the stale limit) while the endpoint fails.
    @Test func aKeptSetPastItsMaximumAgeIsFetchedAgain() async throws {
        let k1 = try Self.key()
        try endpoint.publish([("k1", k1)])
        let kept = Mutex<JWKSCache.Persistence.Record?>(nil)
        let persistence = JWKSCache.Persistence(
            loadRecord: { kept.withLock { $0 } }, saveRecord: { record in kept.withLock { $0 = record } })
        endpoint.cacheControl("max-age=120")
        _ = try await cache(persistence: persistence).keys(for: "k1")
        #expect(kept.withLock { $0?.maximumAge } == 120 && endpoint.attempts == 1)
        // A new process, 100 s later: the kept set is fresh.
        clock.advance(by: 100)
        _ = try await cache(persistence: persistence).keys(for: "k1")
        #expect(endpoint.attempts == 1)
        // Another, past the kept max-age: fetched again.
        clock.advance(by: 30)
        _ = try await cache(persistence: persistence).keys(for: "k1")
        #expect(endpoint.attempts == 2)
        // A kept set with no max-age (the older format) gets the default (600 s); a failing endpoint leaves
        // it serving.
        let old = JWKSCache.Persistence(
            load: { kept.withLock { $0.map { (document: $0.document, fetchedAt: $0.fetchedAt) } } }, save: { _, _ in })
        clock.advance(by: 599)
        _ = try await cache(persistence: old).keys(for: "k1")
        #expect(endpoint.attempts == 2)
        clock.advance(by: 2)
        endpoint.answer(503)
        #expect(try await cache(persistence: old).keys(for: "k1").map(\.keyID) == ["k1"])
        #expect(endpoint.attempts == 3)
        // Past the stale limit (a day past its maximum age): not used.
        clock.advance(by: 86_400)
        await #expect(throws: OAuthError.self) { try await cache(persistence: old).keys(for: "k1") }
    }

    /// The secret store keeps the maximum age beside the document (in the format older versions read:
    /// the document's value is unchanged) and gives it back only with the document of the same fetch.
    @Test func theSecretStoreKeepsTheMaximumAge() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-jwks-age-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SecretStore(
            path: folder.appendingPathComponent("store.sqlite").path,
            masterKey: .keyFile(folder.appendingPathComponent("store.key").path), create: true)
        let kept = JWKSCache.Persistence.secretStore(store, for: Self.url)
        let document = Array(#"{"keys":[]}"#.utf8)
        let fetched = Date(timeIntervalSince1970: 1_790_000_000)
        kept.saveRecord(JWKSCache.Persistence.Record(document: document, fetchedAt: fetched, maximumAge: 120))
        #expect(
            kept.loadRecord() == JWKSCache.Persistence.Record(document: document, fetchedAt: fetched, maximumAge: 120))
        #expect(kept.load()?.document == document)
        let stored = try #require(try store.get(namespace: "moose.jwks", name: Self.url.absoluteString))
        #expect(Array(stored.dropFirst(8)) == document)
        // The document saved alone (the older `save`): its max-age is not another fetch's.
        kept.save(document, fetched.addingTimeInterval(60))
        #expect(kept.loadRecord()?.maximumAge == nil)
    }
}
