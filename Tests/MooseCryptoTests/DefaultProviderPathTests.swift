// libcrypto's own fast path: only with the libcrypto backend.
#if MooseLibCrypto
import Foundation
import MooseCrypto
import MooseTestSupport
import Testing

/// The default provider called through its dispatch tables (`DefaultProviderPath`, what `moose`
/// uses to read its store) gives the same answers as EVP: Wycheproof's AES-GCM and HMAC-SHA-256
/// vectors, and EVP's own output over many sizes. The tests call the path's functions directly, so
/// they do not depend on whether this process asked for it.
struct DefaultProviderPathTests {
    typealias W = WycheproofTests

    /// Debian's stock configuration (no FIPS, the default provider only) allows the path; if this
    /// machine's `openssl.cnf` ever changes that, every other test here would test nothing.
    @Test func theStockConfigurationAllowsThePath() {
        #expect(DefaultProviderPath.unavailableReason == nil, "\(DefaultProviderPath.unavailableReason ?? "")")
    }

    @Test func wycheproofAESGCMThroughTheProviderDirectly() throws {
        var count = 0
        for group in try W.load("aes_gcm_test.json", as: W.AEADGroup.self)
        where group.ivSize == 96 && group.tagSize == 128 {
            for test in group.tests {
                let key = SecretKey(W.hex(test.key))
                let opener = try #require(
                    DefaultProviderPath.Opener(key: key), "no direct opener for a \(group.keySize)-bit key")
                let opened = try? W.hex(test.iv).withUnsafeBytes { iv in
                    try W.hex(test.ct).withUnsafeBytes { ct in
                        try W.hex(test.tag).withUnsafeBytes { tag in
                            try W.hex(test.aad).withUnsafeBytes { aad in
                                try opener.open(nonce: iv, ciphertext: ct, tag: tag, aad: aad)
                            }
                        }
                    }
                }
                W.expectOutcome(test, opened == W.hex(test.msg), file: "aes-gcm direct")
                count += 1
            }
        }
        #expect(count > 150)
    }

    @Test func wycheproofHMACSHA256ThroughTheProviderDirectly() throws {
        var count = 0
        for group in try W.load("hmac_sha256_test.json", as: W.PlainGroup.self) {
            for test in group.tests {
                let code = try #require(
                    W.hex(test.key).withUnsafeBytes { key in
                        W.hex(test.msg).withUnsafeBytes { message in
                            DefaultProviderPath.hmacSHA256(key: key, message: message)
                        }
                    })
                let expected = W.hex(test.tag)
                W.expectOutcome(test, Array(code.prefix(expected.count)) == expected, file: "hmac direct")
                count += 1
            }
        }
        #expect(count == 174)
    }

    /// Keys of every size EVP takes, messages from empty to several blocks and long keys (hashed
    /// first): byte for byte what EVP computes, and any changed byte refused.
    @Test func agreesWithEVPAndRefusesAnyChange() throws {
        for keySize in [16, 24, 32] {
            let key = try SecretKey(randomByteCount: keySize)
            let opener = try #require(DefaultProviderPath.Opener(key: key))
            for length in [0, 1, 15, 16, 17, 64, 1000, 4099] {
                let message = try SecureRandom.bytes(count: length)
                let aad = try SecureRandom.bytes(count: length % 40)
                let box = try AESGCM.seal(message, using: key, authenticating: aad)
                let opened = try box.nonce.withUnsafeBytes { iv in
                    try box.ciphertext.withUnsafeBytes { ct in
                        try box.tag.withUnsafeBytes { tag in
                            try aad.withUnsafeBytes { a in try opener.open(nonce: iv, ciphertext: ct, tag: tag, aad: a)
                            }
                        }
                    }
                }
                #expect(opened == message)
                // A flipped bit in the tag, the ciphertext or the AAD: authenticationFailure, no plaintext.
                var badTag = box.tag
                badTag[length % 16] ^= 1
                #expect(throws: CryptographyError.self) {
                    try box.nonce.withUnsafeBytes { iv in
                        try box.ciphertext.withUnsafeBytes { ct in
                            try badTag.withUnsafeBytes { tag in
                                try aad.withUnsafeBytes { a in
                                    try opener.open(nonce: iv, ciphertext: ct, tag: tag, aad: a)
                                }
                            }
                        }
                    }
                }
                if length > 0 {
                    var badText = box.ciphertext
                    badText[length / 2] ^= 0x80
                    #expect(throws: CryptographyError.self) {
                        try box.nonce.withUnsafeBytes { iv in
                            try badText.withUnsafeBytes { ct in
                                try box.tag.withUnsafeBytes { tag in
                                    try aad.withUnsafeBytes { a in
                                        try opener.open(nonce: iv, ciphertext: ct, tag: tag, aad: a)
                                    }
                                }
                            }
                        }
                    }
                }
                let badAAD = aad + [0]
                #expect(throws: CryptographyError.self) {
                    try box.nonce.withUnsafeBytes { iv in
                        try box.ciphertext.withUnsafeBytes { ct in
                            try box.tag.withUnsafeBytes { tag in
                                try badAAD.withUnsafeBytes { a in
                                    try opener.open(nonce: iv, ciphertext: ct, tag: tag, aad: a)
                                }
                            }
                        }
                    }
                }
                // The same opener still works after a failure (the key stays, the nonce is reset).
                let again = try box.nonce.withUnsafeBytes { iv in
                    try box.ciphertext.withUnsafeBytes { ct in
                        try box.tag.withUnsafeBytes { tag in
                            try aad.withUnsafeBytes { a in try opener.open(nonce: iv, ciphertext: ct, tag: tag, aad: a)
                            }
                        }
                    }
                }
                #expect(again == message)
            }
        }
        for keyLength in [0, 1, 32, 63, 64, 65, 200] {
            let keyBytes = try SecureRandom.bytes(count: keyLength)
            for length in [0, 3, 64, 1000] {
                let message = try SecureRandom.bytes(count: length)
                let direct = keyBytes.withUnsafeBytes { k in
                    message.withUnsafeBytes { m in DefaultProviderPath.hmacSHA256(key: k, message: m) }
                }
                let evp = try HMACAuthenticator(key: SecretKey(keyBytes), hash: .sha256).authenticationCode(
                    for: message)
                #expect(direct == evp, "key \(keyLength) bytes, message \(length) bytes")
            }
        }
    }

    /// Only 12-byte nonces and 16-byte tags are taken (the store's format); anything else is refused
    /// before the provider is called.
    @Test func refusesOtherNonceAndTagSizes() throws {
        let key = try SecretKey(randomByteCount: 32)
        let opener = try #require(DefaultProviderPath.Opener(key: key))
        let text = [UInt8](repeating: 1, count: 20)
        for (nonce, tag) in [(8, 16), (16, 16), (12, 12), (12, 0)] {
            #expect(throws: CryptographyError.self) {
                try [UInt8](repeating: 0, count: nonce).withUnsafeBytes { iv in
                    try text.withUnsafeBytes { ct in
                        try [UInt8](repeating: 0, count: tag).withUnsafeBytes { t in
                            try opener.open(
                                nonce: iv, ciphertext: ct, tag: t, aad: UnsafeRawBufferPointer(start: nil, count: 0))
                        }
                    }
                }
            }
        }
        #expect(DefaultProviderPath.Opener(key: SecretKey([UInt8](repeating: 0, count: 20))) == nil)
    }
}
#endif
