#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseCrypto
import MooseJWT

/// Server-provided DPoP nonces (RFC 9449 §9): a value the server hands out in `DPoP-Nonce` and then
/// requires in proofs, which limits how far ahead a stolen key can pre-compute proofs.
public protocol DPoPNonceSource: Sendable {
    /// The nonce to send now (in `DPoP-Nonce` on a refusal or a success).
    func currentNonce() async -> String
    /// Whether `nonce` from a proof is still accepted (compared byte for byte).
    func accepts(_ nonce: String) async -> Bool
}

/// Random nonces that rotate every `lifetime`; the previous one stays good for one more period so a
/// client racing a rotation is not refused.
///
/// ```swift
/// let server = ResourceServer(configuration: config, keys: keys, nonces: RotatingDPoPNonces(lifetime: 300))
/// ```
public actor RotatingDPoPNonces: DPoPNonceSource {
    private let lifetime: TimeInterval
    private let clock: @Sendable () -> Date
    private var current: (value: String, since: Date)? = nil
    private var previous: String? = nil

    /// Nonces rotated every `lifetime` seconds.
    public init(lifetime: TimeInterval = 300, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.lifetime = max(1, lifetime)
        self.clock = clock
    }

    /// The nonce of the current period (a new random one once `lifetime` has passed).
    public func currentNonce() async -> String { rotated().value }

    /// `true` for the current nonce and the one before it, byte for byte.
    public func accepts(_ nonce: String) async -> Bool {
        let current = rotated()
        return nonce.utf8.elementsEqual(current.value.utf8)
            || (previous.map { nonce.utf8.elementsEqual($0.utf8) } ?? false)
    }

    private func rotated() -> (value: String, since: Date) {
        let now = clock()
        if let current, now.timeIntervalSince(current.since) < lifetime, now >= current.since { return current }
        previous = current?.value
        // 128 random bits; if the system's generator fails, a digest of the time and the old nonce
        // still changes the value (never a constant nonce).
        let bytes =
            (try? SecureRandom.bytes(count: 16))
            ?? DigestAlgorithm.sha256.hash(Array("\(now.timeIntervalSince1970)\(previous ?? "")".utf8))
        let fresh = (value: Base64URL.encode(bytes), since: now)
        current = fresh
        return fresh
    }
}
