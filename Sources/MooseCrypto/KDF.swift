#if MooseLibCrypto
internal import CLibCrypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#endif

/// scrypt (RFC 7914): memory-hard password-based key derivation.
public enum Scrypt {
    /// Cost parameters: `n` (CPU/memory cost, a power of two), `r` (block size), `p` (parallelism).
    public struct Parameters: Sendable, Hashable, Codable {
        /// CPU/memory cost; a power of two greater than 1.
        public var n: UInt64
        /// Block size.
        public var r: UInt64
        /// Parallelism.
        public var p: UInt64

        /// Parameters; validated when used.
        public init(n: UInt64, r: UInt64, p: UInt64) {
            self.n = n
            self.r = r
            self.p = p
        }

        /// Memory scrypt needs, in bytes (128 · r · n · p, roughly).
        public var memoryBytes: UInt64 { 128 &* r &* n &* max(p, 1) }
    }
}

#if MooseLibCrypto
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
        guard outputByteCount > 0, outputByteCount <= 255 * hash.outputByteCount else {
            throw CryptographyError(
                CryptographyError.invalidParameter,
                "HKDF output must be 1…\(255 * hash.outputByteCount) bytes, asked for \(outputByteCount)")
        }
        guard let ctx = EVP_KDF_CTX_new(Fetched.hkdf) else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "EVP_KDF_CTX_new failed")
        }
        defer { EVP_KDF_CTX_free(ctx) }
        var output = [UInt8](repeating: 0, count: outputByteCount)
        defer { output.withUnsafeMutableBytes { cleanse($0) } }
        let ok = withBytes(ikm) { ikm in
            withBytes(salt) { salt in
                withBytes(info) { info in
                    do {
                        var digestName = Array(hash.name.description.utf8CString)
                        return digestName.withUnsafeMutableBufferPointer { digestValue in
                            var params = [
                                OSSL_PARAM_construct_utf8_string(cName("digest"), digestValue.baseAddress, 0),
                                OSSL_PARAM_construct_octet_string(
                                    cName("key"), UnsafeMutableRawPointer(mutating: base(ikm)), ikm.count),
                                OSSL_PARAM_construct_octet_string(
                                    cName("salt"), UnsafeMutableRawPointer(mutating: base(salt)), salt.count),
                                OSSL_PARAM_construct_octet_string(
                                    cName("info"), UnsafeMutableRawPointer(mutating: base(info)), info.count),
                                OSSL_PARAM_construct_end()
                            ]
                            return output.withUnsafeMutableBufferPointer { out in
                                params.withUnsafeMutableBufferPointer {
                                    EVP_KDF_derive(ctx, out.baseAddress, out.count, $0.baseAddress)
                                }
                            }
                        }
                    }
                }
            }
        }
        try OpenSSL.check(ok, "HKDF derivation failed")
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
        let n = parameters.n
        guard n > 1, n & (n - 1) == 0, parameters.r > 0, parameters.p > 0, outputByteCount > 0 else {
            throw CryptographyError(
                CryptographyError.invalidParameter, "scrypt needs n a power of two > 1, r > 0, p > 0")
        }
        var output = [UInt8](repeating: 0, count: outputByteCount)
        defer { output.withUnsafeMutableBytes { cleanse($0) } }
        let maxMemory = parameters.memoryBytes + 1 << 20
        let ok = withBytes(password) { password in
            withBytes(salt) { salt in
                output.withUnsafeMutableBufferPointer { out in
                    password.withMemoryRebound(to: CChar.self) { pw in
                        EVP_PBE_scrypt(
                            pw.baseAddress, pw.count, base(salt), salt.count,
                            n, parameters.r, parameters.p, maxMemory, out.baseAddress, out.count)
                    }
                }
            }
        }
        try OpenSSL.check(ok, "scrypt derivation failed")
        return SecretKey(output)
    }
}
#endif
