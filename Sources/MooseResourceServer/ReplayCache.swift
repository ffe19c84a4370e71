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
}

/// A bounded in-memory replay cache: at most `capacity` entries, each forgotten after its expiry
/// (when the proof's `iat` has left the acceptance window, so a replay would be refused anyway).
/// Keys are kept as SHA-256 digests, so a long `jti` costs no more than a short one.
///
/// When full of unexpired entries it refuses to answer (throws) rather than forget one early: a
/// forgotten entry would let that proof be replayed.
public actor InMemoryDPoPReplayCache: DPoPReplayCache {
    /// Thrown when every slot holds an unexpired entry.
    public struct Full: Error, CustomStringConvertible {
        /// What happened.
        public var description: String { "the DPoP replay cache is full of unexpired entries" }
    }

    private let capacity: Int
    private let clock: @Sendable () -> Date
    private var entries: [[UInt8]: Date] = [:]
    private var nextSweep = Date.distantPast

    /// A cache holding at most `capacity` entries (about 100 bytes each).
    public init(capacity: Int = 100_000, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.capacity = max(1, capacity)
        self.clock = clock
    }

    /// The number of entries held (expired ones included until the next sweep).
    public var count: Int { entries.count }

    /// Records `key` until `expiry`: `true` the first time, `false` while an earlier record of it lasts.
    /// Throws `Full` when `capacity` unexpired entries are held.
    public func firstUse(of key: String, until expiry: Date) async throws -> Bool {
        let now = clock()
        let digest = DigestAlgorithm.sha256.hash(Array(key.utf8))
        if let held = entries[digest], held > now { return false }
        if entries.count >= capacity || now >= nextSweep {
            entries = entries.filter { $0.value > now }
            nextSweep = now.addingTimeInterval(30)
            guard entries.count < capacity else { throw Full() }
        }
        entries[digest] = expiry
        return true
    }
}
