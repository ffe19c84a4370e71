#if MooseLibCrypto
internal import CLibCrypto

/// Helpers that turn libcrypto's conventions into Swift ones.
enum OpenSSL {
    /// Drains the whole thread-local OpenSSL error queue, oldest first.
    ///
    /// Reading only one entry would leak the rest into the next, unrelated call.
    static func drainErrors() -> [String] {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if let reason = ERR_reason_error_string(code) {
                reasons.append(String(cString: reason))
            } else {
                // No text: a process that skipped loading them (`moose token`), or an unknown code.
                let hex = String(code, radix: 16, uppercase: true)
                let padded = String(repeating: "0", count: max(0, 8 - hex.count)) + hex
                reasons.append("OpenSSL error \(padded) (`openssl errstr \(padded)` names it)")
            }
        }
        return reasons
    }

    /// Discards whatever is on the error queue (used after an expected failure such as a bad signature).
    static func clearErrors() {
        ERR_clear_error()
    }

    /// A `CryptographyError` carrying the drained error queue.
    static func error(_ code: CryptographyError.Code, _ message: String) -> CryptographyError {
        CryptographyError(code, message, openSSLErrors: drainErrors())
    }

    /// Throws `libraryFailure` unless `result == 1`, libcrypto's success value.
    static func check(_ result: Int32, _ what: @autoclosure () -> String) throws(CryptographyError) {
        if result != 1 { throw error(CryptographyError.libraryFailure, what()) }
    }
}

/// Process-wide libcrypto settings, for programs rather than libraries (the `moose` CLI).
package enum LibCrypto {
    /// Tells libcrypto not to tear down its provider, method and name tables in an `atexit` handler
    /// (`OPENSSL_INIT_NO_ATEXIT`): the kernel reclaims a short-lived process's memory anyway, and the
    /// handler costs `moose token` 8% of its instructions (1.1M). Call it first thing in `main`:
    /// it only initialises libcrypto's base (locks), loads no configuration and fetches nothing.
    ///
    /// With `loadingErrorStrings: false` libcrypto never loads its error texts (~4,000 strings
    /// hashed into a table: 0.9M instructions and ~0.4 ms of a `moose token` process): its errors are
    /// then reported by code (`openssl errstr` names them). This cannot be undone later in the process.
    package static func skipCleanupAtExit(loadingErrorStrings: Bool = true) {
        var options = UInt64(OPENSSL_INIT_NO_ATEXIT)
        if !loadingErrorStrings { options |= UInt64(OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS) }
        _ = OPENSSL_init_crypto(options, nil)
    }

    /// Fetches what the secret store uses (HMAC, SHA-256 for its HMAC, AES-256-GCM) now. Their first
    /// fetch builds libcrypto's provider, name and method tables — 69% of `moose token`'s
    /// instructions — so `SecretStore.readSnapshot` does it before it takes its lock, not under it.
    ///
    /// In a program that asked for `DefaultProviderPath` and may take it, nothing is fetched: the
    /// decision (libcrypto's configuration loaded, the provider's tables looked up) is made here.
    package static func prepareStoreAlgorithms() {
        if DefaultProviderPath.isActive { return }
        _ = Fetched.hmac
        _ = Fetched.sha256
        _ = Fetched.aes256gcm
    }
}

/// Owns an `EVP_MD_CTX`, freed in `deinit`.
final class DigestContext {
    let pointer: OpaquePointer

    init() throws(CryptographyError) {
        guard let ctx = EVP_MD_CTX_new() else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "EVP_MD_CTX_new failed")
        }
        pointer = ctx
    }

    deinit { EVP_MD_CTX_free(pointer) }
}

/// Owns an `EVP_CIPHER_CTX`, freed (and wiped by libcrypto) in `deinit`.
final class CipherContext {
    let pointer: OpaquePointer

    init() throws(CryptographyError) {
        guard let ctx = EVP_CIPHER_CTX_new() else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "EVP_CIPHER_CTX_new failed")
        }
        pointer = ctx
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }
}

/// Owns a `BIGNUM`, freed with `BN_clear_free` (it may hold a private exponent).
final class BigNumber {
    let pointer: OpaquePointer

    init(bytes: some Collection<UInt8>) throws(CryptographyError) {
        let array = Array(bytes)
        guard let bn = array.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "BN_bin2bn failed")
        }
        pointer = bn
    }

    deinit { BN_clear_free(pointer) }
}

/// Owns a memory `BIO`, freed in `deinit`.
final class MemoryBIO {
    let pointer: OpaquePointer

    /// A BIO to write into.
    init() throws(CryptographyError) {
        guard let bio = BIO_new(BIO_s_mem()) else {
            throw OpenSSL.error(CryptographyError.libraryFailure, "BIO_new failed")
        }
        pointer = bio
    }

    deinit { BIO_free(pointer) }

    /// Everything written so far, as a string.
    func string() -> String {
        var raw: UnsafeMutablePointer<CChar>? = nil
        let length = BIO_ctrl(pointer, BIO_CTRL_INFO, 0, &raw)
        guard length > 0, let raw else { return "" }
        return raw.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }
}

/// Pre-fetched algorithm implementations.
///
/// OpenSSL 3 looks an algorithm up by name on every init when given a legacy `EVP_sha256()`
/// pointer; fetching once and reusing the handle keeps that cost off the hot path. Fetched
/// objects are immutable and safe to share between threads.
enum Fetched {
    static var sha256: OpaquePointer? { all.sha256.pointer }
    static var sha384: OpaquePointer? { all.sha384.pointer }
    static var sha512: OpaquePointer? { all.sha512.pointer }
    static var hmac: OpaquePointer? { all.hmac.pointer }
    static var aes128gcm: OpaquePointer? { all.aes128gcm.pointer }
    static var aes192gcm: OpaquePointer? { all.aes192gcm.pointer }
    static var aes256gcm: OpaquePointer? { all.aes256gcm.pointer }
    static var hkdf: OpaquePointer? { all.hkdf.pointer }

    /// Fetched once, on first use.
    private static let all = Handles()

    private struct Handles: Sendable {
        let sha256 = SharedHandle(EVP_MD_fetch(nil, "SHA256", nil))
        let sha384 = SharedHandle(EVP_MD_fetch(nil, "SHA384", nil))
        let sha512 = SharedHandle(EVP_MD_fetch(nil, "SHA512", nil))
        let hmac = SharedHandle(EVP_MAC_fetch(nil, "HMAC", nil))
        let aes128gcm = SharedHandle(EVP_CIPHER_fetch(nil, "AES-128-GCM", nil))
        let aes192gcm = SharedHandle(EVP_CIPHER_fetch(nil, "AES-192-GCM", nil))
        let aes256gcm = SharedHandle(EVP_CIPHER_fetch(nil, "AES-256-GCM", nil))
        let hkdf = SharedHandle(EVP_KDF_fetch(nil, "HKDF", nil))
    }
}
#endif
