#if MooseSwiftCrypto
internal import Crypto
internal import CryptoExtras
#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

/// MooseCrypto's primitives on swift-crypto (`Crypto`, `CryptoExtras`), over plain bytes.
///
/// With the trait MooseSwiftCrypto alone, the public API (`AESGCM`, `HMACAuthenticator`, `PublicKey`…)
/// is built on these functions and no libcrypto is linked. With MooseLibCrypto as well (the default
/// traits plus MooseSwiftCrypto, or `--enable-all-traits`), libcrypto backs the public API and this
/// backend is reachable on its own, so tests can seal or sign with one and open or verify with the other.
///
/// Every failure is a `CryptographyError` with the code the libcrypto backend gives the same input.
package enum SwiftCryptoBackend {
    /// Fills `buffer` from the system's CSPRNG (`SystemRandomNumberGenerator`: `getrandom` on Linux,
    /// `arc4random` on Apple platforms), the source swift-crypto's own keys come from.
    package static func fillRandom(_ buffer: UnsafeMutableRawBufferPointer) {
        var generator = SystemRandomNumberGenerator()
        var index = 0
        while index < buffer.count {
            var word = generator.next()
            let take = min(8, buffer.count - index)
            withUnsafeBytes(of: &word) { source in
                for offset in 0..<take { buffer[index + offset] = source[offset] }
            }
            index += take
        }
    }

    /// The SHA-2 digest of `data`.
    package static func hash(_ data: UnsafeRawBufferPointer, _ algorithm: DigestAlgorithm) -> [UInt8] {
        switch algorithm {
        case .sha256: Array(SHA256.hash(data: data))
        case .sha384: Array(SHA384.hash(data: data))
        case .sha512: Array(SHA512.hash(data: data))
        }
    }

    /// HMAC (RFC 2104) of `message` under `key`.
    package static func hmac(key: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer, hash: DigestAlgorithm)
        -> [UInt8]
    {
        let symmetric = SymmetricKey(data: key)
        switch hash {
        case .sha256: return Array(HMAC<SHA256>.authenticationCode(for: message, using: symmetric))
        case .sha384: return Array(HMAC<SHA384>.authenticationCode(for: message, using: symmetric))
        case .sha512: return Array(HMAC<SHA512>.authenticationCode(for: message, using: symmetric))
        }
    }

    /// An HMAC keyed once: each code copies the keyed state (swift-crypto's hash states copy on write)
    /// instead of hashing the key again — what `HMACAuthenticator` holds on swift-crypto.
    package struct KeyedHMAC: Sendable {
        private enum State: Sendable {
            case sha256(HMAC<SHA256>)
            case sha384(HMAC<SHA384>)
            case sha512(HMAC<SHA512>)
        }

        private let state: State

        /// Keys the MAC with `key` (any length).
        package init(key: UnsafeRawBufferPointer, hash: DigestAlgorithm) {
            let symmetric = SymmetricKey(data: key)
            switch hash {
            case .sha256: state = .sha256(HMAC<SHA256>(key: symmetric))
            case .sha384: state = .sha384(HMAC<SHA384>(key: symmetric))
            case .sha512: state = .sha512(HMAC<SHA512>(key: symmetric))
            }
        }

        /// The MAC of `message`.
        package func authenticationCode(for message: UnsafeRawBufferPointer) -> [UInt8] {
            switch state {
            case .sha256(var mac):
                mac.update(data: message)
                return Array(mac.finalize())
            case .sha384(var mac):
                mac.update(data: message)
                return Array(mac.finalize())
            case .sha512(var mac):
                mac.update(data: message)
                return Array(mac.finalize())
            }
        }
    }

    /// HKDF (RFC 5869) with `hash`; `outputByteCount` must be 1…255 × the hash length.
    package static func hkdf(
        inputKeyMaterial ikm: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer, info: UnsafeRawBufferPointer,
        outputByteCount: Int, hash: DigestAlgorithm
    ) throws(CryptographyError) -> [UInt8] {
        guard outputByteCount > 0, outputByteCount <= 255 * hash.outputByteCount else {
            throw CryptographyError(
                CryptographyError.invalidParameter,
                "HKDF output must be 1…\(255 * hash.outputByteCount) bytes, asked for \(outputByteCount)")
        }
        let key = SymmetricKey(data: ikm)
        let derived: SymmetricKey
        switch hash {
        case .sha256:
            derived = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: key, salt: salt, info: info, outputByteCount: outputByteCount)
        case .sha384:
            derived = HKDF<SHA384>.deriveKey(
                inputKeyMaterial: key, salt: salt, info: info, outputByteCount: outputByteCount)
        case .sha512:
            derived = HKDF<SHA512>.deriveKey(
                inputKeyMaterial: key, salt: salt, info: info, outputByteCount: outputByteCount)
        }
        return derived.withUnsafeBytes { Array($0) }
    }

    /// scrypt (RFC 7914) with `CryptoExtras`' `KDF.Scrypt`, memory bounded like the libcrypto backend's
    /// (what the parameters need plus 1 MiB).
    package static func scrypt(
        password: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer, parameters: Scrypt.Parameters,
        outputByteCount: Int
    ) throws(CryptographyError) -> [UInt8] {
        let n = parameters.n
        guard n > 1, n & (n - 1) == 0, parameters.r > 0, parameters.p > 0, outputByteCount > 0,
            let rounds = Int(exactly: n), let blockSize = Int(exactly: parameters.r),
            let parallelism = Int(exactly: parameters.p)
        else {
            throw CryptographyError(
                CryptographyError.invalidParameter, "scrypt needs n a power of two > 1, r > 0, p > 0")
        }
        let maxMemory = Int(clamping: parameters.memoryBytes + 1 << 20)
        do {
            let key = try KDF.Scrypt.deriveKey(
                from: password, salt: salt, outputByteCount: outputByteCount, rounds: rounds,
                blockSize: blockSize, parallelism: parallelism, maxMemory: maxMemory)
            return key.withUnsafeBytes { Array($0) }
        } catch {
            throw CryptographyError(CryptographyError.libraryFailure, "scrypt derivation failed")
        }
    }

    /// Checks an AES key and nonce the way the libcrypto backend does: 16, 24 or 32-byte keys, nonces
    /// of 12…128 bytes (swift-crypto's GCM takes no nonce shorter than 96 bits; Moose always uses 96).
    private static func gcmInputs(key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer) throws(CryptographyError)
        -> (SymmetricKey, AES.GCM.Nonce)
    {
        guard [16, 24, 32].contains(key.count) else {
            throw CryptographyError(
                CryptographyError.invalidKey, "AES key must be 16, 24 or 32 bytes, got \(key.count)")
        }
        guard nonce.count >= AESGCM.nonceByteCount, nonce.count <= 128, let gcmNonce = try? AES.GCM.Nonce(data: nonce)
        else {
            throw CryptographyError(
                CryptographyError.invalidParameter,
                "AES-GCM nonce must be 12…128 bytes with swift-crypto, got \(nonce.count)")
        }
        return (SymmetricKey(data: key), gcmNonce)
    }

    /// AES-GCM seal with an explicit nonce: the ciphertext (as long as `plaintext`) and the 16-byte tag.
    package static func seal(
        _ plaintext: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer
    ) throws(CryptographyError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        let (symmetric, gcmNonce) = try gcmInputs(key: key, nonce: nonce)
        do {
            let box = try AES.GCM.seal(plaintext, using: symmetric, nonce: gcmNonce, authenticating: aad)
            return (Array(box.ciphertext), Array(box.tag))
        } catch {
            throw CryptographyError(CryptographyError.libraryFailure, "AES-GCM seal failed")
        }
    }

    /// AES-GCM open: the plaintext, or `authenticationFailure` if the tag does not verify.
    package static func open(
        ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer,
        nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer
    ) throws(CryptographyError) -> [UInt8] {
        guard tag.count == AESGCM.tagByteCount else {
            throw CryptographyError(
                CryptographyError.authenticationFailure,
                "GCM tag must be \(AESGCM.tagByteCount) bytes, got \(tag.count)")
        }
        let (symmetric, gcmNonce) = try gcmInputs(key: key, nonce: nonce)
        let box: AES.GCM.SealedBox
        do {
            box = try AES.GCM.SealedBox(nonce: gcmNonce, ciphertext: ciphertext, tag: tag)
        } catch {
            throw CryptographyError(CryptographyError.authenticationFailure, "AES-GCM sealed box is malformed")
        }
        do {
            return Array(try AES.GCM.open(box, using: symmetric, authenticating: aad))
        } catch {
            throw CryptographyError(CryptographyError.authenticationFailure, "AES-GCM authentication failed")
        }
    }

    /// Seals into `nonce(12) ‖ ciphertext ‖ tag(16)` with a fresh random nonce: the secret store's format,
    /// byte for byte the libcrypto backend's.
    package static func sealCombined(
        _ plaintext: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer
    ) throws(CryptographyError) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: AESGCM.nonceByteCount)
        nonce.withUnsafeMutableBytes { fillRandom($0) }
        let sealed = try typed { try nonce.withUnsafeBytes { n in try seal(plaintext, key: key, nonce: n, aad: aad) } }
        return nonce + sealed.ciphertext + sealed.tag
    }

    /// Opens `nonce(12) ‖ ciphertext ‖ tag(16)`; `authenticationFailure` if anything changed.
    package static func openCombined(
        _ sealed: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer
    ) throws(CryptographyError) -> [UInt8] {
        let nonceCount = AESGCM.nonceByteCount
        let tagCount = AESGCM.tagByteCount
        guard sealed.count >= nonceCount + tagCount else {
            throw CryptographyError(CryptographyError.authenticationFailure, "sealed value is shorter than nonce + tag")
        }
        let length = sealed.count - nonceCount - tagCount
        return try open(
            ciphertext: UnsafeRawBufferPointer(rebasing: sealed[nonceCount..<(nonceCount + length)]),
            tag: UnsafeRawBufferPointer(rebasing: sealed[(nonceCount + length)...]), key: key,
            nonce: UnsafeRawBufferPointer(rebasing: sealed[0..<nonceCount]), aad: aad)
    }

    /// `true` when both buffers are equal, in time that depends only on their length.
    package static func constantTimeEquals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<a.count { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
#endif
