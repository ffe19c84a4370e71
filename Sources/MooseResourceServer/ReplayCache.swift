#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseCrypto

/// Remembers DPoP proof identifiers so that none is accepted twice (RFC 9449 §11.1). One process can
/// use `InMemoryDPoPReplayCache`; several replicas need a shared store implementing this protocol.
public protocol DPoPReplayCache: Sendable {
    /// Records `key` until `expiry` and returns `true` if it was not already recorded (first use),
    /// `false` if it was (a replay). Throws when it cannot tell (storage down, cache full): the request
    /// is then refused as `temporarilyUnavailable` — never accepted without the check.
    func firstUse(of key: String, until expiry: Date) async throws -> Bool

    /// `firstUse(of:until:)` for a proof made with the key whose JWK thumbprint (RFC 7638) is `proofKey`,
    /// so that the cache can bound what one proof key holds: a cache that will not record this proof
    /// because its key already holds its share throws `DPoPReplayQuotaExceeded`, and the request is
    /// refused as `temporarilyUnavailable` with a reason naming the quota — that key's request only, not
    /// the other clients'. A replay is still `false`, whatever the key holds.
    ///
    /// The default implementation ignores `proofKey` and calls `firstUse(of:until:)`, so a cache written
    /// before quotas keeps working (without a per-key bound).
    ///
    /// - Parameters:
    ///   - key: what identifies the proof (the resource server passes thumbprint, space, `jti`).
    ///   - expiry: when the record may be forgotten (the proof's `iat` has then left the window).
    ///   - proofKey: the proof key's JWK thumbprint; `nil`: the proof is attributed to no key.
    /// - Returns: `true` for a first use, `false` for a replay.
    /// - Throws: `DPoPReplayQuotaExceeded` when `proofKey` holds its share; anything else when the cache
    ///   cannot tell.
    func firstUse(of key: String, until expiry: Date, proofKey: String?) async throws -> Bool
}

extension DPoPReplayCache {
    /// Ignores `proofKey` and calls `firstUse(of:until:)`: what a cache that keeps no per-key count does.
    public func firstUse(of key: String, until expiry: Date, proofKey: String?) async throws -> Bool {
        try await firstUse(of: key, until: expiry)
    }
}

/// Thrown by a replay cache that will not record a new proof because its key already holds as many
/// unexpired entries as it may: the per-key quota, or — when the cache is full — its fair share of it.
/// Only that key's proofs are refused (until some of its entries expire); no entry is forgotten early,
/// since a forgotten entry would let its proof be replayed. The resource server answers 503
/// `temporarilyUnavailable`, with this description as the refusal's reason.
public struct DPoPReplayQuotaExceeded: Error, Sendable, CustomStringConvertible {
    /// The unexpired entries the proof's key holds.
    public let held: Int
    /// The most it may hold now: the per-key quota, or its fair share of a full cache if that is lower.
    public let share: Int

    /// A refusal for a key holding `held` entries where `share` are allowed.
    public init(held: Int, share: Int) {
        self.held = held
        self.share = share
    }

    /// Says that this proof key, not the cache, is the cause: `this proof key holds 4000 unexpired …`.
    public var description: String {
        "this proof key holds \(held) unexpired proofs in the DPoP replay cache, its share is \(share): "
            + "its new proofs are refused until some expire"
    }
}

/// A bounded in-memory replay cache, fair between proof keys: at most `maximumEntriesPerKey` entries
/// for one proof key (JWK thumbprint), each forgotten after its expiry (when the proof's `iat` has left
/// the acceptance window, so a replay would be refused anyway). Keys are kept as SHA-256 digests, so a
/// long `jti` costs no more than a short one.
///
/// No entry is ever forgotten before its expiry: a forgotten entry would let that proof be replayed.
/// So a key that sends more proofs than it may hold is refused instead (`DPoPReplayQuotaExceeded`),
/// and the others are not: once `capacity` unexpired entries are held, a key is admitted only while it
/// holds less than its fair share (`capacity` divided by the number of keys holding entries, the
/// newcomer counted), so a new client is admitted even when one flooder filled the cache. Past
/// `capacity` the cache grows only by such admissions, and never past twice `capacity` (then it throws
/// `Full`: reachable only with many keys, each with a token bound to it).
///
/// Entries recorded by `firstUse(of:until:)`, without a proof key, have no quota and no share: one is
/// refused (`Full`) once `capacity` entries are held.
public actor InMemoryDPoPReplayCache: DPoPReplayCache {
    /// Thrown when the cache as a whole has no room left for an entry: `capacity` unexpired entries held
    /// for one recorded without a proof key, twice `capacity` for one with a key under its share.
    public struct Full: Error, CustomStringConvertible {
        /// Says that the cache as a whole, not one key, ran out of room.
        public var description: String { "the DPoP replay cache is full of unexpired entries" }
    }

    /// The entries of one proof key (or of none), and a time no later than the soonest of their expiries.
    private struct Holder {
        var entries: [[UInt8]: Date] = [:]
        var soonest = Date.distantFuture
    }

    /// The holder of entries recorded without a proof key (no SHA-256 is empty).
    private static let unattributed: [UInt8] = []

    private let capacity: Int
    private let maximumEntriesPerKey: Int
    private let clock: @Sendable () -> Date
    /// Each entry's digest → its holder's (the proof key's SHA-256, or `unattributed`).
    private var holderOf: [[UInt8]: [UInt8]] = [:]
    /// The holders; none is empty.
    private var holders: [[UInt8]: Holder] = [:]
    /// No later than the soonest expiry held: before then a sweep would find nothing.
    private var soonest = Date.distantFuture
    private var nextSweep = Date.distantPast

    /// A cache holding `capacity` entries (roughly 150 bytes each) before it gets strict, at most
    /// `maximumEntriesPerKey` of them for one proof key.
    ///
    /// - Parameters:
    ///   - capacity: the unexpired entries held before only keys under their fair share are admitted
    ///     (default 100,000; at least 1); never more than twice this are held.
    ///   - maximumEntriesPerKey: the most unexpired entries one proof key holds (default 4,000; at least
    ///     1). Each lasts the proof window (`maximumAge + futureLeeway + 1`, 66 s by default), so the
    ///     default lets one key make about 60 proofs a second; raise it for a busier client.
    ///   - clock: the current time; default: the system's.
    public init(
        capacity: Int = 100_000, maximumEntriesPerKey: Int = 4_000,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.capacity = min(max(1, capacity), Int.max / 2)
        self.maximumEntriesPerKey = max(1, maximumEntriesPerKey)
        self.clock = clock
    }

    /// The number of entries held (expired ones included until the next sweep).
    public var count: Int { holderOf.count }

    /// The number of entries held for the proof key whose JWK thumbprint is `proofKey` (expired ones
    /// included until the next sweep).
    public func count(forProofKey proofKey: String) -> Int {
        holders[DigestAlgorithm.sha256.hash(Array(proofKey.utf8))]?.entries.count ?? 0
    }

    /// Records `key` until `expiry`, attributed to no proof key: `true` the first time, `false` while an
    /// earlier record of it lasts. Throws `Full` when `capacity` unexpired entries are held.
    public func firstUse(of key: String, until expiry: Date) async throws -> Bool {
        try record(key, until: expiry, holder: Self.unattributed)
    }

    /// Records `key` until `expiry` for the proof key whose JWK thumbprint is `proofKey`: `true` the
    /// first time, `false` while an earlier record of it lasts (whatever the key holds). Throws
    /// `DPoPReplayQuotaExceeded` when that key holds `maximumEntriesPerKey` unexpired entries, or its
    /// fair share of a full cache; `Full` when twice `capacity` are held. `proofKey` `nil`: as
    /// `firstUse(of:until:)`.
    public func firstUse(of key: String, until expiry: Date, proofKey: String?) async throws -> Bool {
        try record(
            key, until: expiry,
            holder: proofKey.map { DigestAlgorithm.sha256.hash(Array($0.utf8)) } ?? Self.unattributed)
    }

    private func record(_ key: String, until expiry: Date, holder: [UInt8]) throws -> Bool {
        let now = clock()
        let digest = DigestAlgorithm.sha256.hash(Array(key.utf8))
        if let previous = holderOf[digest], let held = holders[previous]?.entries[digest] {
            if held > now { return false }
            forget(digest, of: previous)
        }
        if now >= nextSweep || (holderOf.count >= capacity && soonest <= now) { sweep(now) }
        if holder == Self.unattributed {
            guard holderOf.count < capacity else { throw Full() }
        } else {
            var held = holders[holder]?.entries.count ?? 0
            if held >= maximumEntriesPerKey {
                held = sweep(holder, now)
                if held >= maximumEntriesPerKey {
                    throw DPoPReplayQuotaExceeded(held: held, share: maximumEntriesPerKey)
                }
            }
            if holderOf.count >= capacity {
                // Full: refuse only a key at or over its fair share; a newcomer (holding none) counts itself.
                let keys = holders.count - (holders[Self.unattributed] == nil ? 0 : 1) + (held == 0 ? 1 : 0)
                let share = min(maximumEntriesPerKey, max(1, capacity / max(1, keys)))
                if held >= share { throw DPoPReplayQuotaExceeded(held: held, share: share) }
                guard holderOf.count < 2 * capacity else { throw Full() }
            }
        }
        holderOf[digest] = holder
        var state = holders.removeValue(forKey: holder) ?? Holder()
        state.entries[digest] = expiry
        state.soonest = min(state.soonest, expiry)
        holders[holder] = state
        soonest = min(soonest, expiry)
        return true
    }

    /// Forgets one entry of `holder`.
    private func forget(_ digest: [UInt8], of holder: [UInt8]) {
        holderOf[digest] = nil
        holders[holder]?.entries[digest] = nil
        if holders[holder]?.entries.isEmpty == true { holders[holder] = nil }
    }

    /// Forgets `holder`'s expired entries (if any can have expired); returns how many it still holds.
    private func sweep(_ holder: [UInt8], _ now: Date) -> Int {
        guard let soonest = holders[holder]?.soonest, soonest <= now,
            var state = holders.removeValue(forKey: holder)
        else { return holders[holder]?.entries.count ?? 0 }
        state.soonest = .distantFuture
        for (digest, expiry) in state.entries {
            if expiry > now {
                state.soonest = min(state.soonest, expiry)
            } else {
                state.entries[digest] = nil
                holderOf[digest] = nil
            }
        }
        if !state.entries.isEmpty { holders[holder] = state }
        return state.entries.count
    }

    /// Forgets every expired entry; the next periodic sweep is in 30 s.
    private func sweep(_ now: Date) {
        for holder in Array(holders.keys) { _ = sweep(holder, now) }
        soonest = holders.values.reduce(Date.distantFuture) { min($0, $1.soonest) }
        nextSweep = now.addingTimeInterval(30)
    }
}
