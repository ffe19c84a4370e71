#if MooseLibCrypto
internal import CLibCrypto
#endif
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The SHA-2 hash functions used by JOSE and OAuth.
public enum DigestAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// SHA-256 (32-byte output).
    case sha256 = "SHA-256"
    /// SHA-384 (48-byte output).
    case sha384 = "SHA-384"
    /// SHA-512 (64-byte output).
    case sha512 = "SHA-512"

    /// The digest length in bytes.
    public var outputByteCount: Int {
        switch self {
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }
}

/// A symmetric key (HMAC secret, AES key), held in memory that is wiped when released.
public struct SecretKey: Sendable {
    let bytes: SecureBytes

    /// A key with the given bytes (copied).
    public init(_ bytes: some ContiguousBytes) {
        self.bytes = SecureBytes(bytes)
    }

    /// A new random key of `byteCount` bytes (32 for AES-256).
    public init(randomByteCount byteCount: Int = 32) throws(CryptographyError) {
        bytes = try SecureBytes(randomCount: byteCount)
    }

    /// The key length in bytes.
    public var byteCount: Int { bytes.count }

    /// Gives `body` the raw key bytes. Do not let them escape.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try bytes.withUnsafeBytes(body)
    }
}

#if MooseLibCrypto
@inline(__always)
func constantTimeEquals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    precondition(a.count == b.count)
    if a.count == 0 { return true }
    return CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
}

@inline(__always)
func cleanse(_ buffer: UnsafeMutableRawBufferPointer) {
    if let address = buffer.baseAddress, buffer.count > 0 { OPENSSL_cleanse(address, buffer.count) }
}

/// Cryptographically secure random bytes from libcrypto's CSPRNG (`RAND_bytes`).
public enum SecureRandom {
    /// `count` random bytes.
    ///
    /// ```swift
    /// let nonce = try SecureRandom.bytes(count: 12)
    /// ```
    public static func bytes(count: Int) throws(CryptographyError) -> [UInt8] {
        guard count >= 0 else { throw CryptographyError(CryptographyError.invalidParameter, "negative byte count") }
        var result = [UInt8](repeating: 0, count: count)
        let failure: CryptographyError? = result.withUnsafeMutableBytes { buffer in
            do throws(CryptographyError) { try fill(buffer); return nil } catch { return error }
        }
        if let failure { throw failure }
        return result
    }

    /// Fills `buffer` with random bytes.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(CryptographyError) {
        guard let address = buffer.baseAddress, buffer.count > 0 else { return }
        guard buffer.count <= Int(Int32.max) else {
            throw CryptographyError(CryptographyError.invalidParameter, "too many random bytes requested at once")
        }
        try OpenSSL.check(
            RAND_bytes(address.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)),
            "RAND_bytes failed")
    }
}

extension DigestAlgorithm {
    var md: OpaquePointer? {
        switch self {
        case .sha256: Fetched.sha256
        case .sha384: Fetched.sha384
        case .sha512: Fetched.sha512
        }
    }

    var name: StaticString {
        switch self {
        case .sha256: "SHA256"
        case .sha384: "SHA384"
        case .sha512: "SHA512"
        }
    }

    /// The digest name as a C string that lives as long as the program (libcrypto may keep it).
    var cDigestName: UnsafePointer<CChar> { cName(name) }

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
        var output = [UInt8](repeating: 0, count: outputByteCount)
        var length: UInt32 = 0
        let ok = output.withUnsafeMutableBufferPointer { out in
            EVP_Digest(buffer.baseAddress, buffer.count, out.baseAddress, &length, md, nil)
        }
        // EVP_Digest only fails on allocation failure or a missing provider: both are fatal here,
        // and a wrong digest would be far worse than a crash.
        precondition(ok == 1 && Int(length) == outputByteCount, "EVP_Digest failed: \(OpenSSL.drainErrors())")
        return output
    }
}

/// Calls `body` with an OSSL_PARAM list holding one UTF-8 string parameter.
func withStringParameter<R>(_ key: StaticString, _ value: String, _ body: (UnsafePointer<OSSL_PARAM>) -> R) -> R {
    do {
        var mutableValue = Array(value.utf8CString)
        return mutableValue.withUnsafeMutableBufferPointer { v in
            var params = [
                OSSL_PARAM_construct_utf8_string(cName(key), v.baseAddress, 0),
                OSSL_PARAM_construct_end()
            ]
            return params.withUnsafeMutableBufferPointer { body(UnsafePointer($0.baseAddress!)) }
        }
    }
}
#endif
