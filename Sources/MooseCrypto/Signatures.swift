#if MooseLibCrypto
internal import CLibCrypto
#endif
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A signature scheme: what JOSE's `RS*`, `PS*`, `ES*` and `EdDSA` map to.
public enum SignatureAlgorithm: Sendable, Hashable {
    /// RSASSA-PKCS1-v1_5 (RFC 8017 §8.2), JOSE `RS256/384/512`.
    case rsaPKCS1v15(DigestAlgorithm)
    /// RSASSA-PSS with MGF1 of the same hash and a salt as long as the hash (RFC 7518 §3.5), JOSE `PS256/384/512`.
    case rsaPSS(DigestAlgorithm)
    /// ECDSA with raw `r‖s` signatures (IEEE P1363, RFC 7518 §3.4), JOSE `ES256/384/512`.
    case ecdsa(DigestAlgorithm)
    /// Ed25519 (RFC 8032), JOSE `EdDSA` / `Ed25519`.
    case ed25519

    var hash: DigestAlgorithm? {
        switch self {
        case .rsaPKCS1v15(let h), .rsaPSS(let h), .ecdsa(let h): h
        case .ed25519: nil
        }
    }

    func check(_ type: AsymmetricKeyType) throws(CryptographyError) {
        switch (self, type) {
        case (.rsaPKCS1v15, .rsa), (.rsaPSS, .rsa), (.ecdsa, .ec), (.ed25519, .ed25519): return
        default:
            throw CryptographyError(CryptographyError.algorithmMismatch, "\(self) cannot be used with an \(type) key")
        }
    }
}

#if MooseLibCrypto
extension PublicKey {
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
        try algorithm.check(type)
        if case .ecdsa = algorithm, case .ec(let curve) = type {
            guard let der = ECDSASignature.der(fromRaw: signature, curve: curve) else { return false }
            return der.withUnsafeBytes { digestVerify(key: key, algorithm: algorithm, signature: $0, message: message) }
        }
        return digestVerify(key: key, algorithm: algorithm, signature: signature, message: message)
    }
}

extension PrivateKey {
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
        try algorithm.check(type)
        let ctx = try DigestContext()
        var pctx: OpaquePointer? = nil
        try OpenSSL.check(
            EVP_DigestSignInit_ex(ctx.pointer, &pctx, algorithm.hash?.cDigestName, nil, nil, key.pointer, nil),
            "EVP_DigestSignInit_ex failed")
        if case .rsaPSS = algorithm { try configurePSS(pctx) }
        var length = 0
        try OpenSSL.check(
            EVP_DigestSign(ctx.pointer, nil, &length, base(message), message.count), "EVP_DigestSign (size) failed")
        var output = [UInt8](repeating: 0, count: length)
        let ok = output.withUnsafeMutableBufferPointer {
            EVP_DigestSign(ctx.pointer, $0.baseAddress, &length, base(message), message.count)
        }
        try OpenSSL.check(ok, "EVP_DigestSign failed")
        output.removeSubrange(length...)
        if case .ec(let curve) = type {
            guard let raw = ECDSASignature.raw(fromDER: output, curve: curve) else {
                throw CryptographyError(
                    CryptographyError.libraryFailure, "libcrypto produced an unparseable ECDSA signature")
            }
            return raw
        }
        return output
    }
}

private func configurePSS(_ pctx: OpaquePointer?) throws(CryptographyError) {
    try OpenSSL.check(EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING), "setting PSS padding failed")
    try OpenSSL.check(
        EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST), "setting the PSS salt length failed")
}

private func digestVerify(
    key: EVPKey, algorithm: SignatureAlgorithm, signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer
) -> Bool {
    guard let ctx = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(ctx) }
    var ok: Bool
    if let template = key.verifyTemplates[algorithm] {
        // Copying an initialised context skips the algorithm fetch that dominates a fresh init.
        ok = EVP_MD_CTX_copy_ex(ctx, template.pointer) == 1
    } else {
        ok = initialiseVerify(ctx, key: key.pointer, algorithm: algorithm)
    }
    if ok { ok = EVP_DigestVerify(ctx, base(signature), signature.count, base(message), message.count) == 1 }
    if !ok { OpenSSL.clearErrors() }
    return ok
}

/// `EVP_DigestVerifyInit_ex` with the algorithm's digest and padding.
func initialiseVerify(_ ctx: OpaquePointer, key: OpaquePointer, algorithm: SignatureAlgorithm) -> Bool {
    var pctx: OpaquePointer? = nil
    var ok = EVP_DigestVerifyInit_ex(ctx, &pctx, algorithm.hash?.cDigestName, nil, nil, key, nil) == 1
    if ok, case .rsaPSS = algorithm { ok = (try? configurePSS(pctx)) != nil }
    return ok
}
#endif

/// Strict conversion between JOSE's raw ECDSA signatures (`r‖s`, RFC 7518 §3.4) and DER
/// (`SEQUENCE { INTEGER r, INTEGER s }`, SEC 1 / RFC 3279).
public enum ECDSASignature {
    /// DER from raw `r‖s`; `nil` unless the raw form is exactly `2 × coordinateByteCount` bytes
    /// and neither `r` nor `s` is zero.
    public static func der(fromRaw raw: some ContiguousBytes, curve: EllipticCurve) -> [UInt8]? {
        withBytes(raw) { der(fromRaw: $0, curve: curve) }
    }

    static func der(fromRaw raw: UnsafeRawBufferPointer, curve: EllipticCurve) -> [UInt8]? {
        let size = curve.coordinateByteCount
        guard raw.count == 2 * size else { return nil }
        let r = integer(raw[0..<size])
        let s = integer(raw[size..<(2 * size)])
        guard let r, let s else { return nil }
        let body = r + s
        return [0x30] + length(body.count) + body
    }

    /// Raw `r‖s` (each left-padded to the curve size) from DER; `nil` unless the DER is canonical:
    /// minimal lengths, minimal positive integers, nothing trailing, values that fit the curve.
    public static func raw(fromDER der: some ContiguousBytes, curve: EllipticCurve) -> [UInt8]? {
        withBytes(der) { buffer in
            var reader = DERReader(bytes: Array(buffer))
            guard let sequence = reader.read(tag: 0x30), reader.isAtEnd else { return nil }
            var inner = DERReader(bytes: sequence)
            guard let r = inner.readUnsignedInteger(), let s = inner.readUnsignedInteger(), inner.isAtEnd else {
                return nil
            }
            let size = curve.coordinateByteCount
            guard r.count <= size, s.count <= size, !r.isEmpty, !s.isEmpty else { return nil }
            return [UInt8](repeating: 0, count: size - r.count) + r + [UInt8](repeating: 0, count: size - s.count) + s
        }
    }

    /// DER INTEGER for an unsigned big-endian value; `nil` for zero.
    private static func integer(_ bytes: Slice<UnsafeRawBufferPointer>) -> [UInt8]? {
        guard let first = bytes.firstIndex(where: { $0 != 0 }) else { return nil }
        var value = Array(bytes[first...])
        if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
        return [0x02] + length(value.count) + value
    }

    private static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        if count <= 0xFF { return [0x81, UInt8(count)] }
        return [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
    }
}

/// A strict DER reader for the two shapes ECDSA needs.
struct DERReader {
    let bytes: [UInt8]
    var position = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { position == bytes.count }

    mutating func read(tag: UInt8) -> [UInt8]? {
        guard position < bytes.count, bytes[position] == tag else { return nil }
        position += 1
        guard position < bytes.count else { return nil }
        let first = bytes[position]
        position += 1
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let octets = Int(first & 0x7F)
            guard octets >= 1, octets <= 2, position + octets <= bytes.count else { return nil }
            for _ in 0..<octets {
                length = length << 8 | Int(bytes[position])
                position += 1
            }
            // Minimal length encoding: long form only for ≥ 0x80, and no leading zero octet.
            guard length >= 0x80, !(octets == 2 && length <= 0xFF) else { return nil }
        }
        guard position + length <= bytes.count else { return nil }
        defer { position += length }
        return Array(bytes[position..<(position + length)])
    }

    /// A non-negative INTEGER in minimal encoding, returned without its sign octet.
    mutating func readUnsignedInteger() -> [UInt8]? {
        guard let value = read(tag: 0x02), let first = value.first else { return nil }
        if first & 0x80 != 0 { return nil } // negative
        if value.count > 1, first == 0, value[1] & 0x80 == 0 { return nil } // non-minimal
        let magnitude = first == 0 ? Array(value.dropFirst()) : value
        return magnitude.isEmpty ? nil : magnitude // zero is not a valid r or s
    }
}
