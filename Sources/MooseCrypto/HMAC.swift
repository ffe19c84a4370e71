#if MooseLibCrypto
internal import CLibCrypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// HMAC (RFC 2104) with SHA-256/384/512, keyed once and reused.
///
/// The key is imported into a libcrypto MAC context once; each `authenticationCode(for:)`
/// duplicates that context, so keying costs nothing per message.
///
/// ```swift
/// let mac = try HMACAuthenticator(key: SecretKey(secret), hash: .sha256)
/// let tag = try mac.authenticationCode(for: Array("message".utf8))
/// let ok = mac.isValidAuthenticationCode(tag, for: Array("message".utf8))
/// ```
public struct HMACAuthenticator: Sendable {
    private let keying: Keying
    /// The hash function this MAC uses.
    public let hash: DigestAlgorithm

    /// An EVP MAC template, or (SHA-256 in a program that asked for `DefaultProviderPath`) the key
    /// for the default provider's SHA-256 called directly.
    private enum Keying: Sendable {
        case evp(MACContext)
        case direct(SecretKey)
    }

    /// Keys an HMAC. Any key length is accepted here; JOSE's minimum lengths are enforced by `MooseJWT`.
    public init(key: SecretKey, hash: DigestAlgorithm) throws(CryptographyError) {
        self.hash = hash
        if hash == .sha256, DefaultProviderPath.isActive {
            keying = .direct(key)
        } else {
            keying = .evp(try MACContext(key: key, hash: hash))
        }
    }

    /// The MAC of `message`.
    public func authenticationCode(for message: some ContiguousBytes) throws(CryptographyError) -> [UInt8] {
        try withBytes(message) { (buffer) throws(CryptographyError) in try authenticationCode(for: buffer) }
    }

    /// The MAC of the bytes in `message`.
    public func authenticationCode(for message: UnsafeRawBufferPointer) throws(CryptographyError) -> [UInt8] {
        let template: MACContext
        switch keying {
        case .direct(let key):
            guard let code = key.withUnsafeBytes({ DefaultProviderPath.hmacSHA256(key: $0, message: message) }) else {
                throw CryptographyError(CryptographyError.libraryFailure, "the default provider's SHA-256 failed")
            }
            return code
        case .evp(let evp):
            template = evp
        }
        guard let ctx = EVP_MAC_CTX_dup(template.pointer) else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "EVP_MAC_CTX_dup failed")
        }
        defer { EVP_MAC_CTX_free(ctx) }
        try OpenSSL.check(EVP_MAC_update(ctx, base(message), message.count), "EVP_MAC_update failed")
        var output = [UInt8](repeating: 0, count: hash.outputByteCount)
        var length = 0
        let ok = output.withUnsafeMutableBufferPointer { EVP_MAC_final(ctx, $0.baseAddress, &length, $0.count) }
        try OpenSSL.check(ok, "EVP_MAC_final failed")
        return output
    }

    /// `true` when `code` is the MAC of `message`; compared in constant time. A truncated code is rejected.
    public func isValidAuthenticationCode(_ code: some ContiguousBytes, for message: some ContiguousBytes) -> Bool {
        withBytes(message) { message in
            withBytes(code) { code in isValidAuthenticationCode(code, for: message) }
        }
    }

    /// `true` when `code` is the MAC of `message`; compared in constant time. A truncated code is rejected.
    public func isValidAuthenticationCode(_ code: UnsafeRawBufferPointer, for message: UnsafeRawBufferPointer) -> Bool {
        guard code.count == hash.outputByteCount,
            let expected = try? authenticationCode(for: message)
        else { return false }
        return expected.withUnsafeBytes { constantTimeEquals($0, code) }
    }
}

/// Owns an initialised `EVP_MAC_CTX` used as a template; freed in `deinit`.
final class MACContext: Sendable {
    // Only ever duplicated after init, never updated: safe to share between threads.
    private let handle: SharedHandle<OpaquePointer>
    var pointer: OpaquePointer { handle.pointer }

    init(key: SecretKey, hash: DigestAlgorithm) throws(CryptographyError) {
        guard let ctx = EVP_MAC_CTX_new(Fetched.hmac) else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "EVP_MAC_CTX_new failed")
        }
        let ok = key.withUnsafeBytes { keyBytes in
            withStringParameter("digest", hash.name.description) { params in
                EVP_MAC_init(ctx, base(keyBytes), keyBytes.count, params)
            }
        }
        guard ok == 1 else {
            EVP_MAC_CTX_free(ctx)
            throw OpenSSL.error(CryptographyError.invalidKey, "HMAC key could not be set")
        }
        handle = SharedHandle(ctx)
    }

    deinit { EVP_MAC_CTX_free(pointer) }
}
#endif
