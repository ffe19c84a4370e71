#if MooseLibCrypto
internal import CLibCrypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#endif

/// AES-GCM authenticated encryption (NIST SP 800-38D) with 128/192/256-bit keys and a 128-bit tag.
///
/// ```swift
/// let key = try SecretKey(randomByteCount: 32)
/// let box = try AESGCM.seal(Array("secret".utf8), using: key, authenticating: Array("row-1".utf8))
/// let plain = try AESGCM.open(box, using: key, authenticating: Array("row-1".utf8))
/// ```
public enum AESGCM {
    /// The tag length in bytes.
    public static let tagByteCount = 16
    /// The recommended nonce length in bytes (96 bits).
    public static let nonceByteCount = 12

    /// A sealed message: nonce, ciphertext and tag.
    public struct SealedBox: Sendable, Hashable {
        /// The nonce (IV) the message was sealed with.
        public let nonce: [UInt8]
        /// The ciphertext, as long as the plaintext.
        public let ciphertext: [UInt8]
        /// The 16-byte authentication tag.
        public let tag: [UInt8]

        /// A box from its parts.
        public init(nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8]) {
            self.nonce = nonce
            self.ciphertext = ciphertext
            self.tag = tag
        }

        /// `nonce ‖ ciphertext ‖ tag`, with a 12-byte nonce.
        public var combined: [UInt8] { nonce + ciphertext + tag }

        /// Splits `nonce(12) ‖ ciphertext ‖ tag(16)`.
        public init(combined: some Collection<UInt8>) throws(CryptographyError) {
            let bytes = Array(combined)
            guard bytes.count >= AESGCM.nonceByteCount + AESGCM.tagByteCount else {
                throw CryptographyError(
                    CryptographyError.invalidParameter, "sealed box is \(bytes.count) bytes, shorter than nonce + tag")
            }
            nonce = Array(bytes[0..<AESGCM.nonceByteCount])
            ciphertext = Array(bytes[AESGCM.nonceByteCount..<(bytes.count - AESGCM.tagByteCount)])
            tag = Array(bytes[(bytes.count - AESGCM.tagByteCount)...])
        }
    }
}

#if MooseLibCrypto
extension AESGCM {
    /// Encrypts and authenticates `plaintext` and authenticates `aad`.
    ///
    /// - Parameter nonce: leave `nil` for a fresh random 96-bit nonce (the right choice unless a
    ///   test vector fixes it). Never reuse a nonce with the same key.
    public static func seal(
        _ plaintext: some ContiguousBytes,
        using key: SecretKey,
        nonce: [UInt8]? = nil,
        authenticating aad: some ContiguousBytes = [UInt8]()
    ) throws(CryptographyError) -> SealedBox {
        let iv: [UInt8]
        if let nonce { iv = nonce } else { iv = try SecureRandom.bytes(count: nonceByteCount) }
        let ctx = try context(for: key, nonce: iv, encrypt: true)
        var tag = [UInt8](repeating: 0, count: tagByteCount)
        let ciphertext: [UInt8] = try withBytes(aad) { (aadBytes) throws(CryptographyError) in
            try withBytes(plaintext) { (input) throws(CryptographyError) in
                try addAAD(ctx, aadBytes)
                var output = [UInt8](repeating: 0, count: input.count)
                try typed {
                    try output.withUnsafeMutableBufferPointer { (out) throws(CryptographyError) in
                        try update(ctx, input, into: out.baseAddress)
                        var finalLength: Int32 = 0
                        try OpenSSL.check(
                            EVP_EncryptFinal_ex(ctx.pointer, out.baseAddress, &finalLength),
                            "EVP_EncryptFinal_ex failed")
                    }
                }
                return output
            }
        }
        let ok = tag.withUnsafeMutableBytes {
            EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), $0.baseAddress)
        }
        try OpenSSL.check(ok, "reading the GCM tag failed")
        return SealedBox(nonce: iv, ciphertext: ciphertext, tag: tag)
    }

    /// Checks the tag and decrypts. Throws `authenticationFailure` if anything was changed
    /// (ciphertext, nonce, tag, AAD) or the key is not the one that sealed it.
    public static func open(
        _ box: SealedBox,
        using key: SecretKey,
        authenticating aad: some ContiguousBytes = [UInt8]()
    ) throws(CryptographyError) -> [UInt8] {
        guard box.tag.count == tagByteCount else {
            throw CryptographyError(
                CryptographyError.authenticationFailure, "GCM tag must be \(tagByteCount) bytes, got \(box.tag.count)")
        }
        if box.nonce.count == nonceByteCount, DefaultProviderPath.isActive,
            let opener = DefaultProviderPath.Opener(key: key)
        {
            return try withBytes(aad) { (aadBytes) throws(CryptographyError) in
                try typed {
                    try box.nonce.withUnsafeBytes { nonce in
                        try box.ciphertext.withUnsafeBytes { ciphertext in
                            try box.tag.withUnsafeBytes { tag in
                                try opener.open(nonce: nonce, ciphertext: ciphertext, tag: tag, aad: aadBytes)
                            }
                        }
                    }
                }
            }
        }
        let ctx = try context(for: key, nonce: box.nonce, encrypt: false)
        var tag = box.tag
        let tagSet = tag.withUnsafeMutableBytes {
            EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), $0.baseAddress)
        }
        try OpenSSL.check(tagSet, "setting the GCM tag failed")
        return try withBytes(aad) { (aadBytes) throws(CryptographyError) in
            try typed {
                try box.ciphertext.withUnsafeBytes { (input) throws(CryptographyError) in
                    try decryptVerifying(ctx, input, aad: aadBytes)
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

    /// The fetched AES-GCM cipher for `key`'s size (16, 24 or 32 bytes).
    fileprivate static func cipher(for key: SecretKey) throws(CryptographyError) -> OpaquePointer? {
        switch key.byteCount {
        case 16: Fetched.aes128gcm
        case 24: Fetched.aes192gcm
        case 32: Fetched.aes256gcm
        default:
            throw CryptographyError(
                CryptographyError.invalidKey, "AES key must be 16, 24 or 32 bytes, got \(key.byteCount)")
        }
    }

    private static func context(for key: SecretKey, nonce: [UInt8], encrypt: Bool) throws(CryptographyError)
        -> CipherContext
    {
        try nonce.withUnsafeBufferPointer { (iv) throws(CryptographyError) in
            try context(for: key, nonce: iv, encrypt: encrypt)
        }
    }

    private static func context(for key: SecretKey, nonce: UnsafeBufferPointer<UInt8>, encrypt: Bool)
        throws(CryptographyError) -> CipherContext
    {
        let cipher = try AESGCM.cipher(for: key)
        guard !nonce.isEmpty else {
            throw CryptographyError(CryptographyError.invalidParameter, "AES-GCM nonce must not be empty")
        }
        let ctx = try CipherContext()
        let initCipher =
            encrypt
            ? EVP_EncryptInit_ex2(ctx.pointer, cipher, nil, nil, nil)
            : EVP_DecryptInit_ex2(ctx.pointer, cipher, nil, nil, nil)
        try OpenSSL.check(initCipher, "AES-GCM init failed")
        if nonce.count != nonceByteCount {
            try OpenSSL.check(
                EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_GCM_SET_IVLEN, Int32(nonce.count), nil),
                "setting the GCM nonce length failed")
        }
        let keyed = key.withUnsafeBytes { keyBytes in
            encrypt
                ? EVP_EncryptInit_ex2(ctx.pointer, nil, base(keyBytes), nonce.baseAddress, nil)
                : EVP_DecryptInit_ex2(ctx.pointer, nil, base(keyBytes), nonce.baseAddress, nil)
        }
        try OpenSSL.check(keyed, "AES-GCM key/nonce setup failed")
        return ctx
    }

    /// With key, nonce and tag already set on `ctx`: adds `aad`, decrypts `ciphertext` and checks the
    /// tag. On a mismatch the plaintext is wiped and `authenticationFailure` thrown.
    fileprivate static func decryptVerifying(
        _ ctx: CipherContext, _ ciphertext: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer
    ) throws(CryptographyError) -> [UInt8] {
        try addAAD(ctx, aad)
        var output = [UInt8](repeating: 0, count: ciphertext.count)
        let verified: Bool = try typed {
            try output.withUnsafeMutableBufferPointer { (out) throws(CryptographyError) -> Bool in
                try update(ctx, ciphertext, into: out.baseAddress)
                var finalLength: Int32 = 0
                return EVP_DecryptFinal_ex(ctx.pointer, out.baseAddress, &finalLength) == 1
            }
        }
        guard verified else {
            OpenSSL.clearErrors()
            output.withUnsafeMutableBytes { cleanse($0) }
            throw CryptographyError(CryptographyError.authenticationFailure, "AES-GCM authentication failed")
        }
        return output
    }

    fileprivate static func addAAD(_ ctx: CipherContext, _ aad: UnsafeRawBufferPointer) throws(CryptographyError) {
        guard aad.count > 0 else { return }
        var unused: Int32 = 0
        try OpenSSL.check(
            EVP_CipherUpdate(ctx.pointer, nil, &unused, base(aad), Int32(aad.count)), "AES-GCM AAD failed")
    }

    fileprivate static func update(
        _ ctx: CipherContext, _ input: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<UInt8>?
    ) throws(CryptographyError) {
        guard input.count > 0 else { return }
        guard input.count <= Int(Int32.max) else {
            throw CryptographyError(CryptographyError.invalidParameter, "message too large for one AES-GCM call")
        }
        var written: Int32 = 0
        try OpenSSL.check(
            EVP_CipherUpdate(ctx.pointer, output, &written, base(input), Int32(input.count)), "AES-GCM update failed")
    }
}

extension AESGCM {
    /// An AES-GCM context keyed once and reused for many messages: no re-keying, no allocation per
    /// message. **Not thread-safe**: one user at a time (the secret store uses it under its lock).
    ///
    /// ```swift
    /// let context = try AESGCM.Context(key: key)
    /// let sealed = try context.sealCombined(plaintext, authenticating: aad)
    /// let opened = try context.openCombined(sealed, authenticating: aad)
    /// ```
    public final class Context {
        private let key: SecretKey
        private var encryptorStorage: CipherContext?
        private let decryptor: Decryptor

        /// How this context opens: EVP, or the default provider directly (`DefaultProviderPath`,
        /// when the program asked for it and libcrypto's configuration allows it).
        private enum Decryptor {
            case evp(CipherContext)
            case direct(DefaultProviderPath.Opener)
        }

        /// Keys the context (16, 24 or 32-byte key). The encrypting side is keyed on first seal.
        public init(key: SecretKey) throws(CryptographyError) {
            self.key = key
            if DefaultProviderPath.isActive, let opener = DefaultProviderPath.Opener(key: key) {
                decryptor = .direct(opener)
                return
            }
            let cipher = try AESGCM.cipher(for: key)
            let evp = try CipherContext()
            let ok = key.withUnsafeBytes { keyBytes in
                EVP_DecryptInit_ex2(evp.pointer, cipher, base(keyBytes), nil, nil) == 1
            }
            guard ok else { throw OpenSSL.error(CryptographyError.libraryFailure, "AES-GCM key setup failed") }
            decryptor = .evp(evp)
        }

        /// The encrypting EVP context, keyed on first use.
        private func encryptor() throws(CryptographyError) -> CipherContext {
            if let encryptorStorage { return encryptorStorage }
            let cipher = try AESGCM.cipher(for: key)
            let evp = try CipherContext()
            let ok = key.withUnsafeBytes { keyBytes in
                EVP_EncryptInit_ex2(evp.pointer, cipher, base(keyBytes), nil, nil) == 1
            }
            guard ok else { throw OpenSSL.error(CryptographyError.libraryFailure, "AES-GCM key setup failed") }
            encryptorStorage = evp
            return evp
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

        private func seal(_ input: UnsafeRawBufferPointer, _ aadBytes: UnsafeRawBufferPointer) throws(CryptographyError)
            -> [UInt8]
        {
            let encryptor = try encryptor()
            var output = [UInt8](repeating: 0, count: nonceByteCount + input.count + tagByteCount)
            let failure: CryptographyError? = output.withUnsafeMutableBufferPointer { out in
                do throws(CryptographyError) {
                    let base = out.baseAddress!
                    try SecureRandom.fill(UnsafeMutableRawBufferPointer(start: base, count: nonceByteCount))
                    try OpenSSL.check(
                        EVP_EncryptInit_ex2(encryptor.pointer, nil, nil, base, nil), "AES-GCM nonce setup failed")
                    try AESGCM.addAAD(encryptor, aadBytes)
                    try AESGCM.update(encryptor, input, into: base + nonceByteCount)
                    var finalLength: Int32 = 0
                    try OpenSSL.check(
                        EVP_EncryptFinal_ex(encryptor.pointer, base + nonceByteCount + input.count, &finalLength),
                        "EVP_EncryptFinal_ex failed")
                    try OpenSSL.check(
                        EVP_CIPHER_CTX_ctrl(
                            encryptor.pointer, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount),
                            base + nonceByteCount + input.count), "reading the GCM tag failed")
                    return nil
                } catch {
                    return error
                }
            }
            if let failure { throw failure }
            return output
        }

        /// Opens `nonce(12) ‖ ciphertext ‖ tag(16)`; throws `authenticationFailure` if anything changed.
        public func openCombined(_ combined: some ContiguousBytes, authenticating aad: some ContiguousBytes)
            throws(CryptographyError) -> [UInt8]
        {
            try withBytes(combined) { (sealed) throws(CryptographyError) -> [UInt8] in
                try withBytes(aad) { (aadBytes) throws(CryptographyError) -> [UInt8] in try open(sealed, aadBytes) }
            }
        }

        private func open(_ sealed: UnsafeRawBufferPointer, _ aadBytes: UnsafeRawBufferPointer)
            throws(CryptographyError) -> [UInt8]
        {
            guard sealed.count >= nonceByteCount + tagByteCount, let start = sealed.baseAddress else {
                throw CryptographyError(
                    CryptographyError.authenticationFailure, "sealed value is shorter than nonce + tag")
            }
            let bytes = start.assumingMemoryBound(to: UInt8.self)
            let length = sealed.count - nonceByteCount - tagByteCount
            let decryptor: CipherContext
            switch self.decryptor {
            case .direct(let opener):
                return try opener.open(
                    nonce: UnsafeRawBufferPointer(start: bytes, count: nonceByteCount),
                    ciphertext: UnsafeRawBufferPointer(start: bytes + nonceByteCount, count: length),
                    tag: UnsafeRawBufferPointer(start: bytes + nonceByteCount + length, count: tagByteCount),
                    aad: aadBytes)
            case .evp(let evp):
                decryptor = evp
            }
            try OpenSSL.check(
                EVP_DecryptInit_ex2(decryptor.pointer, nil, nil, bytes, nil), "AES-GCM nonce setup failed")
            try OpenSSL.check(
                EVP_CIPHER_CTX_ctrl(
                    decryptor.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount),
                    UnsafeMutableRawPointer(mutating: bytes + nonceByteCount + length)),
                "setting the GCM tag failed")
            return try AESGCM.decryptVerifying(
                decryptor, UnsafeRawBufferPointer(start: bytes + nonceByteCount, count: length),
                aad: aadBytes)
        }
    }
}
#endif
