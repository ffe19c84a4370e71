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
/// Only the signature and the parsing are remembered. A hit is honoured only while the key source still
/// gives the very key that verified the token (a key the issuer withdrew, or material replaced under the
/// same `kid`, ends every entry it verified), and every claim check — `exp`, `nbf`, `iat` against the
/// clock, `iss`, `aud`, the required claims — runs again on each use. Tokens are compared byte for byte.
/// Only tokens that passed every check are kept, so forged ones cannot fill it; it holds at most `limit`
/// entries, expired ones are dropped first, and a full cache sheds a quarter of its entries.
final class VerifiedTokens: Sendable {
    /// What a verified token left: its claims, the `kid` it named and the key that verified it.
    struct Entry: Sendable {
        let claims: JWTClaims
        let keyID: String?
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

    /// The entry for `token`, if it was verified before.
    func entry(for token: String) -> Entry? { entries.withLock { $0[Token(text: token)] } }

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
