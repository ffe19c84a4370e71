import Foundation
import MooseCrypto
import MooseJWT
@testable import MooseResourceServer
import Testing

/// No client can starve another through the DPoP replay cache: one proof key filling it (measured: a
/// 100,000-entry cache filled by one client in 21 s, every other client then answered 503 for 35 s)
/// is refused itself, by a per-key quota and, when the cache is full, by its fair share — never by
/// forgetting an unexpired entry, which would reopen the replay.
@Suite struct ReplayCacheFairnessTests {
    /// A settable clock for the cache.
    final class Clock: @unchecked Sendable {
        private let lock = NSLock()
        private var value = Harness.now
        var now: Date {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }

    /// The quota refusal `body` throws; `nil` (and an issue recorded) when it throws nothing or something else.
    func quotaRefusal(_ body: () async throws -> Bool) async -> DPoPReplayQuotaExceeded? {
        do {
            let first = try await body()
            Issue.record("admitted (first use: \(first)) where the key's quota should refuse it")
        } catch let quota as DPoPReplayQuotaExceeded {
            return quota
        } catch {
            Issue.record("refused with \(error), not DPoPReplayQuotaExceeded")
        }
        return nil
    }

    static let soon = Harness.now.addingTimeInterval(60)

    @Test func aFlooderIsRefusedAtItsQuotaAndAnotherKeyIsStillAdmitted() async throws {
        let clock = Clock()
        let cache = InMemoryDPoPReplayCache(capacity: 100, maximumEntriesPerKey: 5, clock: { clock.now })
        for index in 0..<5 {
            #expect(try await cache.firstUse(of: "flood \(index)", until: Self.soon, proofKey: "flood"))
        }
        let refused = try #require(
            await quotaRefusal { try await cache.firstUse(of: "flood 5", until: Self.soon, proofKey: "flood") })
        #expect(refused.held == 5 && refused.share == 5)
        #expect(refused.description.contains("this proof key holds 5 unexpired proofs"))
        #expect(await cache.count(forProofKey: "flood") == 5)

        #expect(try await cache.firstUse(of: "other 0", until: Self.soon, proofKey: "other"))
        // Replays are refused for everyone, the flooder at its quota included.
        #expect(try await !cache.firstUse(of: "flood 0", until: Self.soon, proofKey: "flood"))
        #expect(try await !cache.firstUse(of: "other 0", until: Self.soon, proofKey: "other"))
        // Under another key's name, too: the replay check is on the whole key.
        #expect(try await !cache.firstUse(of: "flood 1", until: Self.soon, proofKey: "other"))
    }

    /// The measured case, with the defaults: one key stops at 4,000 entries, far below the 100,000.
    @Test func theDefaultsStopOneKeyFarBelowTheCapacity() async throws {
        let cache = InMemoryDPoPReplayCache(clock: { Harness.now })
        for index in 0..<4_000 {
            #expect(try await cache.firstUse(of: "flood \(index)", until: Self.soon, proofKey: "flood"))
        }
        let refused = try #require(
            await quotaRefusal { try await cache.firstUse(of: "flood more", until: Self.soon, proofKey: "flood") })
        #expect(refused.share == 4_000)
        #expect(try await cache.firstUse(of: "other", until: Self.soon, proofKey: "other"))
    }

    /// The old cache refused every key once one had filled it; now the newcomer is admitted and the
    /// flooder, over its fair share, is refused.
    @Test func aFullCacheAdmitsANewcomerAndRefusesTheFlooder() async throws {
        let clock = Clock()
        let cache = InMemoryDPoPReplayCache(capacity: 6, clock: { clock.now })
        for index in 0..<6 {
            #expect(try await cache.firstUse(of: "flood \(index)", until: Self.soon, proofKey: "flood"))
        }
        let alone = try #require(
            await quotaRefusal { try await cache.firstUse(of: "flood 6", until: Self.soon, proofKey: "flood") })
        #expect(alone.held == 6 && alone.share == 6)

        // Two keys: a share of 3 each. The newcomer gets its 3; the flooder none.
        for index in 0..<3 {
            #expect(try await cache.firstUse(of: "second \(index)", until: Self.soon, proofKey: "second"))
        }
        _ = try #require(
            await quotaRefusal { try await cache.firstUse(of: "second 3", until: Self.soon, proofKey: "second") })
        let flood = try #require(
            await quotaRefusal { try await cache.firstUse(of: "flood 7", until: Self.soon, proofKey: "flood") })
        #expect(flood.held == 6 && flood.share == 3)
        // A third key: a share of 2.
        #expect(try await cache.firstUse(of: "third 0", until: Self.soon, proofKey: "third"))
        #expect(try await cache.firstUse(of: "third 1", until: Self.soon, proofKey: "third"))
        _ = try #require(
            await quotaRefusal { try await cache.firstUse(of: "third 2", until: Self.soon, proofKey: "third") })
        // Nothing was forgotten early: every entry is still a replay.
        #expect(await cache.count == 11)
        for index in 0..<6 {
            #expect(try await !cache.firstUse(of: "flood \(index)", until: Self.soon, proofKey: "flood"))
        }
        for index in 0..<3 {
            #expect(try await !cache.firstUse(of: "second \(index)", until: Self.soon, proofKey: "second"))
        }
    }

    @Test func expiredEntriesAreForgottenAndTheirKeyAdmittedAgain() async throws {
        let clock = Clock()
        let cache = InMemoryDPoPReplayCache(capacity: 4, maximumEntriesPerKey: 3, clock: { clock.now })
        for index in 0..<3 {
            #expect(try await cache.firstUse(of: "flood \(index)", until: Self.soon, proofKey: "flood"))
        }
        _ = try #require(
            await quotaRefusal { try await cache.firstUse(of: "flood 3", until: Self.soon, proofKey: "flood") })
        clock.now = Self.soon.addingTimeInterval(1)
        // The flooder's entries expired: they are swept, it is below its quota again, its old keys are first uses.
        #expect(try await cache.firstUse(of: "flood 0", until: clock.now.addingTimeInterval(60), proofKey: "flood"))
        #expect(await cache.count(forProofKey: "flood") == 1)
        #expect(try await cache.firstUse(of: "other", until: clock.now.addingTimeInterval(60), proofKey: "other"))
        #expect(await cache.count == 2)
    }

    @Test func aKeyAtItsQuotaIsAdmittedAgainWhenOneOfItsEntriesExpires() async throws {
        let clock = Clock()
        let cache = InMemoryDPoPReplayCache(capacity: 100, maximumEntriesPerKey: 2, clock: { clock.now })
        #expect(try await cache.firstUse(of: "a", until: Self.soon, proofKey: "flood"))
        #expect(try await cache.firstUse(of: "b", until: Self.soon.addingTimeInterval(60), proofKey: "flood"))
        _ = try #require(await quotaRefusal { try await cache.firstUse(of: "c", until: Self.soon, proofKey: "flood") })
        clock.now = Self.soon
        #expect(try await cache.firstUse(of: "c", until: Self.soon.addingTimeInterval(60), proofKey: "flood"))
        #expect(try await !cache.firstUse(of: "b", until: Self.soon.addingTimeInterval(60), proofKey: "flood"))
        #expect(await cache.count(forProofKey: "flood") == 2)
    }

    /// Many keys can still fill it, but never past twice `capacity`; then `Full`, for everyone.
    @Test func theCacheNeverHoldsMoreThanTwiceItsCapacity() async throws {
        let cache = InMemoryDPoPReplayCache(capacity: 2, clock: { Harness.now })
        #expect(try await cache.firstUse(of: "k0 a", until: Self.soon, proofKey: "k0"))
        #expect(try await cache.firstUse(of: "k0 b", until: Self.soon, proofKey: "k0"))
        #expect(try await cache.firstUse(of: "k1 a", until: Self.soon, proofKey: "k1"))
        #expect(try await cache.firstUse(of: "k2 a", until: Self.soon, proofKey: "k2"))
        await #expect(throws: InMemoryDPoPReplayCache.Full.self) {
            try await cache.firstUse(of: "k3 a", until: Self.soon, proofKey: "k3")
        }
        #expect(await cache.count == 4)
    }

    /// Through the resource server, with real proofs from two clients: the flooder's proofs past a full
    /// cache are 503 with a reason that says it is that key's share; the other client's proof is accepted;
    /// replays stay `invalid_dpop_proof`. (The old cache answered the second client 503.)
    @Test func throughTheResourceServerTheOtherClientIsServed() async throws {
        let harness = try Harness()
        let server = ResourceServer(
            configuration: harness.configuration(), keys: StaticAccessTokenKeys([harness.issuerPublic]),
            replayCache: InMemoryDPoPReplayCache(capacity: 8, clock: { Harness.now }))
        func verify(_ token: String, _ proof: String) async throws(ResourceServerRefusal) -> VerifiedPrincipal {
            try await server.verify(
                authorizationHeader: "DPoP \(token)", dpopHeader: proof, method: "GET", url: Harness.url)
        }
        let floodToken = try harness.token(bound: true)
        var floodProofs: [String] = []
        for _ in 0..<8 {
            let proof = try harness.proof(for: floodToken)
            floodProofs.append(proof)
            _ = try await verify(floodToken, proof)
        }
        let refused = try #require(
            try await refusal { try await verify(floodToken, try harness.proof(for: floodToken)) })
        #expect(refused.code == ResourceServerRefusal.temporarilyUnavailable && refused.status == 503)
        #expect(refused.reason.contains("this proof key holds 8 unexpired proofs"), "\(refused.reason)")
        #expect(refused.reason.contains(harness.thumbprint))

        // Another client, with its own key and a token bound to it.
        let otherKey = try PrivateKey.generate(.ec(.p256))
        let otherSigner = try JWTSigner(key: JWTKey(privateKey: otherKey), algorithm: .es256)
        let otherJWK = try JWK(publicKey: otherKey.publicKey())
        let otherThumbprint = try otherJWK.thumbprint()
        let otherToken = try harness.token(["cnf": .object(["jkt": .string(otherThumbprint)])])
        let otherProof = try harness.proof(
            for: otherToken, header: DPoP.proofHeader(publicJWK: otherJWK), signer: otherSigner)
        let principal = try await verify(otherToken, otherProof)
        #expect(principal.confirmationThumbprint == otherThumbprint)

        // Replays are still replays, for both.
        let replay = try #require(try await refusal { try await verify(otherToken, otherProof) })
        #expect(replay.code == ResourceServerRefusal.invalidDPoPProof)
        let floodReplay = try #require(try await refusal { try await verify(floodToken, floodProofs[0]) })
        #expect(floodReplay.code == ResourceServerRefusal.invalidDPoPProof)
    }
}
