public import MooseCrypto

/// The JWS algorithms Moose signs and verifies (RFC 7518 §3, RFC 8037, RFC 9864).
///
/// `none` is deliberately not a case: an unsigned token can never be verified.
public enum JWTAlgorithm: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// HMAC with SHA-256.
    case hs256 = "HS256"
    /// HMAC with SHA-384.
    case hs384 = "HS384"
    /// HMAC with SHA-512.
    case hs512 = "HS512"
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = "RS256"
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    case rs384 = "RS384"
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    case rs512 = "RS512"
    /// RSASSA-PSS with SHA-256.
    case ps256 = "PS256"
    /// RSASSA-PSS with SHA-384.
    case ps384 = "PS384"
    /// RSASSA-PSS with SHA-512.
    case ps512 = "PS512"
    /// ECDSA on P-256 with SHA-256.
    case es256 = "ES256"
    /// ECDSA on P-384 with SHA-384.
    case es384 = "ES384"
    /// ECDSA on P-521 with SHA-512.
    case es512 = "ES512"
    /// EdDSA (RFC 8037); Moose supports the Ed25519 curve.
    case eddsa = "EdDSA"
    /// Ed25519, RFC 9864's fully-specified name for the same signature as `EdDSA` with Ed25519.
    case ed25519 = "Ed25519"

    /// The JOSE name (`RS256`).
    public var description: String { rawValue }

    /// What kind of key this algorithm needs.
    public enum KeyFamily: String, Sendable {
        /// A symmetric secret (`kty: oct`).
        case hmac = "oct"
        /// An RSA key.
        case rsa = "RSA"
        /// An EC key on the given curve.
        case ec = "EC"
        /// An Ed25519 key (`kty: OKP`).
        case okp = "OKP"
    }

    /// The key family this algorithm needs.
    public var keyFamily: KeyFamily {
        switch self {
        case .hs256, .hs384, .hs512: .hmac
        case .rs256, .rs384, .rs512, .ps256, .ps384, .ps512: .rsa
        case .es256, .es384, .es512: .ec
        case .eddsa, .ed25519: .okp
        }
    }

    /// The hash function inside the algorithm (`nil` for EdDSA).
    public var hash: DigestAlgorithm? {
        switch self {
        case .hs256, .rs256, .ps256, .es256: .sha256
        case .hs384, .rs384, .ps384, .es384: .sha384
        case .hs512, .rs512, .ps512, .es512: .sha512
        case .eddsa, .ed25519: nil
        }
    }

    /// The curve an ECDSA algorithm requires.
    public var curve: EllipticCurve? {
        switch self {
        case .es256: .p256
        case .es384: .p384
        case .es512: .p521
        default: nil
        }
    }

    var signatureAlgorithm: SignatureAlgorithm? {
        switch self {
        case .hs256, .hs384, .hs512: nil
        case .rs256: .rsaPKCS1v15(.sha256)
        case .rs384: .rsaPKCS1v15(.sha384)
        case .rs512: .rsaPKCS1v15(.sha512)
        case .ps256: .rsaPSS(.sha256)
        case .ps384: .rsaPSS(.sha384)
        case .ps512: .rsaPSS(.sha512)
        case .es256: .ecdsa(.sha256)
        case .es384: .ecdsa(.sha384)
        case .es512: .ecdsa(.sha512)
        case .eddsa, .ed25519: .ed25519
        }
    }

    /// Every asymmetric algorithm: a sensible allow-list when keys come from a JWKS.
    public static let asymmetric: Set<JWTAlgorithm> = Set(allCases.filter { $0.keyFamily != .hmac })
}
