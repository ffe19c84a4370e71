#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseJWT
import Synchronization

/// Access tokens whose signature this resource server has verified, so that the same token presented
/// again (a client sends one token with many requests) costs a lookup instead of a signature check.
/// Envoy's `jwt_authn` (`jwt_cache_config`) keeps such a cache for the same reason.
///
/// Only the signature and the parsing are remembered. A hit is honoured only while the key source's
/// current keys still select the very key that verified the token for its header (a key the issuer
/// withdrew, material replaced under the same `kid`, or a set that now makes the choice ambiguous ends the
/// entry), and every claim check — `exp`, `nbf`, `iat` against the clock, `iss`, `aud`, the required
/// claims — runs again on each use, then the binding, the proof and the scopes. Tokens are compared byte
/// for byte. Only tokens of requests that passed every check are kept, so forged ones cannot fill it; it
/// holds at most `limit` entries, expired ones are dropped first, and a full cache sheds a quarter of its
/// entries (arbitrary ones: a holder of many valid tokens can push others' out, which costs only speed).
/// A key set that changed is new keys, so its first use verifies every token once more (`JWKSCache` keeps
/// its keys when a refetch answers the same document).
final class VerifiedTokens: Sendable {
    /// What a verified token left: its claims, its header and the key that verified it.
    struct Entry: Sendable {
        let claims: JWTClaims
        /// The token's header: the key is selected for it again on each use.
        let header: JOSEHeader
        let keyIdentity: UInt64
        /// When the entry is of no more use: `exp` plus the leeway (`nil`: no `exp`, kept until shed).
        let usefulUntil: Date?
    }

    /// A token's exact bytes as a dictionary key (`String ==` compares canonical equivalence, not bytes).
    struct Token: Hashable, Sendable {
        let text: String

        static func == (lhs: Self, rhs: Self) -> Bool {
            var (left, right) = (lhs.text, rhs.text)
            return left.withUTF8 { left in right.withUTF8 { left.elementsEqual($0) } }
        }

        func hash(into hasher: inout Hasher) {
            var text = text
            text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    private let entries = Mutex<[Token: Entry]>([:])
    /// The most entries kept.
    let limit: Int

    init(limit: Int) { self.limit = limit }

    private let hitCount = Atomic<Int>(0)

    /// The entry for `token`, if it was verified before.
    func entry(for token: String) -> Entry? { entries.withLock { $0[Token(text: token)] } }

    /// Counts a hit that was honoured (for tests: that a remembered token was used, not verified again).
    func honoured() { hitCount.add(1, ordering: .relaxed) }

    /// Hits honoured so far.
    var hits: Int { hitCount.load(ordering: .relaxed) }

    /// Remembers `token` as verified.
    func insert(_ token: String, _ entry: Entry, now: Date) {
        entries.withLock { entries in
            if entries.count >= limit {
                entries = entries.filter { $0.value.usefulUntil.map { $0 > now } ?? true }
            }
            if entries.count >= limit {
                for key in entries.keys.prefix(max(1, limit / 4)) { entries[key] = nil }
            }
            entries[Token(text: token)] = entry
        }
    }

    /// Forgets `token` (its key is gone, or it expired).
    func remove(_ token: String) { _ = entries.withLock { $0.removeValue(forKey: Token(text: token)) } }

    /// How many tokens are remembered now.
    var count: Int { entries.withLock { $0.count } }
}
