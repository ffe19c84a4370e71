#if MooseSwiftCrypto
internal import Crypto
internal import CryptoExtras
#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

/// An asymmetric public key on swift-crypto: what `PublicKey` holds with the trait MooseSwiftCrypto alone,
/// and what tests use to verify, on swift-crypto, what libcrypto signed (and the reverse).
///
/// Imports and exports the same encodings as the libcrypto backend: PEM and DER SubjectPublicKeyInfo,
/// PKCS#1 RSA, a PEM certificate's subject key, a private key's public part, and JWK components.
package struct SwiftCryptoPublicKey: Sendable {
    enum Storage: Sendable {
        case rsa(_RSA.Signing.PublicKey)
        case p256(P256.Signing.PublicKey)
        case p384(P384.Signing.PublicKey)
        case p521(P521.Signing.PublicKey)
        case ed25519(Curve25519.Signing.PublicKey)
    }

    let storage: Storage

    init(_ storage: Storage) { self.storage = storage }

    /// The key's family and size.
    package var type: AsymmetricKeyType {
        switch storage {
        case .rsa(let key): .rsa(bits: key.keySizeInBits)
        case .p256: .ec(.p256)
        case .p384: .ec(.p384)
        case .p521: .ec(.p521)
        case .ed25519: .ed25519
        }
    }

    /// A PEM public key, certificate (its subject key) or private key (its public part).
    package init(pem: String) throws(CryptographyError) {
        guard let document = PEMBlock(pem) else {
            throw CryptographyError(CryptographyError.invalidKey, "not a readable PEM key")
        }
        switch document.label {
        case "CERTIFICATE":
            guard let spki = DERWalk.subjectPublicKeyInfo(ofCertificate: document.der) else {
                throw CryptographyError(CryptographyError.invalidKey, "not a readable PEM certificate")
            }
            try self.init(der: spki)
        case "PUBLIC KEY", "RSA PUBLIC KEY":
            try self.init(der: document.der)
        case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
            self = try SwiftCryptoPrivateKey(der: document.der).publicKey
        default:
            throw CryptographyError(CryptographyError.invalidKey, "not a readable PEM key (\(document.label))")
        }
    }

    /// A DER SubjectPublicKeyInfo (or PKCS#1 `RSAPublicKey`).
    package init(der: [UInt8]) throws(CryptographyError) {
        if der.count == ed25519SPKIPrefix.count + 32, der.starts(with: ed25519SPKIPrefix) {
            try self.init(ed25519: Array(der.dropFirst(ed25519SPKIPrefix.count)))
        } else if let key = try? _RSA.Signing.PublicKey(unsafeDERRepresentation: der) {
            self.init(.rsa(key))
        } else if let key = try? P256.Signing.PublicKey(derRepresentation: der) {
            self.init(.p256(key))
        } else if let key = try? P384.Signing.PublicKey(derRepresentation: der) {
            self.init(.p384(key))
        } else if let key = try? P521.Signing.PublicKey(derRepresentation: der) {
            self.init(.p521(key))
        } else {
            throw CryptographyError(
                CryptographyError.invalidKey, "not a readable DER key (only RSA, EC P-256/384/521 and Ed25519)")
        }
    }

    /// An RSA public key from its big-endian modulus and exponent (JWK `n`, `e`).
    package init(rsaModulus modulus: [UInt8], exponent: [UInt8]) throws(CryptographyError) {
        guard !modulus.isEmpty, !exponent.isEmpty else {
            throw CryptographyError(CryptographyError.invalidKey, "RSA modulus and exponent must not be empty")
        }
        // Through PKCS#1 DER, whose reader takes the 1024-bit keys the libcrypto backend also takes.
        let der = DERWalk.sequence(DERWalk.unsignedInteger(modulus) + DERWalk.unsignedInteger(exponent))
        guard let key = try? _RSA.Signing.PublicKey(unsafeDERRepresentation: der) else {
            throw CryptographyError(CryptographyError.invalidKey, "invalid RSA key parameters")
        }
        storage = .rsa(key)
    }

    /// An EC public key from its affine coordinates; the point is checked to be on the curve.
    package init(curve: EllipticCurve, x: [UInt8], y: [UInt8]) throws(CryptographyError) {
        let size = curve.coordinateByteCount
        guard x.count == size, y.count == size else {
            throw CryptographyError(
                CryptographyError.invalidKey,
                "\(curve.rawValue) coordinates must be \(size) bytes each, got \(x.count) and \(y.count)")
        }
        let raw = x + y
        do {
            switch curve {
            case .p256: storage = .p256(try P256.Signing.PublicKey(rawRepresentation: raw))
            case .p384: storage = .p384(try P384.Signing.PublicKey(rawRepresentation: raw))
            case .p521: storage = .p521(try P521.Signing.PublicKey(rawRepresentation: raw))
            }
        } catch {
            throw CryptographyError(
                CryptographyError.invalidKey, "public key fails validation (point not on the curve?)")
        }
    }

    /// An Ed25519 public key from its 32 raw bytes (JWK `x`, RFC 8037).
    package init(ed25519 raw: [UInt8]) throws(CryptographyError) {
        guard raw.count == 32, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw) else {
            throw CryptographyError(CryptographyError.invalidKey, "an Ed25519 key is 32 bytes, got \(raw.count)")
        }
        storage = .ed25519(key)
    }

    /// DER SubjectPublicKeyInfo.
    package func derRepresentation() -> [UInt8] {
        switch storage {
        case .rsa(let key): Array(key.derRepresentation)
        case .p256(let key): Array(key.derRepresentation)
        case .p384(let key): Array(key.derRepresentation)
        case .p521(let key): Array(key.derRepresentation)
        case .ed25519(let key): ed25519SPKIPrefix + Array(key.rawRepresentation)
        }
    }

    /// PEM SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`).
    package func pemRepresentation() -> String { PEMBlock.encode(derRepresentation(), label: "PUBLIC KEY") }

    /// RSA modulus and exponent, big-endian without leading zeros; `nil` for other key types.
    package var rsaComponents: (modulus: [UInt8], exponent: [UInt8])? {
        guard case .rsa(let key) = storage, let primitives = try? key.getKeyPrimitives() else { return nil }
        return (Array(primitives.modulus.drop { $0 == 0 }), Array(primitives.publicExponent.drop { $0 == 0 }))
    }

    /// EC affine coordinates, each padded to the curve's size; `nil` for other key types.
    package var ecCoordinates: (x: [UInt8], y: [UInt8])? {
        let raw: [UInt8]
        switch storage {
        case .p256(let key): raw = Array(key.rawRepresentation)
        case .p384(let key): raw = Array(key.rawRepresentation)
        case .p521(let key): raw = Array(key.rawRepresentation)
        case .rsa, .ed25519: return nil
        }
        let half = raw.count / 2
        return (Array(raw[..<half]), Array(raw[half...]))
    }

    /// The 32 raw bytes of an Ed25519 key; `nil` for other key types.
    package var ed25519Raw: [UInt8]? {
        guard case .ed25519(let key) = storage else { return nil }
        return Array(key.rawRepresentation)
    }

    /// `true` when `signature` is a valid signature of `message`; a malformed signature is simply
    /// invalid. Throws `algorithmMismatch` when the algorithm does not fit the key. ECDSA signatures
    /// are raw `r‖s` (RFC 7518 §3.4), each exactly the curve's coordinate size, neither zero.
    package func isValidSignature(
        _ signature: UnsafeRawBufferPointer, for message: UnsafeRawBufferPointer, algorithm: SignatureAlgorithm
    ) throws(CryptographyError) -> Bool {
        try algorithm.check(type)
        switch (storage, algorithm) {
        case (.rsa(let key), .rsaPKCS1v15(let hash)):
            return verifyRSA(key, signature, message, hash, padding: .insecurePKCS1v1_5)
        case (.rsa(let key), .rsaPSS(let hash)):
            return verifyRSA(key, signature, message, hash, padding: .PSS)
        case (.ed25519(let key), .ed25519):
            return key.isValidSignature(signature, for: message)
        case (_, .ecdsa(let hash)):
            guard case .ec(let curve) = type, ECDSASignature.der(fromRaw: signature, curve: curve) != nil else {
                return false
            }
            switch storage {
            case .p256(let key):
                guard let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
                return withDigest(hash, message) { key.isValidSignature(parsed, for: $0) }
            case .p384(let key):
                guard let parsed = try? P384.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
                return withDigest(hash, message) { key.isValidSignature(parsed, for: $0) }
            case .p521(let key):
                guard let parsed = try? P521.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
                return withDigest(hash, message) { key.isValidSignature(parsed, for: $0) }
            case .rsa, .ed25519:
                return false
            }
        default:
            return false
        }
    }

    private func verifyRSA(
        _ key: _RSA.Signing.PublicKey, _ signature: UnsafeRawBufferPointer, _ message: UnsafeRawBufferPointer,
        _ hash: DigestAlgorithm, padding: _RSA.Signing.Padding
    ) -> Bool {
        let parsed = _RSA.Signing.RSASignature(rawRepresentation: signature)
        return withDigest(hash, message) { key.isValidSignature(parsed, for: $0, padding: padding) }
    }
}

/// An asymmetric private key on swift-crypto: what `PrivateKey` holds with the trait MooseSwiftCrypto
/// alone, and what tests use to sign on swift-crypto for libcrypto to verify.
package struct SwiftCryptoPrivateKey: Sendable {
    enum Storage: Sendable {
        case rsa(_RSA.Signing.PrivateKey)
        case p256(P256.Signing.PrivateKey)
        case p384(P384.Signing.PrivateKey)
        case p521(P521.Signing.PrivateKey)
        case ed25519(Curve25519.Signing.PrivateKey)
    }

    let storage: Storage

    init(_ storage: Storage) { self.storage = storage }

    /// The key's family and size.
    package var type: AsymmetricKeyType { publicKey.type }

    /// The matching public key.
    package var publicKey: SwiftCryptoPublicKey {
        switch storage {
        case .rsa(let key): SwiftCryptoPublicKey(.rsa(key.publicKey))
        case .p256(let key): SwiftCryptoPublicKey(.p256(key.publicKey))
        case .p384(let key): SwiftCryptoPublicKey(.p384(key.publicKey))
        case .p521(let key): SwiftCryptoPublicKey(.p521(key.publicKey))
        case .ed25519(let key): SwiftCryptoPublicKey(.ed25519(key.publicKey))
        }
    }

    /// A PEM private key (PKCS#8, PKCS#1 `RSA PRIVATE KEY`, SEC1 `EC PRIVATE KEY`), unencrypted.
    package init(pem: String) throws(CryptographyError) {
        guard let document = PEMBlock(pem), document.label.hasSuffix("PRIVATE KEY") else {
            throw CryptographyError(CryptographyError.invalidKey, "not a readable PEM key")
        }
        try self.init(der: document.der)
    }

    /// A DER private key (PKCS#8, PKCS#1 or SEC1).
    package init(der: [UInt8]) throws(CryptographyError) {
        if der.count == ed25519PKCS8Prefix.count + 32, der.starts(with: ed25519PKCS8Prefix) {
            try self.init(ed25519Seed: Array(der.dropFirst(ed25519PKCS8Prefix.count)))
        } else if let key = try? _RSA.Signing.PrivateKey(unsafeDERRepresentation: der) {
            self.init(.rsa(key))
        } else if let key = try? P256.Signing.PrivateKey(derRepresentation: der) {
            self.init(.p256(key))
        } else if let key = try? P384.Signing.PrivateKey(derRepresentation: der) {
            self.init(.p384(key))
        } else if let key = try? P521.Signing.PrivateKey(derRepresentation: der) {
            self.init(.p521(key))
        } else {
            throw CryptographyError(
                CryptographyError.invalidKey, "not a readable DER key (only RSA, EC P-256/384/521 and Ed25519)")
        }
    }

    /// An RSA private key from JWK components (RFC 7518 §6.3). swift-crypto recomputes the CRT values
    /// from the primes, so `crt` is only checked for presence, as the libcrypto backend does.
    package init(
        rsaModulus n: [UInt8], publicExponent e: [UInt8], privateExponent d: [UInt8], primes: (p: [UInt8], q: [UInt8])?
    ) throws(CryptographyError) {
        do {
            if let primes {
                // Through PKCS#1 DER (with the CRT values computed by BoringSSL's check) would need
                // bignum arithmetic here; swift-crypto's component initialiser does it.
                storage = .rsa(try _RSA.Signing.PrivateKey(n: n, e: e, d: d, p: primes.p, q: primes.q))
            } else {
                storage = .rsa(try _RSA.Signing.PrivateKey._createFromNumbers(n: n, e: e, d: d))
            }
        } catch {
            throw CryptographyError(CryptographyError.invalidKey, "invalid RSA key parameters")
        }
    }

    /// An EC private key from its scalar `d` and public point, which must match `d`.
    package init(curve: EllipticCurve, d: [UInt8], x: [UInt8], y: [UInt8]) throws(CryptographyError) {
        let size = curve.coordinateByteCount
        guard d.count == size, x.count == size, y.count == size else {
            throw CryptographyError(
                CryptographyError.invalidKey, "\(curve.rawValue) key components must be \(size) bytes each")
        }
        do {
            switch curve {
            case .p256: storage = .p256(try P256.Signing.PrivateKey(rawRepresentation: d))
            case .p384: storage = .p384(try P384.Signing.PrivateKey(rawRepresentation: d))
            case .p521: storage = .p521(try P521.Signing.PrivateKey(rawRepresentation: d))
            }
        } catch {
            throw CryptographyError(CryptographyError.invalidKey, "invalid EC key parameters")
        }
        guard let point = publicKey.ecCoordinates, point.x == x, point.y == y else {
            throw CryptographyError(CryptographyError.invalidKey, "public key fails validation (it does not match d)")
        }
    }

    /// An Ed25519 private key from its 32-byte seed (JWK `d`, RFC 8037).
    package init(ed25519Seed seed: [UInt8]) throws(CryptographyError) {
        guard seed.count == 32, let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: seed) else {
            throw CryptographyError(CryptographyError.invalidKey, "an Ed25519 key is 32 bytes, got \(seed.count)")
        }
        storage = .ed25519(key)
    }

    /// A new random key (RSA 2048–16384 bits, a NIST curve, or Ed25519).
    package static func generate(_ spec: PrivateKey.GenerationSpec) throws(CryptographyError) -> SwiftCryptoPrivateKey {
        switch spec {
        case .rsa(let bits):
            guard bits >= 2048, bits <= 16384 else {
                throw CryptographyError(
                    CryptographyError.invalidParameter, "RSA keys must be 2048–16384 bits, asked for \(bits)")
            }
            do {
                return SwiftCryptoPrivateKey(.rsa(try _RSA.Signing.PrivateKey(keySize: .init(bitCount: bits))))
            } catch {
                throw CryptographyError(CryptographyError.libraryFailure, "key generation failed")
            }
        case .ec(.p256): return SwiftCryptoPrivateKey(.p256(P256.Signing.PrivateKey()))
        case .ec(.p384): return SwiftCryptoPrivateKey(.p384(P384.Signing.PrivateKey()))
        case .ec(.p521): return SwiftCryptoPrivateKey(.p521(P521.Signing.PrivateKey()))
        case .ed25519: return SwiftCryptoPrivateKey(.ed25519(Curve25519.Signing.PrivateKey()))
        }
    }

    /// Unencrypted PKCS#8 DER.
    package func pkcs8DERRepresentation() -> [UInt8] {
        switch storage {
        case .rsa(let key): Array(key.pkcs8DERRepresentation)
        case .p256(let key): Array(key.derRepresentation)
        case .p384(let key): Array(key.derRepresentation)
        case .p521(let key): Array(key.derRepresentation)
        case .ed25519(let key): ed25519PKCS8Prefix + Array(key.rawRepresentation)
        }
    }

    /// Unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    package func pemRepresentation() -> String { PEMBlock.encode(pkcs8DERRepresentation(), label: "PRIVATE KEY") }

    /// The private components for JWK export: RSA `d`, `p`, `q`, `dp`, `dq`, `qi`; EC `d`; Ed25519 seed.
    package var privateComponents: [String: [UInt8]] {
        switch storage {
        case .rsa(let key):
            // PKCS#1 RSAPrivateKey: version, n, e, d, p, q, dp, dq, qi.
            guard let integers = DERWalk.integers(inSequence: Array(key.derRepresentation)), integers.count >= 9 else {
                return [:]
            }
            let names = ["d", "p", "q", "dp", "dq", "qi"]
            var result: [String: [UInt8]] = [:]
            for (offset, name) in names.enumerated() { result[name] = integers[3 + offset] }
            return result
        case .p256(let key): return ["d": Array(key.rawRepresentation)]
        case .p384(let key): return ["d": Array(key.rawRepresentation)]
        case .p521(let key): return ["d": Array(key.rawRepresentation)]
        case .ed25519(let key): return ["d": Array(key.rawRepresentation)]
        }
    }

    /// Signs `message`; ECDSA signatures come back as raw `r‖s` (JOSE form).
    package func signature(for message: UnsafeRawBufferPointer, algorithm: SignatureAlgorithm) throws(CryptographyError)
        -> [UInt8]
    {
        try algorithm.check(type)
        do {
            switch (storage, algorithm) {
            case (.rsa(let key), .rsaPKCS1v15(let hash)):
                return try withDigest(hash, message) {
                    Array(try key.signature(for: $0, padding: .insecurePKCS1v1_5).rawRepresentation)
                }
            case (.rsa(let key), .rsaPSS(let hash)):
                return try withDigest(hash, message) {
                    Array(try key.signature(for: $0, padding: .PSS).rawRepresentation)
                }
            case (.p256(let key), .ecdsa(let hash)):
                return try withDigest(hash, message) { Array(try key.signature(for: $0).rawRepresentation) }
            case (.p384(let key), .ecdsa(let hash)):
                return try withDigest(hash, message) { Array(try key.signature(for: $0).rawRepresentation) }
            case (.p521(let key), .ecdsa(let hash)):
                return try withDigest(hash, message) { Array(try key.signature(for: $0).rawRepresentation) }
            case (.ed25519(let key), .ed25519):
                return Array(try key.signature(for: message))
            default:
                throw CryptographyError(
                    CryptographyError.algorithmMismatch, "\(algorithm) cannot be used with an \(type) key")
            }
        } catch let error as CryptographyError {
            throw error
        } catch {
            throw CryptographyError(CryptographyError.libraryFailure, "signing failed")
        }
    }
}

/// Calls `body` with the `hash` digest of `message`, as the digest type swift-crypto's signers take.
private func withDigest<R>(_ hash: DigestAlgorithm, _ message: UnsafeRawBufferPointer, _ body: (any Digest) throws -> R)
    rethrows -> R
{
    switch hash {
    case .sha256: try body(SHA256.hash(data: message))
    case .sha384: try body(SHA384.hash(data: message))
    case .sha512: try body(SHA512.hash(data: message))
    }
}

/// SubjectPublicKeyInfo for Ed25519 (RFC 8410 §4), before the 32 key bytes.
private let ed25519SPKIPrefix: [UInt8] = [0x30, 0x2A, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x03, 0x21, 0x00]
/// PKCS#8 OneAsymmetricKey for Ed25519 (RFC 8410 §7), before the 32 seed bytes.
private let ed25519PKCS8Prefix: [UInt8] = [
    0x30, 0x2E, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70,
    0x04, 0x22, 0x04, 0x20
]

/// One PEM block (RFC 7468): its label and DER bytes.
struct PEMBlock {
    let label: String
    let der: [UInt8]

    /// The first `-----BEGIN label-----` … `-----END label-----` block of `text`; `nil` if there is none
    /// or its body is not base64.
    init?(_ text: String) {
        let lines = text.split(whereSeparator: \.isNewline).map { line in
            String(line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        }
        guard let begin = lines.firstIndex(where: { $0.hasPrefix("-----BEGIN ") && $0.hasSuffix("-----") }) else {
            return nil
        }
        let label = String(lines[begin].dropFirst("-----BEGIN ".count).dropLast("-----".count))
        guard let end = lines[begin...].firstIndex(of: "-----END \(label)-----") else { return nil }
        let body = lines[(begin + 1)..<end].filter { !$0.contains(":") }.joined()
        guard let data = Data(base64Encoded: body) else { return nil }
        self.label = label
        der = Array(data)
    }

    /// `der` as PEM with 64-character lines.
    static func encode(_ der: [UInt8], label: String) -> String {
        let base64 = Data(der).base64EncodedString()
        var lines: [Substring] = []
        var start = base64.startIndex
        while start < base64.endIndex {
            let end = base64.index(start, offsetBy: 64, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(base64[start..<end])
            start = end
        }
        return "-----BEGIN \(label)-----\n" + lines.joined(separator: "\n") + "\n-----END \(label)-----\n"
    }
}

/// The few DER shapes the swift-crypto backend reads and writes itself (swift-crypto has no X.509 parser
/// and no accessor for RSA private components).
enum DERWalk {
    /// One TLV at `position`: its tag, the range of its content, and where the next TLV starts.
    static func element(_ bytes: [UInt8], at position: Int) -> (tag: UInt8, content: Range<Int>, next: Int)? {
        guard position + 2 <= bytes.count else { return nil }
        let tag = bytes[position]
        var index = position + 1
        let first = bytes[index]
        index += 1
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let octets = Int(first & 0x7F)
            guard octets >= 1, octets <= 4, index + octets <= bytes.count else { return nil }
            for _ in 0..<octets {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
        }
        guard length <= bytes.count - index else { return nil }
        return (tag, index..<(index + length), index + length)
    }

    /// Certificate → tbsCertificate → subjectPublicKeyInfo (RFC 5280 §4.1), as DER.
    static func subjectPublicKeyInfo(ofCertificate der: [UInt8]) -> [UInt8]? {
        guard let certificate = element(der, at: 0), certificate.tag == 0x30,
            let tbs = element(der, at: certificate.content.lowerBound), tbs.tag == 0x30
        else { return nil }
        var position = tbs.content.lowerBound
        // [0] version (optional), serialNumber, signature, issuer, validity, subject: skip; then the key.
        if let version = element(der, at: position), version.tag == 0xA0 { position = version.next }
        for _ in 0..<5 {
            guard let skipped = element(der, at: position) else { return nil }
            position = skipped.next
        }
        guard let spki = element(der, at: position), spki.tag == 0x30, spki.next <= tbs.content.upperBound else {
            return nil
        }
        return Array(der[position..<spki.next])
    }

    /// The INTEGERs directly inside the outer SEQUENCE, big-endian without sign octets.
    static func integers(inSequence der: [UInt8]) -> [[UInt8]]? {
        guard let sequence = element(der, at: 0), sequence.tag == 0x30 else { return nil }
        var result: [[UInt8]] = []
        var position = sequence.content.lowerBound
        while position < sequence.content.upperBound {
            guard let integer = element(der, at: position), integer.tag == 0x02 else { return nil }
            result.append(Array(der[integer.content].drop { $0 == 0 }))
            position = integer.next
        }
        return result
    }

    /// A DER INTEGER for an unsigned big-endian value.
    static func unsignedInteger(_ value: [UInt8]) -> [UInt8] {
        var magnitude = Array(value.drop { $0 == 0 })
        if magnitude.isEmpty || magnitude[0] & 0x80 != 0 { magnitude.insert(0, at: 0) }
        return [0x02] + length(magnitude.count) + magnitude
    }

    /// A DER SEQUENCE around `content`.
    static func sequence(_ content: [UInt8]) -> [UInt8] { [0x30] + length(content.count) + content }

    private static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 {
            bytes.insert(UInt8(rest & 0xFF), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }
}
#endif
