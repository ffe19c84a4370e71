#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseCrypto
import Synchronization

/// A key for signing or verifying JWTs: an HMAC secret, or an RSA/EC/Ed25519 key, with its
/// optional `kid` and pinned algorithm.
///
/// A key pinned to an algorithm (`algorithm`, or a JWK's `alg`) is used only with that algorithm,
/// whatever a token's header says.
///
/// ```swift
/// let hmac = JWTKey(secret: Array(secretData), keyID: "2024")
/// let rsa = try JWTKey(publicKey: PublicKey(pem: pem), algorithm: .rs256)
/// ```
public struct JWTKey: Sendable {
    enum Material: Sendable {
        case secret(SecretKey, [DigestAlgorithm: HMACAuthenticator])
        case publicKey(PublicKey)
        case privateKey(PrivateKey, PublicKey)
    }

    let material: Material
    /// The key's `kid`, matched against a token's `kid` header.
    public let keyID: String?
    /// The algorithm the key is pinned to, as written (a JWK's `alg` may name one Moose does not sign with).
    public let pinnedAlgorithm: String?
    let use: String?
    let operations: [String]?
    /// Why the key is too weak for any algorithm (small or ROCA-vulnerable RSA), decided once at import.
    private let rsaWeakness: String?
    /// Which import this is: copies of the value share it; two imports of the same material (a key set
    /// fetched again) do not. The resource server's cache of verified tokens ties each entry to the key that
    /// verified it and drops it once the key source no longer gives that key.
    package let identity: UInt64 = JWTKey.identities.add(1, ordering: .relaxed).newValue
    private static let identities = Atomic<UInt64>(0)

    /// An HMAC secret. The bytes are used as they are (no base64 decoding, no trimming).
    public init(secret: some ContiguousBytes, keyID: String? = nil, algorithm: JWTAlgorithm? = nil) {
        let key = SecretKey(secret)
        var macs: [DigestAlgorithm: HMACAuthenticator] = [:]
        for hash in DigestAlgorithm.allCases { macs[hash] = try? HMACAuthenticator(key: key, hash: hash) }
        material = .secret(key, macs)
        self.keyID = keyID
        pinnedAlgorithm = algorithm?.rawValue
        use = nil
        operations = nil
        rsaWeakness = nil
    }

    /// A public key for verification.
    public init(publicKey: PublicKey, keyID: String? = nil, algorithm: JWTAlgorithm? = nil) {
        material = .publicKey(publicKey)
        self.keyID = keyID
        pinnedAlgorithm = algorithm?.rawValue
        use = nil
        operations = nil
        rsaWeakness = JWTKey.rsaWeakness(of: material)
    }

    /// A private key for signing (it verifies too, with its public part).
    public init(privateKey: PrivateKey, keyID: String? = nil, algorithm: JWTAlgorithm? = nil) throws(JWTError) {
        do {
            material = .privateKey(privateKey, try privateKey.publicKey())
        } catch {
            throw JWTError(JWTError.invalidKey, "cannot derive the public key: \(error.message)")
        }
        self.keyID = keyID
        pinnedAlgorithm = algorithm?.rawValue
        use = nil
        operations = nil
        rsaWeakness = JWTKey.rsaWeakness(of: material)
    }

    /// Reads a PEM key: a public key, a certificate, or a private key.
    public init(pem: String, keyID: String? = nil, algorithm: JWTAlgorithm? = nil) throws(JWTError) {
        if pem.contains("PRIVATE KEY-----") {
            do {
                try self.init(privateKey: try PrivateKey(pem: pem), keyID: keyID, algorithm: algorithm)
            } catch let error as CryptographyError {
                throw JWTError(JWTError.invalidKey, "PEM private key: \(error.message)")
            } catch {
                throw error as? JWTError ?? JWTError(JWTError.invalidKey, "PEM private key unreadable")
            }
        } else {
            do {
                self.init(publicKey: try PublicKey(pem: pem), keyID: keyID, algorithm: algorithm)
            } catch {
                throw JWTError(JWTError.invalidKey, "PEM key: \(error.message)")
            }
        }
    }

    init(jwk: JWK, wantPrivate: Bool) throws(JWTError) {
        keyID = jwk.keyID
        pinnedAlgorithm = jwk.algorithm
        use = jwk.use
        operations = jwk.keyOperations
        do {
            switch jwk.keyType {
            case "oct":
                let secret = try jwk.bytes("k")
                let key = SecretKey(secret)
                var macs: [DigestAlgorithm: HMACAuthenticator] = [:]
                for hash in DigestAlgorithm.allCases { macs[hash] = try? HMACAuthenticator(key: key, hash: hash) }
                material = .secret(key, macs)
            case "RSA":
                let n = try jwk.bytes("n"), e = try jwk.bytes("e")
                if wantPrivate {
                    let d = try jwk.bytes("d")
                    let p = try jwk.optionalBytes("p"), q = try jwk.optionalBytes("q")
                    let dp = try jwk.optionalBytes("dp"), dq = try jwk.optionalBytes("dq"),
                        qi = try jwk.optionalBytes("qi")
                    let primes = p.flatMap { p in q.map { (p: p, q: $0) } }
                    var crt: (dp: [UInt8], dq: [UInt8], qi: [UInt8])? = nil
                    if let dp, let dq, let qi { crt = (dp, dq, qi) }
                    let key = try PrivateKey(
                        rsaModulus: n, publicExponent: e, privateExponent: d, primes: primes, crt: crt)
                    material = .privateKey(key, try key.publicKey())
                } else {
                    material = .publicKey(try PublicKey(rsaModulus: n, exponent: e))
                }
            case "EC":
                guard let crv = jwk.curve, let curve = EllipticCurve(rawValue: crv) else {
                    throw JWTError(
                        JWTError.invalidKey, "EC JWK curve \"\(jwk.curve ?? "(none)")\" is not P-256, P-384 or P-521",
                        field: "crv")
                }
                let x = try jwk.bytes("x"), y = try jwk.bytes("y")
                if wantPrivate {
                    let key = try PrivateKey(curve: curve, d: try jwk.bytes("d"), x: x, y: y)
                    material = .privateKey(key, try key.publicKey())
                } else {
                    material = .publicKey(try PublicKey(curve: curve, x: x, y: y))
                }
            case "OKP":
                guard jwk.curve == "Ed25519" else {
                    throw JWTError(
                        JWTError.invalidKey,
                        "OKP JWK curve \"\(jwk.curve ?? "(none)")\" is not supported (only Ed25519)",
                        field: "crv")
                }
                if wantPrivate {
                    let key = try PrivateKey(ed25519Seed: try jwk.bytes("d"))
                    let publicKey = try key.publicKey()
                    guard publicKey.ed25519Raw == (try jwk.bytes("x")) else {
                        throw JWTError(JWTError.invalidKey, "OKP JWK \"x\" does not match its \"d\"", field: "x")
                    }
                    material = .privateKey(key, publicKey)
                } else {
                    material = .publicKey(try PublicKey(ed25519: try jwk.bytes("x")))
                }
            default:
                throw JWTError(JWTError.invalidKey, "JWK kty \"\(jwk.keyType)\" is not supported", field: "kty")
            }
            rsaWeakness = JWTKey.rsaWeakness(of: material)
        } catch let error as JWTError {
            throw error
        } catch let error as CryptographyError {
            throw JWTError(
                JWTError.invalidKey, "\(jwk.keyType) JWK\(jwk.keyID.map { " (kid \($0))" } ?? ""): \(error.message)")
        } catch {
            throw JWTError(JWTError.invalidKey, "unusable JWK")
        }
    }

    /// `kty` of this key: `oct`, `RSA`, `EC` or `OKP`.
    public var family: JWTAlgorithm.KeyFamily {
        switch material {
        case .secret: .hmac
        case .publicKey(let key), .privateKey(_, let key):
            switch key.type {
            case .rsa: .rsa
            case .ec: .ec
            case .ed25519: .okp
            }
        }
    }

    /// The public key (for RSA, EC and Ed25519 keys); `nil` for an HMAC secret.
    public var publicKey: PublicKey? {
        switch material {
        case .secret: nil
        case .publicKey(let key), .privateKey(_, let key): key
        }
    }

    /// Why this key cannot be used to verify (or sign) with `algorithm`, or `nil` when it can.
    func mismatch(for algorithm: JWTAlgorithm, signing: Bool = false) -> JWTError? {
        if let pinnedAlgorithm, pinnedAlgorithm != algorithm.rawValue {
            // RFC 9864: "Ed25519" is the fully-specified name of EdDSA with Ed25519.
            let edPair: Set<String> = ["EdDSA", "Ed25519"]
            if !(edPair.contains(pinnedAlgorithm) && edPair.contains(algorithm.rawValue)) {
                return JWTError(
                    JWTError.keyAlgorithmMismatch,
                    "key\(keyDescription) is pinned to \(pinnedAlgorithm), token uses \(algorithm)", field: "alg")
            }
        }
        if let use, use != "sig" {
            return JWTError(
                JWTError.keyAlgorithmMismatch, "key\(keyDescription) has use \"\(use)\", not \"sig\"", field: "use")
        }
        if let operations, !operations.contains(signing ? "sign" : "verify") {
            return JWTError(
                JWTError.keyAlgorithmMismatch,
                "key\(keyDescription) key_ops do not include \"\(signing ? "sign" : "verify")\"", field: "key_ops")
        }
        guard family == algorithm.keyFamily else {
            return JWTError(
                JWTError.keyAlgorithmMismatch,
                "\(algorithm) needs a\(algorithm.keyFamily == .hmac ? "n HMAC secret" : " \(algorithm.keyFamily.rawValue) key"), but key\(keyDescription) is \(typeDescription)",
                field: "alg")
        }
        if let curve = algorithm.curve, case .ec(let keyCurve) = publicKey?.type, keyCurve != curve {
            return JWTError(
                JWTError.keyAlgorithmMismatch,
                "\(algorithm) needs a \(curve.rawValue) key, but key\(keyDescription) is on \(keyCurve.rawValue)",
                field: "crv")
        }
        return nil
    }

    /// Why this key is too weak for `algorithm`, or `nil`.
    func weakness(for algorithm: JWTAlgorithm) -> JWTError? {
        switch material {
        case .secret(let secret, _):
            // RFC 7518 §3.2: a key of the same size as the hash output or larger MUST be used.
            if let hash = algorithm.hash, secret.byteCount < hash.outputByteCount {
                return JWTError(
                    JWTError.weakKey,
                    "\(algorithm) needs a secret of at least \(hash.outputByteCount) bytes (RFC 7518 §3.2); this one has \(secret.byteCount)"
                )
            }
        case .publicKey(let key), .privateKey(_, let key):
            // RFC 7518 §3.3: RSA keys of 2048 bits or larger MUST be used.
            _ = key
            if let rsaWeakness {
                return JWTError(JWTError.weakKey, "\(algorithm) refuses RSA key\(keyDescription): \(rsaWeakness)")
            }
        }
        return nil
    }

    private static func rsaWeakness(of material: Material) -> String? {
        let key: PublicKey
        switch material {
        case .secret: return nil
        case .publicKey(let publicKey), .privateKey(_, let publicKey): key = publicKey
        }
        guard case .rsa(let bits) = key.type else { return nil }
        // RFC 7518 §3.3: RSA keys of 2048 bits or larger MUST be used.
        if bits < 2048 { return "it has \(bits) bits; RFC 7518 §3.3 requires at least 2048" }
        if key.hasROCAFingerprint {
            return "it has the ROCA fingerprint (CVE-2017-15361): its private key is recoverable"
        }
        return nil
    }

    var keyDescription: String { keyID.map { " \"\($0)\"" } ?? "" }

    var typeDescription: String {
        switch material {
        case .secret: "an HMAC secret"
        case .publicKey(let key), .privateKey(_, let key): "\(key.type)"
        }
    }

    /// Verifies `signature` over `input` (the key must already fit the algorithm).
    func verify(_ signature: [UInt8], over input: [UInt8], algorithm: JWTAlgorithm) -> Bool {
        switch material {
        case .secret(_, let macs):
            guard let hash = algorithm.hash, let mac = macs[hash] else { return false }
            return mac.isValidAuthenticationCode(signature, for: input)
        case .publicKey(let key), .privateKey(_, let key):
            guard let scheme = algorithm.signatureAlgorithm else { return false }
            return (try? key.isValidSignature(signature, for: input, algorithm: scheme)) ?? false
        }
    }

    func sign(_ input: [UInt8], algorithm: JWTAlgorithm) throws(JWTError) -> [UInt8] {
        do {
            switch material {
            case .secret(_, let macs):
                guard let hash = algorithm.hash, let mac = macs[hash] else {
                    throw JWTError(JWTError.keyAlgorithmMismatch, "\(algorithm) cannot sign with an HMAC secret")
                }
                return try mac.authenticationCode(for: input)
            case .privateKey(let key, _):
                guard let scheme = algorithm.signatureAlgorithm else {
                    throw JWTError(JWTError.keyAlgorithmMismatch, "\(algorithm) cannot sign with \(typeDescription)")
                }
                return try key.signature(for: input, algorithm: scheme)
            case .publicKey:
                throw JWTError(JWTError.invalidKey, "a public key cannot sign")
            }
        } catch let error as JWTError {
            throw error
        } catch {
            throw JWTError(JWTError.invalidKey, "signing failed: \(error)")
        }
    }
}

extension JWTKey {
    /// The algorithms this key's type fits (RFC 7518 §3.1): an allow-list for a verifier whose caller
    /// named none. An HMAC secret fits the HMAC algorithms only and a public key never one (no
    /// algorithm confusion, RFC 8725 §3.1); an EC key fits its curve's ECDSA algorithm (RFC 7518
    /// §3.4). A key pinned to an `alg` fits that one only, if its type fits it (`EdDSA` and `Ed25519`
    /// count as one, RFC 9864). Never `none`. Whether `use` and `key_ops` allow verifying is checked
    /// when the key verifies.
    public var verifiableAlgorithms: Set<JWTAlgorithm> {
        let fitting: Set<JWTAlgorithm>
        switch family {
        case .hmac: fitting = [.hs256, .hs384, .hs512]
        case .rsa: fitting = [.rs256, .rs384, .rs512, .ps256, .ps384, .ps512]
        case .okp: fitting = [.eddsa, .ed25519]
        case .ec:
            guard case .ec(let curve) = publicKey?.type else { return [] }
            fitting = Set(JWTAlgorithm.allCases.filter { $0.curve == curve })
        }
        guard let pinnedAlgorithm else { return fitting }
        let edPair: Set<String> = ["EdDSA", "Ed25519"]
        return fitting.filter {
            $0.rawValue.utf8.elementsEqual(pinnedAlgorithm.utf8)
                || (edPair.contains(pinnedAlgorithm) && edPair.contains($0.rawValue))
        }
    }
}
