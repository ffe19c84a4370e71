#if MooseLibCrypto
internal import CLibCrypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#endif

/// The NIST curves JOSE uses for ECDSA (RFC 7518 §3.4).
public enum EllipticCurve: String, Sendable, Hashable, CaseIterable {
    /// P-256 (secp256r1), used by ES256.
    case p256 = "P-256"
    /// P-384 (secp384r1), used by ES384.
    case p384 = "P-384"
    /// P-521 (secp521r1), used by ES512.
    case p521 = "P-521"

    /// Bytes in one coordinate (and in each of `r` and `s` of a raw signature).
    public var coordinateByteCount: Int {
        switch self {
        case .p256: 32
        case .p384: 48
        case .p521: 66
        }
    }

    /// The hash function JOSE pairs with this curve.
    public var hash: DigestAlgorithm {
        switch self {
        case .p256: .sha256
        case .p384: .sha384
        case .p521: .sha512
        }
    }

    var openSSLName: String {
        switch self {
        case .p256: "prime256v1"
        case .p384: "secp384r1"
        case .p521: "secp521r1"
        }
    }

    init?(openSSLName: String) {
        switch openSSLName {
        case "prime256v1", "P-256", "secp256r1": self = .p256
        case "secp384r1", "P-384": self = .p384
        case "secp521r1", "P-521": self = .p521
        default: return nil
        }
    }
}

/// The family of an asymmetric key.
public enum AsymmetricKeyType: Sendable, Hashable, CustomStringConvertible {
    /// RSA, with its modulus size in bits.
    case rsa(bits: Int)
    /// ECDSA on a NIST curve.
    case ec(EllipticCurve)
    /// Ed25519 (EdDSA).
    case ed25519

    /// `RSA-2048`, `EC P-256`, `Ed25519`.
    public var description: String {
        switch self {
        case .rsa(let bits): "RSA-\(bits)"
        case .ec(let curve): "EC \(curve.rawValue)"
        case .ed25519: "Ed25519"
        }
    }
}

#if MooseLibCrypto
/// Owns an `EVP_PKEY`, freed in `deinit`.
///
/// libcrypto allows concurrent signing/verification with one `EVP_PKEY` as long as it is not
/// modified; this class never modifies it after init.
// unchecked: the EVP_PKEY and its verification templates (DigestContext, not Sendable) are never modified after init
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer
    let type: AsymmetricKeyType
    /// Verification contexts already initialised for the JOSE algorithms this key serves; each
    /// verification copies one (read-only here, so safe to share between threads).
    let verifyTemplates: [SignatureAlgorithm: DigestContext]

    init(takingOwnershipOf pointer: OpaquePointer) throws(CryptographyError) {
        self.pointer = pointer
        switch EVP_PKEY_get_base_id(pointer) {
        case EVP_PKEY_RSA:
            type = .rsa(bits: Int(EVP_PKEY_get_bits(pointer)))
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            let ok = EVP_PKEY_get_utf8_string_param(pointer, "group", &name, name.count, &length)
            let groupName = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard ok == 1, let curve = EllipticCurve(openSSLName: groupName) else {
                EVP_PKEY_free(pointer)
                throw OpenSSL.error(
                    CryptographyError.invalidKey, "unsupported EC curve \(groupName.isEmpty ? "(unknown)" : groupName)")
            }
            type = .ec(curve)
        case EVP_PKEY_ED25519:
            type = .ed25519
        default:
            EVP_PKEY_free(pointer)
            throw CryptographyError(
                CryptographyError.invalidKey, "unsupported key type (only RSA, EC P-256/384/521 and Ed25519)")
        }
        let algorithms: [SignatureAlgorithm]
        switch type {
        case .rsa: algorithms = DigestAlgorithm.allCases.flatMap { [.rsaPKCS1v15($0), .rsaPSS($0)] }
        case .ec(let curve): algorithms = [.ecdsa(curve.hash)]
        case .ed25519: algorithms = [.ed25519]
        }
        var templates: [SignatureAlgorithm: DigestContext] = [:]
        for algorithm in algorithms {
            guard let context = try? DigestContext(),
                initialiseVerify(context.pointer, key: pointer, algorithm: algorithm)
            else {
                OpenSSL.clearErrors()
                continue
            }
            templates[algorithm] = context
        }
        verifyTemplates = templates
    }

    deinit { EVP_PKEY_free(pointer) }

    /// DER SubjectPublicKeyInfo of the public part.
    func publicKeyDER() throws(CryptographyError) -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_PUBKEY(pointer, &out)
        guard length > 0, let out else { throw OpenSSL.error(CryptographyError.libraryFailure, "i2d_PUBKEY failed") }
        defer { moose_openssl_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    func bigNumber(_ name: String) -> [UInt8]? {
        var bn: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(pointer, name, &bn) == 1, let bn else {
            OpenSSL.clearErrors()
            return nil
        }
        defer { BN_clear_free(bn) }
        var bytes = [UInt8](repeating: 0, count: Int(moose_bn_num_bytes(bn)))
        _ = bytes.withUnsafeMutableBufferPointer { BN_bn2bin(bn, $0.baseAddress) }
        return bytes
    }

    func octets(_ name: String) -> [UInt8]? {
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pointer, name, nil, 0, &length) == 1 else {
            OpenSSL.clearErrors()
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_get_octet_string_param(pointer, name, &bytes, length, &length) == 1 else {
            OpenSSL.clearErrors()
            return nil
        }
        return Array(bytes.prefix(length))
    }

    /// Decodes PEM or DER (SubjectPublicKeyInfo, PKCS#1, PKCS#8, SEC1, or a PEM certificate).
    static func decode(_ bytes: [UInt8], format: StaticString, selection: Int32) throws(CryptographyError) -> EVPKey {
        if format.description == "PEM", let certificateKey = try publicKeyFromCertificate(bytes) {
            return certificateKey
        }
        var pkey: OpaquePointer? = nil
        // The decoder keeps the input-type pointer (it does not copy it): it must outlive the context.
        guard let decoder = OSSL_DECODER_CTX_new_for_pkey(&pkey, cName(format), nil, nil, selection, nil, nil) else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "OSSL_DECODER_CTX_new_for_pkey failed")
        }
        defer { OSSL_DECODER_CTX_free(decoder) }
        let ok = bytes.withUnsafeBufferPointer { buffer -> Int32 in
            var data: UnsafePointer<UInt8>? = buffer.baseAddress
            var length = buffer.count
            return OSSL_DECODER_from_data(decoder, &data, &length)
        }
        guard ok == 1, let pkey else {
            throw OpenSSL.error(CryptographyError.invalidKey, "not a readable \(format) key")
        }
        OpenSSL.clearErrors()
        return try EVPKey(takingOwnershipOf: pkey)
    }

    private static func publicKeyFromCertificate(_ bytes: [UInt8]) throws(CryptographyError) -> EVPKey? {
        guard String(decoding: bytes, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else { return nil }
        let bio = bytes.withUnsafeBytes { BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }
        guard let bio else { throw OpenSSL.error(CryptographyError.libraryFailure, "BIO_new_mem_buf failed") }
        defer { BIO_free(bio) }
        guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else {
            throw OpenSSL.error(CryptographyError.invalidKey, "not a readable PEM certificate")
        }
        defer { X509_free(certificate) }
        guard let key = X509_get_pubkey(certificate) else {
            throw OpenSSL.error(CryptographyError.invalidKey, "certificate has no usable public key")
        }
        return try EVPKey(takingOwnershipOf: key)
    }

    /// Builds a key from named parameters (`EVP_PKEY_fromdata`).
    static func fromParameters(
        type: StaticString,
        selection: Int32,
        bigNumbers: [(StaticString, [UInt8])],
        octets: [(StaticString, [UInt8])] = [],
        strings: [(StaticString, String)] = []
    ) throws(CryptographyError) -> EVPKey {
        guard let builder = OSSL_PARAM_BLD_new() else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "OSSL_PARAM_BLD_new failed")
        }
        defer { OSSL_PARAM_BLD_free(builder) }
        // The builder copies BIGNUM values when it builds; keep ours alive until then.
        var numbers: [BigNumber] = []
        for (name, value) in bigNumbers {
            let bn = try BigNumber(bytes: value)
            numbers.append(bn)
            try OpenSSL.check(OSSL_PARAM_BLD_push_BN(builder, cName(name), bn.pointer), "cannot set \(name)")
        }
        // The builder keeps pointers to octet and string values until it builds; copy them into
        // buffers that outlive `OSSL_PARAM_BLD_to_param`.
        var buffers: [UnsafeMutableRawBufferPointer] = []
        defer {
            for buffer in buffers {
                cleanse(buffer)
                buffer.deallocate()
            }
        }
        func keep(_ bytes: [UInt8]) -> UnsafeMutableRawBufferPointer {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
            buffer.copyBytes(from: bytes)
            buffers.append(buffer)
            return buffer
        }
        for (name, value) in octets {
            let buffer = keep(value)
            try OpenSSL.check(
                OSSL_PARAM_BLD_push_octet_string(builder, cName(name), buffer.baseAddress, value.count),
                "cannot set \(name)")
        }
        for (name, value) in strings {
            let buffer = keep(Array(value.utf8) + [0])
            let cString = buffer.baseAddress?.assumingMemoryBound(to: CChar.self)
            try OpenSSL.check(OSSL_PARAM_BLD_push_utf8_string(builder, cName(name), cString, 0), "cannot set \(name)")
        }
        guard let params = OSSL_PARAM_BLD_to_param(builder) else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "OSSL_PARAM_BLD_to_param failed")
        }
        defer { OSSL_PARAM_free(params) }
        withExtendedLifetime(numbers) {}
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, cName(type), nil) else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "EVP_PKEY_CTX_new_from_name(\(type)) failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        try OpenSSL.check(EVP_PKEY_fromdata_init(ctx), "EVP_PKEY_fromdata_init failed")
        var pkey: OpaquePointer? = nil
        guard EVP_PKEY_fromdata(ctx, &pkey, selection, params) == 1, let pkey else {
            throw OpenSSL.error(CryptographyError.invalidKey, "invalid \(type) key parameters")
        }
        return try EVPKey(takingOwnershipOf: pkey)
    }

    /// `EVP_PKEY_public_check`: for EC, the point is on the curve and not the point at infinity.
    func checkPublic() throws(CryptographyError) {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "EVP_PKEY_CTX_new_from_pkey failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_public_check(ctx) == 1 else {
            throw OpenSSL.error(CryptographyError.invalidKey, "public key fails validation (point not on the curve?)")
        }
    }

    static func rawKey(ed25519 bytes: [UInt8], isPrivate: Bool) throws(CryptographyError) -> EVPKey {
        guard bytes.count == 32 else {
            throw CryptographyError(CryptographyError.invalidKey, "an Ed25519 key is 32 bytes, got \(bytes.count)")
        }
        let pkey = bytes.withUnsafeBufferPointer {
            isPrivate
                ? EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32)
                : EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32)
        }
        guard let pkey else { throw OpenSSL.error(CryptographyError.invalidKey, "invalid Ed25519 key") }
        return try EVPKey(takingOwnershipOf: pkey)
    }
}

/// An asymmetric public key (RSA, EC P-256/384/521 or Ed25519) for verifying signatures.
///
/// ```swift
/// let key = try PublicKey(pem: pemString)
/// let ok = try key.isValidSignature(signature, for: message, algorithm: .rsaPKCS1v15(.sha256))
/// ```
public struct PublicKey: Sendable {
    let key: EVPKey

    init(_ key: EVPKey) { self.key = key }

    /// The key's family and size.
    public var type: AsymmetricKeyType { key.type }

    /// Reads a PEM public key (SubjectPublicKeyInfo or PKCS#1 `RSA PUBLIC KEY`), a PEM certificate
    /// (its subject key), or a PEM private key (its public part).
    public init(pem: String) throws(CryptographyError) {
        let decoded = try EVPKey.decode(Array(pem.utf8), format: "PEM", selection: 0)
        key = try EVPKey.decode(try decoded.publicKeyDER(), format: "DER", selection: moose_selection_public_key())
    }

    /// Reads a DER SubjectPublicKeyInfo.
    public init(der: some ContiguousBytes) throws(CryptographyError) {
        let bytes = withBytes(der) { Array($0) }
        key = try EVPKey.decode(bytes, format: "DER", selection: moose_selection_public_key())
    }

    /// An RSA public key from its big-endian modulus and exponent (JWK `n`, `e`).
    public init(rsaModulus modulus: [UInt8], exponent: [UInt8]) throws(CryptographyError) {
        guard !modulus.isEmpty, !exponent.isEmpty else {
            throw CryptographyError(CryptographyError.invalidKey, "RSA modulus and exponent must not be empty")
        }
        key = try EVPKey.fromParameters(
            type: "RSA", selection: moose_selection_public_key(),
            bigNumbers: [("n", modulus), ("e", exponent)])
    }

    /// An EC public key from its affine coordinates (JWK `x`, `y`), each exactly the curve's size.
    /// The point is checked to be on the curve.
    public init(curve: EllipticCurve, x: [UInt8], y: [UInt8]) throws(CryptographyError) {
        let size = curve.coordinateByteCount
        guard x.count == size, y.count == size else {
            throw CryptographyError(
                CryptographyError.invalidKey,
                "\(curve.rawValue) coordinates must be \(size) bytes each, got \(x.count) and \(y.count)")
        }
        key = try EVPKey.fromParameters(
            type: "EC", selection: moose_selection_public_key(), bigNumbers: [],
            octets: [("pub", [0x04] + x + y)], strings: [("group", curve.openSSLName)])
        try key.checkPublic()
    }

    /// An Ed25519 public key from its 32 raw bytes (JWK `x`, RFC 8037).
    public init(ed25519 raw: [UInt8]) throws(CryptographyError) {
        key = try EVPKey.rawKey(ed25519: raw, isPrivate: false)
    }

    /// DER SubjectPublicKeyInfo.
    public func derRepresentation() throws(CryptographyError) -> [UInt8] { try key.publicKeyDER() }

    /// PEM SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`).
    public func pemRepresentation() throws(CryptographyError) -> String {
        let bio = try MemoryBIO()
        try OpenSSL.check(PEM_write_bio_PUBKEY(bio.pointer, key.pointer), "PEM_write_bio_PUBKEY failed")
        return bio.string()
    }

    /// RSA modulus and exponent, big-endian without leading zeros; `nil` for other key types.
    public var rsaComponents: (modulus: [UInt8], exponent: [UInt8])? {
        guard case .rsa = type, let n = key.bigNumber("n"), let e = key.bigNumber("e") else { return nil }
        return (n, e)
    }

    /// EC affine coordinates, each padded to the curve's size; `nil` for other key types.
    public var ecCoordinates: (x: [UInt8], y: [UInt8])? {
        guard case .ec(let curve) = type, let point = key.octets("encoded-pub-key") else { return nil }
        let size = curve.coordinateByteCount
        guard point.count == 1 + 2 * size, point[0] == 0x04 else { return nil }
        return (Array(point[1...size]), Array(point[(size + 1)...]))
    }

    /// The 32 raw bytes of an Ed25519 key; `nil` for other key types.
    public var ed25519Raw: [UInt8]? {
        guard case .ed25519 = type else { return nil }
        var raw = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(key.pointer, &raw, &length) == 1, length == 32 else { return nil }
        return raw
    }
}

/// An asymmetric private key (RSA, EC P-256/384/521 or Ed25519) for signing.
///
/// ```swift
/// let key = try PrivateKey.generate(.ec(.p256))
/// let signature = try key.signature(for: message, algorithm: .ecdsa(.sha256))   // raw r‖s
/// ```
public struct PrivateKey: Sendable {
    let key: EVPKey

    init(_ key: EVPKey) { self.key = key }

    /// The key's family and size.
    public var type: AsymmetricKeyType { key.type }

    /// Reads a PEM private key (PKCS#8, PKCS#1 `RSA PRIVATE KEY`, SEC1 `EC PRIVATE KEY`), unencrypted.
    public init(pem: String) throws(CryptographyError) {
        key = try EVPKey.decode(Array(pem.utf8), format: "PEM", selection: moose_selection_keypair())
    }

    /// Reads a DER private key (PKCS#8 or the type-specific formats).
    public init(der: some ContiguousBytes) throws(CryptographyError) {
        key = try EVPKey.decode(withBytes(der) { Array($0) }, format: "DER", selection: moose_selection_keypair())
    }

    /// An RSA private key from JWK components (RFC 7518 §6.3). The CRT values are optional but make
    /// signing several times faster.
    public init(
        rsaModulus n: [UInt8], publicExponent e: [UInt8], privateExponent d: [UInt8],
        primes: (p: [UInt8], q: [UInt8])? = nil,
        crt: (dp: [UInt8], dq: [UInt8], qi: [UInt8])? = nil
    ) throws(CryptographyError) {
        var numbers: [(StaticString, [UInt8])] = [("n", n), ("e", e), ("d", d)]
        if let primes { numbers += [("rsa-factor1", primes.p), ("rsa-factor2", primes.q)] }
        if primes != nil, let crt {
            numbers += [("rsa-exponent1", crt.dp), ("rsa-exponent2", crt.dq), ("rsa-coefficient1", crt.qi)]
        }
        key = try EVPKey.fromParameters(type: "RSA", selection: moose_selection_keypair(), bigNumbers: numbers)
    }

    /// An EC private key from its scalar `d` and public point (JWK `d`, `x`, `y`).
    public init(curve: EllipticCurve, d: [UInt8], x: [UInt8], y: [UInt8]) throws(CryptographyError) {
        let size = curve.coordinateByteCount
        guard d.count == size, x.count == size, y.count == size else {
            throw CryptographyError(
                CryptographyError.invalidKey, "\(curve.rawValue) key components must be \(size) bytes each")
        }
        key = try EVPKey.fromParameters(
            type: "EC", selection: moose_selection_keypair(), bigNumbers: [("priv", d)],
            octets: [("pub", [0x04] + x + y)], strings: [("group", curve.openSSLName)])
        try key.checkPublic()
    }

    /// An Ed25519 private key from its 32-byte seed (JWK `d`, RFC 8037).
    public init(ed25519Seed seed: [UInt8]) throws(CryptographyError) {
        key = try EVPKey.rawKey(ed25519: seed, isPrivate: true)
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
        let pkey: OpaquePointer?
        switch spec {
        case .rsa(let bits):
            guard bits >= 2048, bits <= 16384 else {
                throw CryptographyError(
                    CryptographyError.invalidParameter, "RSA keys must be 2048–16384 bits, asked for \(bits)")
            }
            pkey = moose_keygen_rsa(bits)
        case .ec(let curve): pkey = moose_keygen_ec(curve.openSSLName)
        case .ed25519: pkey = moose_keygen_ed25519()
        }
        guard let pkey else { throw OpenSSL.error(CryptographyError.libraryFailure, "key generation failed") }
        return PrivateKey(try EVPKey(takingOwnershipOf: pkey))
    }

    /// The matching public key.
    public func publicKey() throws(CryptographyError) -> PublicKey {
        PublicKey(try EVPKey.decode(try key.publicKeyDER(), format: "DER", selection: moose_selection_public_key()))
    }

    /// Unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`). Handle with care: this is the secret.
    public func pemRepresentation() throws(CryptographyError) -> String {
        let bio = try MemoryBIO()
        try OpenSSL.check(
            PEM_write_bio_PrivateKey(bio.pointer, key.pointer, nil, nil, 0, nil, nil),
            "PEM_write_bio_PrivateKey failed")
        return bio.string()
    }

    /// The private components, for JWK export: RSA `d`, `p`, `q`, `dp`, `dq`, `qi`; EC `d`; Ed25519 seed.
    public var privateComponents: [String: [UInt8]] {
        switch type {
        case .rsa:
            let names = [
                ("d", "d"), ("p", "rsa-factor1"), ("q", "rsa-factor2"),
                ("dp", "rsa-exponent1"), ("dq", "rsa-exponent2"), ("qi", "rsa-coefficient1")
            ]
            var result: [String: [UInt8]] = [:]
            for (jwk, ossl) in names { result[jwk] = key.bigNumber(ossl) }
            return result
        case .ec(let curve):
            guard let d = key.bigNumber("priv") else { return [:] }
            return ["d": [UInt8](repeating: 0, count: max(0, curve.coordinateByteCount - d.count)) + d]
        case .ed25519:
            var raw = [UInt8](repeating: 0, count: 32)
            var length = 32
            guard EVP_PKEY_get_raw_private_key(key.pointer, &raw, &length) == 1 else { return [:] }
            return ["d": raw]
        }
    }
}
#endif

extension PublicKey {
    /// `true` when this is an RSA key with the ROCA fingerprint (CVE-2017-15361): a modulus made by
    /// the flawed Infineon generator, whose private key can be recovered. Such keys must not be trusted.
    ///
    /// The test (Nemec et al., CCS 2017): for each small prime `p` in the list, `n mod p` lies in the
    /// multiplicative subgroup generated by 65537; a random modulus fails this almost surely.
    public var hasROCAFingerprint: Bool {
        guard let modulus = rsaComponents?.modulus else { return false }
        let primes: [UInt32] = [
            3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79,
            83, 89, 97, 101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167
        ]
        for p in primes {
            var remainder: UInt32 = 0
            for byte in modulus { remainder = (remainder << 8 | UInt32(byte)) % p }
            // Walk the subgroup generated by 65537 mod p.
            let generator = 65537 % p
            var element: UInt32 = 1
            var found = false
            repeat {
                if element == remainder { found = true; break }
                element = element * generator % p
            } while element != 1
            if !found { return false }
        }
        return true
    }
}
