#if !MooseLibCrypto && !MooseSwiftCrypto
#error("MooseCrypto needs a backend: the trait MooseLibCrypto (a default trait) or MooseSwiftCrypto")
#endif

// The public API of MooseCrypto on swift-crypto, when the trait MooseSwiftCrypto is on and MooseLibCrypto
// is off: the same declarations as the libcrypto files (AESGCM.swift, HMAC.swift, KDF.swift, Keys.swift,
// Primitives.swift, Signatures.swift), each forwarding to `SwiftCryptoBackend`, `SwiftCryptoPublicKey`
// or `SwiftCryptoPrivateKey`. Backend-neutral declarations (errors, curves, `SealedBox`, `ECDSASignature`)
// are shared and not repeated here.
#if MooseSwiftCrypto && !MooseLibCrypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

@inline(__always)
func constantTimeEquals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    precondition(a.count == b.count)
    return SwiftCryptoBackend.constantTimeEquals(a, b)
}

/// Zeroes `buffer` in a way the optimiser may not drop (`explicit_bzero`, `memset_s`).
@inline(__always)
func cleanse(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let address = buffer.baseAddress, buffer.count > 0 else { return }
    #if canImport(Glibc)
    explicit_bzero(address, buffer.count)
    #elseif canImport(Darwin)
    _ = memset_s(address, buffer.count, 0, buffer.count)
    #else
    buffer.initializeMemory(as: UInt8.self, repeating: 0)
    #endif
}

/// Cryptographically secure random bytes from the system's CSPRNG (`getrandom` on Linux).
public enum SecureRandom {
    /// `count` random bytes.
    ///
    /// ```swift
    /// let nonce = try SecureRandom.bytes(count: 12)
    /// ```
    public static func bytes(count: Int) throws(CryptographyError) -> [UInt8] {
        guard count >= 0 else { throw CryptographyError(CryptographyError.invalidParameter, "negative byte count") }
        var result = [UInt8](repeating: 0, count: count)
        result.withUnsafeMutableBytes { SwiftCryptoBackend.fillRandom($0) }
        return result
    }

    /// Fills `buffer` with random bytes.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(CryptographyError) {
        SwiftCryptoBackend.fillRandom(buffer)
    }
}

extension DigestAlgorithm {
    /// The digest of `data`.
    ///
    /// ```swift
    /// let challenge = DigestAlgorithm.sha256.hash(Array(verifier.utf8))   // PKCE S256
    /// ```
    public func hash(_ data: some ContiguousBytes) -> [UInt8] {
        withBytes(data) { buffer in hash(buffer) }
    }

    /// The digest of the bytes in `buffer`.
    public func hash(_ buffer: UnsafeRawBufferPointer) -> [UInt8] {
        SwiftCryptoBackend.hash(buffer, self)
    }
}

/// HMAC (RFC 2104) with SHA-256/384/512 on swift-crypto.
///
/// ```swift
/// let mac = try HMACAuthenticator(key: SecretKey(secret), hash: .sha256)
/// let tag = try mac.authenticationCode(for: Array("message".utf8))
/// let ok = mac.isValidAuthenticationCode(tag, for: Array("message".utf8))
/// ```
public struct HMACAuthenticator: Sendable {
    private let keyed: SwiftCryptoBackend.KeyedHMAC
    /// The hash function this MAC uses.
    public let hash: DigestAlgorithm

    /// Keys an HMAC once (each code copies the keyed state). Any key length is accepted here; JOSE's
    /// minimum lengths are enforced by `MooseJWT`.
    public init(key: SecretKey, hash: DigestAlgorithm) throws(CryptographyError) {
        keyed = key.withUnsafeBytes { SwiftCryptoBackend.KeyedHMAC(key: $0, hash: hash) }
        self.hash = hash
    }

    /// The MAC of `message`.
    public func authenticationCode(for message: some ContiguousBytes) throws(CryptographyError) -> [UInt8] {
        try withBytes(message) { (buffer) throws(CryptographyError) in try authenticationCode(for: buffer) }
    }

    /// The MAC of the bytes in `message`.
    public func authenticationCode(for message: UnsafeRawBufferPointer) throws(CryptographyError) -> [UInt8] {
        keyed.authenticationCode(for: message)
    }

    /// `true` when `code` is the MAC of `message`; compared in constant time. A truncated code is rejected.
    public func isValidAuthenticationCode(_ code: some ContiguousBytes, for message: some ContiguousBytes) -> Bool {
        withBytes(message) { message in
            withBytes(code) { code in isValidAuthenticationCode(code, for: message) }
        }
    }

    /// `true` when `code` is the MAC of `message`; compared in constant time. A truncated code is rejected.
    public func isValidAuthenticationCode(_ code: UnsafeRawBufferPointer, for message: UnsafeRawBufferPointer) -> Bool {
        guard code.count == hash.outputByteCount, let expected = try? authenticationCode(for: message) else {
            return false
        }
        return expected.withUnsafeBytes { constantTimeEquals($0, code) }
    }
}

/// HKDF (RFC 5869): extract-then-expand key derivation.
public enum HKDFDerivation {
    /// Derives `outputByteCount` bytes from input keying material.
    ///
    /// ```swift
    /// let key = try HKDFDerivation.deriveKey(inputKeyMaterial: secret, salt: salt, info: Array("moose store".utf8),
    ///                              outputByteCount: 32, hash: .sha256)
    /// ```
    public static func deriveKey(
        inputKeyMaterial ikm: some ContiguousBytes,
        salt: some ContiguousBytes = [UInt8](),
        info: some ContiguousBytes = [UInt8](),
        outputByteCount: Int,
        hash: DigestAlgorithm = .sha256
    ) throws(CryptographyError) -> SecretKey {
        var output = try withBytes(ikm) { (ikm) throws(CryptographyError) in
            try withBytes(salt) { (salt) throws(CryptographyError) in
                try withBytes(info) { (info) throws(CryptographyError) in
                    try SwiftCryptoBackend.hkdf(
                        inputKeyMaterial: ikm, salt: salt, info: info,
                        outputByteCount: outputByteCount, hash: hash)
                }
            }
        }
        defer { output.withUnsafeMutableBytes { cleanse($0) } }
        return SecretKey(output)
    }
}

extension Scrypt {
    /// Derives `outputByteCount` bytes from `password` and `salt`.
    public static func deriveKey(
        password: some ContiguousBytes,
        salt: some ContiguousBytes,
        parameters: Parameters,
        outputByteCount: Int = 32
    ) throws(CryptographyError) -> SecretKey {
        var output = try withBytes(password) { (password) throws(CryptographyError) in
            try withBytes(salt) { (salt) throws(CryptographyError) in
                try SwiftCryptoBackend.scrypt(
                    password: password, salt: salt, parameters: parameters, outputByteCount: outputByteCount)
            }
        }
        defer { output.withUnsafeMutableBytes { cleanse($0) } }
        return SecretKey(output)
    }
}

extension AESGCM {
    /// Encrypts and authenticates `plaintext` and authenticates `aad`.
    ///
    /// - Parameter nonce: leave `nil` for a fresh random 96-bit nonce (the right choice unless a
    ///   test vector fixes it). Never reuse a nonce with the same key. swift-crypto takes 12…128 bytes.
    public static func seal(
        _ plaintext: some ContiguousBytes,
        using key: SecretKey,
        nonce: [UInt8]? = nil,
        authenticating aad: some ContiguousBytes = [UInt8]()
    ) throws(CryptographyError) -> SealedBox {
        let iv: [UInt8]
        if let nonce { iv = nonce } else { iv = try SecureRandom.bytes(count: nonceByteCount) }
        let sealed = try withBytes(plaintext) { (input) throws(CryptographyError) in
            try withBytes(aad) { (aadBytes) throws(CryptographyError) in
                try key.withUnsafeBytes { (keyBytes) throws(CryptographyError) in
                    try typed {
                        try iv.withUnsafeBytes { n in
                            try SwiftCryptoBackend.seal(input, key: keyBytes, nonce: n, aad: aadBytes)
                        }
                    }
                }
            }
        }
        return SealedBox(nonce: iv, ciphertext: sealed.ciphertext, tag: sealed.tag)
    }

    /// Checks the tag and decrypts. Throws `authenticationFailure` if anything was changed
    /// (ciphertext, nonce, tag, AAD) or the key is not the one that sealed it.
    public static func open(
        _ box: SealedBox,
        using key: SecretKey,
        authenticating aad: some ContiguousBytes = [UInt8]()
    ) throws(CryptographyError) -> [UInt8] {
        try withBytes(aad) { (aadBytes) throws(CryptographyError) in
            try key.withUnsafeBytes { (keyBytes) throws(CryptographyError) in
                try typed {
                    try box.nonce.withUnsafeBytes { nonce in
                        try box.ciphertext.withUnsafeBytes { ciphertext in
                            try box.tag.withUnsafeBytes { tag in
                                try SwiftCryptoBackend.open(
                                    ciphertext: ciphertext, tag: tag, key: keyBytes, nonce: nonce, aad: aadBytes)
                            }
                        }
                    }
                }
            }
        }
    }

    /// Seals into one buffer, `nonce(12) ‖ ciphertext ‖ tag(16)`, with a fresh random nonce: the
    /// storage format of `MooseSecretStore`. For many messages under one key, keep an `AESGCM.Context`.
    public static func sealCombined(
        _ plaintext: some ContiguousBytes, using key: SecretKey, authenticating aad: some ContiguousBytes
    ) throws(CryptographyError) -> [UInt8] {
        try Context(key: key).sealCombined(plaintext, authenticating: aad)
    }

    /// Opens `nonce(12) ‖ ciphertext ‖ tag(16)`. For many messages under one key, keep an `AESGCM.Context`.
    public static func openCombined(
        _ combined: some ContiguousBytes, using key: SecretKey, authenticating aad: some ContiguousBytes
    ) throws(CryptographyError) -> [UInt8] {
        try Context(key: key).openCombined(combined, authenticating: aad)
    }

    /// An AES-GCM key checked once and reused for many messages. **Not thread-safe**: one user at a
    /// time (the secret store uses it under its lock).
    ///
    /// ```swift
    /// let context = try AESGCM.Context(key: key)
    /// let sealed = try context.sealCombined(plaintext, authenticating: aad)
    /// let opened = try context.openCombined(sealed, authenticating: aad)
    /// ```
    public final class Context {
        private let key: SecretKey

        /// Keys the context (16, 24 or 32-byte key).
        public init(key: SecretKey) throws(CryptographyError) {
            guard [16, 24, 32].contains(key.byteCount) else {
                throw CryptographyError(
                    CryptographyError.invalidKey, "AES key must be 16, 24 or 32 bytes, got \(key.byteCount)")
            }
            self.key = key
        }

        /// `nonce(12) ‖ ciphertext ‖ tag(16)` with a fresh random nonce.
        public func sealCombined(_ plaintext: some ContiguousBytes, authenticating aad: some ContiguousBytes)
            throws(CryptographyError) -> [UInt8]
        {
            try withBytes(plaintext) { (input) throws(CryptographyError) -> [UInt8] in
                try withBytes(aad) { (aadBytes) throws(CryptographyError) -> [UInt8] in try seal(input, aadBytes) }
            }
        }

        /// `sealCombined` for arrays: no generic dispatch across the module boundary (the store's hot path).
        public func sealCombined(_ plaintext: [UInt8], authenticating aad: [UInt8]) throws(CryptographyError) -> [UInt8]
        {
            try typed {
                try plaintext.withUnsafeBytes { input in
                    try aad.withUnsafeBytes { aadBytes in try seal(input, aadBytes) }
                }
            }
        }

        /// `openCombined` over a buffer (for example SQLite's column memory), without copying it first.
        public func openCombined(buffer sealed: UnsafeRawBufferPointer, authenticating aad: [UInt8])
            throws(CryptographyError) -> [UInt8]
        {
            try typed { try aad.withUnsafeBytes { aadBytes in try open(sealed, aadBytes) } }
        }

        /// `openCombined` for arrays: no generic dispatch across the module boundary (the store's hot path).
        public func openCombined(_ combined: [UInt8], authenticating aad: [UInt8]) throws(CryptographyError) -> [UInt8]
        {
            try typed {
                try combined.withUnsafeBytes { sealed in
                    try aad.withUnsafeBytes { aadBytes in try open(sealed, aadBytes) }
                }
            }
        }

        /// Opens `nonce(12) ‖ ciphertext ‖ tag(16)`; throws `authenticationFailure` if anything changed.
        public func openCombined(_ combined: some ContiguousBytes, authenticating aad: some ContiguousBytes)
            throws(CryptographyError) -> [UInt8]
        {
            try withBytes(combined) { (sealed) throws(CryptographyError) -> [UInt8] in
                try withBytes(aad) { (aadBytes) throws(CryptographyError) -> [UInt8] in try open(sealed, aadBytes) }
            }
        }

        private func seal(_ input: UnsafeRawBufferPointer, _ aad: UnsafeRawBufferPointer) throws(CryptographyError)
            -> [UInt8]
        {
            try key.withUnsafeBytes { (keyBytes) throws(CryptographyError) in
                try SwiftCryptoBackend.sealCombined(input, key: keyBytes, aad: aad)
            }
        }

        private func open(_ sealed: UnsafeRawBufferPointer, _ aad: UnsafeRawBufferPointer) throws(CryptographyError)
            -> [UInt8]
        {
            try key.withUnsafeBytes { (keyBytes) throws(CryptographyError) in
                try SwiftCryptoBackend.openCombined(sealed, key: keyBytes, aad: aad)
            }
        }
    }
}

/// An asymmetric public key (RSA, EC P-256/384/521 or Ed25519) for verifying signatures, on swift-crypto.
///
/// ```swift
/// let key = try PublicKey(pem: pemString)
/// let ok = try key.isValidSignature(signature, for: message, algorithm: .rsaPKCS1v15(.sha256))
/// ```
public struct PublicKey: Sendable {
    let key: SwiftCryptoPublicKey

    init(_ key: SwiftCryptoPublicKey) { self.key = key }

    /// The key's family and size.
    public var type: AsymmetricKeyType { key.type }

    /// Reads a PEM public key (SubjectPublicKeyInfo or PKCS#1 `RSA PUBLIC KEY`), a PEM certificate
    /// (its subject key), or a PEM private key (its public part).
    public init(pem: String) throws(CryptographyError) { key = try SwiftCryptoPublicKey(pem: pem) }

    /// Reads a DER SubjectPublicKeyInfo.
    public init(der: some ContiguousBytes) throws(CryptographyError) {
        key = try SwiftCryptoPublicKey(der: withBytes(der) { Array($0) })
    }

    /// An RSA public key from its big-endian modulus and exponent (JWK `n`, `e`).
    public init(rsaModulus modulus: [UInt8], exponent: [UInt8]) throws(CryptographyError) {
        key = try SwiftCryptoPublicKey(rsaModulus: modulus, exponent: exponent)
    }

    /// An EC public key from its affine coordinates (JWK `x`, `y`), each exactly the curve's size.
    /// The point is checked to be on the curve.
    public init(curve: EllipticCurve, x: [UInt8], y: [UInt8]) throws(CryptographyError) {
        key = try SwiftCryptoPublicKey(curve: curve, x: x, y: y)
    }

    /// An Ed25519 public key from its 32 raw bytes (JWK `x`, RFC 8037).
    public init(ed25519 raw: [UInt8]) throws(CryptographyError) { key = try SwiftCryptoPublicKey(ed25519: raw) }

    /// DER SubjectPublicKeyInfo.
    public func derRepresentation() throws(CryptographyError) -> [UInt8] { key.derRepresentation() }

    /// PEM SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`).
    public func pemRepresentation() throws(CryptographyError) -> String { key.pemRepresentation() }

    /// RSA modulus and exponent, big-endian without leading zeros; `nil` for other key types.
    public var rsaComponents: (modulus: [UInt8], exponent: [UInt8])? { key.rsaComponents }

    /// EC affine coordinates, each padded to the curve's size; `nil` for other key types.
    public var ecCoordinates: (x: [UInt8], y: [UInt8])? { key.ecCoordinates }

    /// The 32 raw bytes of an Ed25519 key; `nil` for other key types.
    public var ed25519Raw: [UInt8]? { key.ed25519Raw }

    /// `true` when `signature` is a valid signature of `message` under this key.
    ///
    /// A malformed signature (wrong length, bad encoding) is simply invalid. Throws only when the
    /// algorithm does not fit the key type (`algorithmMismatch`).
    ///
    /// For ECDSA the signature is raw `r‖s`, each exactly the curve's coordinate size.
    public func isValidSignature(
        _ signature: some ContiguousBytes, for message: some ContiguousBytes, algorithm: SignatureAlgorithm
    ) throws(CryptographyError) -> Bool {
        try withBytes(signature) { (sig) throws(CryptographyError) in
            try withBytes(message) { (msg) throws(CryptographyError) in
                try isValidSignature(sig, for: msg, algorithm: algorithm)
            }
        }
    }

    /// `isValidSignature(_:for:algorithm:)` over buffers, without copying.
    public func isValidSignature(
        _ signature: UnsafeRawBufferPointer, for message: UnsafeRawBufferPointer, algorithm: SignatureAlgorithm
    ) throws(CryptographyError) -> Bool {
        try key.isValidSignature(signature, for: message, algorithm: algorithm)
    }
}

/// An asymmetric private key (RSA, EC P-256/384/521 or Ed25519) for signing, on swift-crypto.
///
/// ```swift
/// let key = try PrivateKey.generate(.ec(.p256))
/// let signature = try key.signature(for: message, algorithm: .ecdsa(.sha256))   // raw r‖s
/// ```
public struct PrivateKey: Sendable {
    let key: SwiftCryptoPrivateKey

    init(_ key: SwiftCryptoPrivateKey) { self.key = key }

    /// The key's family and size.
    public var type: AsymmetricKeyType { key.type }

    /// Reads a PEM private key (PKCS#8, PKCS#1 `RSA PRIVATE KEY`, SEC1 `EC PRIVATE KEY`), unencrypted.
    public init(pem: String) throws(CryptographyError) { key = try SwiftCryptoPrivateKey(pem: pem) }

    /// Reads a DER private key (PKCS#8 or the type-specific formats).
    public init(der: some ContiguousBytes) throws(CryptographyError) {
        key = try SwiftCryptoPrivateKey(der: withBytes(der) { Array($0) })
    }

    /// An RSA private key from JWK components (RFC 7518 §6.3). With the primes, swift-crypto computes
    /// the CRT values itself; `crt` is accepted for the libcrypto backend's signature.
    public init(
        rsaModulus n: [UInt8], publicExponent e: [UInt8], privateExponent d: [UInt8],
        primes: (p: [UInt8], q: [UInt8])? = nil,
        crt: (dp: [UInt8], dq: [UInt8], qi: [UInt8])? = nil
    ) throws(CryptographyError) {
        key = try SwiftCryptoPrivateKey(rsaModulus: n, publicExponent: e, privateExponent: d, primes: primes)
    }

    /// An EC private key from its scalar `d` and public point (JWK `d`, `x`, `y`).
    public init(curve: EllipticCurve, d: [UInt8], x: [UInt8], y: [UInt8]) throws(CryptographyError) {
        key = try SwiftCryptoPrivateKey(curve: curve, d: d, x: x, y: y)
    }

    /// An Ed25519 private key from its 32-byte seed (JWK `d`, RFC 8037).
    public init(ed25519Seed seed: [UInt8]) throws(CryptographyError) {
        key = try SwiftCryptoPrivateKey(ed25519Seed: seed)
    }

    /// What `generate(_:)` can make.
    public enum GenerationSpec: Sendable {
        /// RSA with the given modulus size (at least 2048).
        case rsa(bits: Int)
        /// ECDSA on a NIST curve.
        case ec(EllipticCurve)
        /// Ed25519.
        case ed25519
    }

    /// A new random key.
    public static func generate(_ spec: GenerationSpec) throws(CryptographyError) -> PrivateKey {
        PrivateKey(try SwiftCryptoPrivateKey.generate(spec))
    }

    /// The matching public key.
    public func publicKey() throws(CryptographyError) -> PublicKey { PublicKey(key.publicKey) }

    /// Unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`). Handle with care: this is the secret.
    public func pemRepresentation() throws(CryptographyError) -> String { key.pemRepresentation() }

    /// The private components, for JWK export: RSA `d`, `p`, `q`, `dp`, `dq`, `qi`; EC `d`; Ed25519 seed.
    public var privateComponents: [String: [UInt8]] { key.privateComponents }

    /// Signs `message`. ECDSA signatures come back as raw `r‖s` (JOSE form).
    public func signature(for message: some ContiguousBytes, algorithm: SignatureAlgorithm) throws(CryptographyError)
        -> [UInt8]
    {
        try withBytes(message) { (msg) throws(CryptographyError) in try signature(for: msg, algorithm: algorithm) }
    }

    /// Signs the bytes in `message`.
    public func signature(for message: UnsafeRawBufferPointer, algorithm: SignatureAlgorithm) throws(CryptographyError)
        -> [UInt8]
    {
        try key.signature(for: message, algorithm: algorithm)
    }
}

/// Process-wide libcrypto settings: without libcrypto (MooseSwiftCrypto alone) there is nothing to set,
/// and these do nothing, so a program calls them the same on either backend.
package enum LibCrypto {
    /// Nothing to do: libcrypto is not linked.
    package static func skipCleanupAtExit(loadingErrorStrings: Bool = true) {}

    /// Nothing to do: swift-crypto fetches no algorithm tables.
    package static func prepareStoreAlgorithms() {}
}

/// libcrypto's default provider called directly: never available without libcrypto.
package enum DefaultProviderPath {
    /// Asks for the direct path; without libcrypto it is never taken.
    package static func prefer() {}

    /// Always `false`: MooseCrypto is built on swift-crypto.
    package static var isActive: Bool { false }

    /// Why the path cannot be taken: MooseCrypto is built on swift-crypto.
    package static var unavailableReason: String? { "MooseCrypto is built on swift-crypto (no libcrypto)" }
}
#endif
