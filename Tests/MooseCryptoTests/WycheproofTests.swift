import Foundation
import MooseCrypto
import MooseTestSupport
import Testing

/// Project Wycheproof vectors (Fixtures/wycheproof, Apache-2.0): every `valid` case must pass,
/// every `invalid` case must fail. The only `acceptable` case (RSA PKCS#1, tcId with flag
/// "SmallModulus"-style quirks) is reported below, not asserted either way.
struct WycheproofTests {
    struct File<Group: Decodable>: Decodable {
        let testGroups: [Group]
    }

    struct Case: Decodable {
        let tcId: Int
        let comment: String
        let result: String
        let flags: [String]
        let msg: String?
        let sig: String?
        let key: String?
        let iv: String?
        let aad: String?
        let ct: String?
        let tag: String?
        let ikm: String?
        let salt: String?
        let info: String?
        let size: Int?
        let okm: String?
    }

    struct ECKey: Decodable { let curve: String; let wx: String; let wy: String }
    struct ECGroup: Decodable { let publicKey: ECKey; let publicKeyPem: String; let tests: [Case] }
    struct EdKey: Decodable { let pk: String }
    struct EdGroup: Decodable { let publicKey: EdKey; let tests: [Case] }
    struct RSAKey: Decodable { let modulus: String; let publicExponent: String }
    struct RSAGroup: Decodable { let publicKey: RSAKey; let publicKeyPem: String; let tests: [Case] }
    struct PlainGroup: Decodable { let tests: [Case] }
    struct AEADGroup: Decodable { let keySize: Int; let ivSize: Int; let tagSize: Int; let tests: [Case] }

    static func load<G: Decodable>(_ name: String, as: G.Type) throws -> [G] {
        try JSONDecoder().decode(File<G>.self, from: Fixtures.data("wycheproof/\(name)")).testGroups
    }

    static func hex(_ string: String?) -> [UInt8] {
        Hex.decode(string ?? "") ?? []
    }

    /// Wycheproof big integers are signed big-endian hex; strip the sign padding and left-pad to `size`.
    static func coordinate(_ string: String, size: Int) -> [UInt8] {
        var bytes = hex(string.count % 2 == 1 ? "0" + string : string)
        while bytes.count > size, bytes.first == 0 { bytes.removeFirst() }
        return [UInt8](repeating: 0, count: max(0, size - bytes.count)) + bytes
    }

    static func expectOutcome(_ test: Case, _ passed: Bool, file: String) {
        switch test.result {
        case "valid": #expect(passed, "\(file) tcId \(test.tcId) (\(test.comment)) should pass")
        case "invalid": #expect(!passed, "\(file) tcId \(test.tcId) (\(test.comment), \(test.flags)) should fail")
        default: break // acceptable: either outcome is allowed by Wycheproof
        }
    }

    @Test(arguments: [
        ("ecdsa_secp256r1_sha256_p1363_test.json", EllipticCurve.p256, DigestAlgorithm.sha256),
        ("ecdsa_secp384r1_sha384_p1363_test.json", .p384, .sha384),
        ("ecdsa_secp521r1_sha512_p1363_test.json", .p521, .sha512)
    ])
    func ecdsaP1363(file: String, curve: EllipticCurve, hash: DigestAlgorithm) throws {
        var count = 0
        for group in try Self.load(file, as: ECGroup.self) {
            let size = curve.coordinateByteCount
            let key = try PublicKey(
                curve: curve, x: Self.coordinate(group.publicKey.wx, size: size),
                y: Self.coordinate(group.publicKey.wy, size: size))
            // The PEM form of the same key must import to the same point.
            let pemKey = try PublicKey(pem: group.publicKeyPem)
            #expect(pemKey.ecCoordinates?.x == key.ecCoordinates?.x)
            for test in group.tests {
                let ok = try key.isValidSignature(Self.hex(test.sig), for: Self.hex(test.msg), algorithm: .ecdsa(hash))
                Self.expectOutcome(test, ok, file: file)
                count += 1
            }
        }
        #expect(count > 200)
    }

    @Test func ed25519() throws {
        var count = 0
        for group in try Self.load("ed25519_test.json", as: EdGroup.self) {
            let key = try PublicKey(ed25519: Self.hex(group.publicKey.pk))
            for test in group.tests {
                let ok = try key.isValidSignature(Self.hex(test.sig), for: Self.hex(test.msg), algorithm: .ed25519)
                Self.expectOutcome(test, ok, file: "ed25519")
                count += 1
            }
        }
        #expect(count == 150)
    }

    @Test(arguments: [
        ("rsa_signature_2048_sha256_test.json", SignatureAlgorithm.rsaPKCS1v15(.sha256)),
        ("rsa_pss_2048_sha256_mgf1_32_test.json", .rsaPSS(.sha256))
    ])
    func rsa(file: String, algorithm: SignatureAlgorithm) throws {
        var count = 0
        var acceptable: [Int] = []
        for group in try Self.load(file, as: RSAGroup.self) {
            var modulus = Self.hex(group.publicKey.modulus)
            while modulus.first == 0 { modulus.removeFirst() }
            let key = try PublicKey(rsaModulus: modulus, exponent: Self.hex(group.publicKey.publicExponent))
            let pemKey = try PublicKey(pem: group.publicKeyPem)
            #expect(pemKey.rsaComponents?.modulus == modulus)
            for test in group.tests {
                let ok = try key.isValidSignature(Self.hex(test.sig), for: Self.hex(test.msg), algorithm: algorithm)
                Self.expectOutcome(test, ok, file: file)
                if test.result == "acceptable" { acceptable.append(test.tcId) }
                count += 1
            }
        }
        #expect(count > 100)
        // Documented in README ("Test vectors"): the one `acceptable` PKCS#1 case is rejected by libcrypto.
        #expect(acceptable.count <= 1)
    }

    @Test func hmacSHA256() throws {
        var count = 0
        for group in try Self.load("hmac_sha256_test.json", as: PlainGroup.self) {
            for test in group.tests {
                let mac = try HMACAuthenticator(key: SecretKey(Self.hex(test.key)), hash: .sha256)
                let expected = Self.hex(test.tag)
                let full = try mac.authenticationCode(for: Self.hex(test.msg))
                // Wycheproof's tags may be truncated; JOSE never truncates, so compare the prefix here
                // and check that the full-length verifier rejects a truncated tag.
                let ok = Array(full.prefix(expected.count)) == expected
                Self.expectOutcome(test, ok, file: "hmac")
                if expected.count < 32 {
                    #expect(!mac.isValidAuthenticationCode(expected, for: Self.hex(test.msg)))
                } else {
                    #expect(
                        mac.isValidAuthenticationCode(expected, for: Self.hex(test.msg)) == (test.result == "valid"))
                }
                count += 1
            }
        }
        #expect(count == 174)
    }

    @Test func hkdfSHA256() throws {
        var count = 0
        for group in try Self.load("hkdf_sha256_test.json", as: PlainGroup.self) {
            for test in group.tests {
                let derived = try? HKDFDerivation.deriveKey(
                    inputKeyMaterial: Self.hex(test.ikm), salt: Self.hex(test.salt),
                    info: Self.hex(test.info), outputByteCount: test.size ?? 0, hash: .sha256)
                let bytes = derived.map { $0.withUnsafeBytes { Array($0) } }
                Self.expectOutcome(test, bytes == Self.hex(test.okm), file: "hkdf")
                count += 1
            }
        }
        #expect(count == 86)
    }

    @Test func aesGCM() throws {
        var count = 0
        var skipped = 0
        for group in try Self.load("aes_gcm_test.json", as: AEADGroup.self) {
            // OpenSSL 3.0's GCM accepts nonces of 1…128 bytes; Wycheproof's 2056-bit-nonce group is
            // outside that (documented in README). Moose itself always uses 96-bit nonces.
            // swift-crypto's GCM takes nonces of 96 bits or more: with MooseCrypto on swift-crypto alone
            // (trait MooseSwiftCrypto), a shorter nonce is refused as an invalid parameter (README).
            var nonceRefused = group.ivSize > 1024
            #if !MooseLibCrypto
            nonceRefused = nonceRefused || group.ivSize < 96
            #endif
            if nonceRefused {
                for test in group.tests {
                    let box = AESGCM.SealedBox(
                        nonce: Self.hex(test.iv), ciphertext: Self.hex(test.ct), tag: Self.hex(test.tag))
                    #expect(throws: CryptographyError.self) {
                        try AESGCM.open(box, using: SecretKey(Self.hex(test.key)))
                    }
                    skipped += 1
                }
                continue
            }
            for test in group.tests {
                let key = SecretKey(Self.hex(test.key))
                let box = AESGCM.SealedBox(
                    nonce: Self.hex(test.iv), ciphertext: Self.hex(test.ct), tag: Self.hex(test.tag))
                let opened = try? AESGCM.open(box, using: key, authenticating: Self.hex(test.aad))
                let decryptedOK = opened == Self.hex(test.msg)
                Self.expectOutcome(test, decryptedOK, file: "aes-gcm")
                if group.ivSize == 96 {
                    // The reusable context (used by the secret store) on the combined form, same outcome.
                    let context = try AESGCM.Context(key: key)
                    let combined = Self.hex(test.iv) + Self.hex(test.ct) + Self.hex(test.tag)
                    let viaContext =
                        (try? context.openCombined(combined, authenticating: Self.hex(test.aad))) == Self.hex(test.msg)
                    Self.expectOutcome(test, viaContext, file: "aes-gcm context")
                    if test.result == "valid" {
                        let resealed = try context.sealCombined(Self.hex(test.msg), authenticating: Self.hex(test.aad))
                        #expect(
                            try context.openCombined(resealed, authenticating: Self.hex(test.aad)) == Self.hex(test.msg)
                        )
                    }
                }
                if test.result == "valid" {
                    // Sealing with the same nonce reproduces the vector exactly.
                    let sealed = try AESGCM.seal(
                        Self.hex(test.msg), using: key, nonce: Self.hex(test.iv),
                        authenticating: Self.hex(test.aad))
                    #expect(
                        sealed.ciphertext == Self.hex(test.ct) && sealed.tag == Self.hex(test.tag),
                        "aes-gcm tcId \(test.tcId) seal")
                }
                count += 1
            }
        }
        #if MooseLibCrypto
        #expect(count + skipped == 316 && skipped < 10)
        #else
        #expect(count + skipped == 316 && skipped < 50)
        #endif
    }
}
