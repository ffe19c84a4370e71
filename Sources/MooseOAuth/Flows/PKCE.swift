#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
import MooseJWT
import MooseCrypto
import Logging

/// PKCE (RFC 7636) with S256, always.
public struct PKCE: Sendable {
    /// The verifier: 43 characters of base64url from 32 random bytes (RFC 7636 §4.1).
    public let verifier: String
    /// `BASE64URL(SHA256(verifier))` (RFC 7636 §4.2).
    public var challenge: String { PKCE.challenge(for: verifier) }

    /// A fresh verifier.
    public init() throws { verifier = Base64URL.encode(try SecureRandom.bytes(count: 32)) }
    /// A given verifier (test vectors).
    public init(verifier: String) { self.verifier = verifier }

    /// The S256 challenge of a verifier.
    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(DigestAlgorithm.sha256.hash(Array(verifier.utf8)))
    }
}
