#if MooseLibCrypto
internal import CMooseOpenSSLDirect

/// libcrypto's default provider called through the dispatch tables it publishes (provider-cipher(7),
/// provider-digest(7)) rather than through EVP's fetch — for AES-GCM opening and HMAC-SHA-256, the
/// two operations a secret-store read needs.
///
/// OpenSSL 3.0's first EVP fetch of an operation builds the name map from every legacy object name
/// and constructs every algorithm of that operation (124 ciphers for one AES-GCM): 69% of a
/// `moose token` process (BENCHMARKS.md). The functions called here are the very ones EVP's fetch
/// would return (the same AES-NI GCM, the same SHA-256); only the look-up differs.
///
/// A program chooses it with `prefer()` in `main` (the `moose` CLI does; a library never does, as
/// a long-lived app pays the fetch once). Then, on first use, libcrypto loads its configuration as
/// usual, and the path is taken only when EVP would have reached the same code: no FIPS in the
/// default properties and no active provider but `default`, `base` and `legacy`. Otherwise
/// `unavailableReason` says why and every operation goes through EVP, as without `prefer()`.
package enum DefaultProviderPath {
    /// Asks for the direct path in this process. Decides nothing yet and loads nothing.
    package static func prefer() { moose_ossl_direct_prefer() }

    /// `true` when this process asked for the path and libcrypto's configuration allows it. The
    /// first call loads libcrypto's configuration (thread-safe, once per process).
    package static var isActive: Bool {
        moose_ossl_direct_preferred() == 1 && moose_ossl_direct_available(nil) == 1
    }

    /// Why the path cannot be taken in this process (`nil` when it can), whether or not it was asked
    /// for. Loads libcrypto's configuration on first call.
    package static var unavailableReason: String? {
        var reason: UnsafePointer<CChar>? = nil
        guard moose_ossl_direct_available(&reason) != 1 else { return nil }
        return reason.map { String(cString: $0) } ?? "unknown"
    }

    /// HMAC-SHA-256 of `message` under `key` through the default provider's SHA-256; `nil` when the
    /// path is not available (the caller uses EVP).
    package static func hmacSHA256(key: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 32)
        let ok = out.withUnsafeMutableBufferPointer { output in
            moose_ossl_direct_hmac_sha256(
                key.baseAddress?.assumingMemoryBound(to: UInt8.self), key.count,
                message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count,
                output.baseAddress)
        }
        return ok == 1 ? out : nil
    }

    /// A decrypting AES-GCM context of the default provider, keyed once; one user at a time.
    package final class Opener {
        private let context: UnsafeMutableRawPointer

        /// `nil` when the path is not available or the key size has no direct implementation.
        package init?(key: SecretKey) {
            guard
                let context = key.withUnsafeBytes({ bytes in
                    moose_ossl_direct_gcm_new(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
                })
            else { return nil }
            self.context = context
        }

        deinit { moose_ossl_direct_gcm_free(context) }

        /// Checks the 16-byte `tag` and decrypts; throws `authenticationFailure` when anything changed
        /// (the plaintext is wiped), `libraryFailure` when the provider failed.
        package func open(
            nonce: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
            aad: UnsafeRawBufferPointer
        ) throws(CryptographyError) -> [UInt8] {
            guard tag.count == AESGCM.tagByteCount else {
                throw CryptographyError(
                    CryptographyError.authenticationFailure,
                    "GCM tag must be \(AESGCM.tagByteCount) bytes, got \(tag.count)")
            }
            guard nonce.count == AESGCM.nonceByteCount else {
                throw CryptographyError(
                    CryptographyError.invalidParameter, "the direct AES-GCM path takes 12-byte nonces only")
            }
            var output = [UInt8](repeating: 0, count: ciphertext.count)
            let result = output.withUnsafeMutableBufferPointer { out in
                moose_ossl_direct_gcm_open(
                    context, bytes(nonce), nonce.count, bytes(aad), aad.count,
                    bytes(ciphertext), ciphertext.count, bytes(tag), tag.count, out.baseAddress)
            }
            switch result {
            case 1: return output
            case 0: throw CryptographyError(CryptographyError.authenticationFailure, "AES-GCM authentication failed")
            default: throw CryptographyError(CryptographyError.libraryFailure, "the default provider's AES-GCM failed")
            }
        }

        private func bytes(_ buffer: UnsafeRawBufferPointer) -> UnsafePointer<UInt8>? {
            buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
        }
    }
}
#endif
