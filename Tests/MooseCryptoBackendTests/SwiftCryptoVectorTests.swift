// The Wycheproof vectors MooseCryptoTests runs on the public API, run here on the swift-crypto backend
// directly, so the build with both backends (tools/test's main build) checks both against the same cases.
// (tools/test-swift-crypto runs MooseCryptoTests and MooseJWTTests themselves on swift-crypto alone.)
#if MooseSwiftCrypto && MooseLibCrypto
import Foundation
import MooseCrypto
import MooseTestSupport
import Testing

struct SwiftCryptoVectorTests {
    struct File<Group: Decodable>: Decodable { let testGroups: [Group] }
    struct Case: Decodable {
        let tcId: Int
        let result: String
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
    struct ECKey: Decodable { let wx: String; let wy: String }
    struct ECGroup: Decodable { let publicKey: ECKey; let publicKeyPem: String; let tests: [Case] }
    struct EdKey: Decodable { let pk: String }
    struct EdGroup: Decodable { let publicKey: EdKey; let tests: [Case] }
    struct RSAKey: Decodable { let modulus: String; let publicExponent: String }
    struct RSAGroup: Decodable { let publicKey: RSAKey; let publicKeyPem: String; let tests: [Case] }
    struct PlainGroup: Decodable { let tests: [Case] }
    struct AEADGroup: Decodable { let ivSize: Int; let tests: [Case] }

    static func load<G: Decodable>(_ name: String, as: G.Type) throws -> [G] {
        try JSONDecoder().decode(File<G>.self, from: Fixtures.data("wycheproof/\(name)")).testGroups
    }

    static func hex(_ string: String?) -> [UInt8] { Hex.decode(string ?? "") ?? [] }

    static func coordinate(_ string: String, size: Int) -> [UInt8] {
        var bytes = hex(string.count % 2 == 1 ? "0" + string : string)
        while bytes.count > size, bytes.first == 0 { bytes.removeFirst() }
        return [UInt8](repeating: 0, count: max(0, size - bytes.count)) + bytes
    }

    /// `valid` must pass and `invalid` must fail; `acceptable` is either (Wycheproof's rule).
    static func check(_ test: Case, _ passed: Bool, _ file: String) {
        switch test.result {
        case "valid": #expect(passed, "\(file) tcId \(test.tcId) should pass on swift-crypto")
        case "invalid": #expect(!passed, "\(file) tcId \(test.tcId) should fail on swift-crypto")
        default: break
        }
    }

    @Test(arguments: [
        ("ecdsa_secp256r1_sha256_p1363_test.json", EllipticCurve.p256, DigestAlgorithm.sha256),
        ("ecdsa_secp384r1_sha384_p1363_test.json", .p384, .sha384),
        ("ecdsa_secp521r1_sha512_p1363_test.json", .p521, .sha512)
    ])
    func ecdsa(file: String, curve: EllipticCurve, hash: DigestAlgorithm) throws {
        var count = 0
        for group in try Self.load(file, as: ECGroup.self) {
            let size = curve.coordinateByteCount
            let key = try SwiftCryptoPublicKey(
                curve: curve, x: Self.coordinate(group.publicKey.wx, size: size),
                y: Self.coordinate(group.publicKey.wy, size: size))
            #expect(try SwiftCryptoPublicKey(pem: group.publicKeyPem).ecCoordinates?.x == key.ecCoordinates?.x)
            for test in group.tests {
                Self.check(test, try swiftVerify(key, Self.hex(test.sig), Self.hex(test.msg), .ecdsa(hash)), file)
                count += 1
            }
        }
        #expect(count > 200)
    }

    @Test func ed25519() throws {
        var count = 0
        for group in try Self.load("ed25519_test.json", as: EdGroup.self) {
            let key = try SwiftCryptoPublicKey(ed25519: Self.hex(group.publicKey.pk))
            for test in group.tests {
                Self.check(test, try swiftVerify(key, Self.hex(test.sig), Self.hex(test.msg), .ed25519), "ed25519")
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
        for group in try Self.load(file, as: RSAGroup.self) {
            var modulus = Self.hex(group.publicKey.modulus)
            while modulus.first == 0 { modulus.removeFirst() }
            let key = try SwiftCryptoPublicKey(rsaModulus: modulus, exponent: Self.hex(group.publicKey.publicExponent))
            #expect(try SwiftCryptoPublicKey(pem: group.publicKeyPem).rsaComponents?.modulus == modulus)
            for test in group.tests {
                Self.check(test, try swiftVerify(key, Self.hex(test.sig), Self.hex(test.msg), algorithm), file)
                count += 1
            }
        }
        #expect(count > 100)
    }

    @Test func hmacAndHKDF() throws {
        var count = 0
        for group in try Self.load("hmac_sha256_test.json", as: PlainGroup.self) {
            for test in group.tests {
                let expected = Self.hex(test.tag)
                let full = Self.hex(test.key).withUnsafeBytes { k in
                    Self.hex(test.msg).withUnsafeBytes { SwiftCryptoBackend.hmac(key: k, message: $0, hash: .sha256) }
                }
                Self.check(test, Array(full.prefix(expected.count)) == expected, "hmac")
                count += 1
            }
        }
        for group in try Self.load("hkdf_sha256_test.json", as: PlainGroup.self) {
            for test in group.tests {
                let derived = try? Self.hex(test.ikm).withUnsafeBytes { i in
                    try Self.hex(test.salt).withUnsafeBytes { s in
                        try Self.hex(test.info).withUnsafeBytes { n in
                            try SwiftCryptoBackend.hkdf(
                                inputKeyMaterial: i, salt: s, info: n, outputByteCount: test.size ?? 0, hash: .sha256)
                        }
                    }
                }
                Self.check(test, derived == Self.hex(test.okm), "hkdf")
                count += 1
            }
        }
        #expect(count == 174 + 86)
    }

    /// Every case with a nonce of 96…1024 bits (swift-crypto's GCM takes no shorter nonce; the backend
    /// refuses longer ones, as libcrypto does): opened, and for `valid` ones sealed to the same bytes.
    @Test func aesGCM() throws {
        var count = 0
        for group in try Self.load("aes_gcm_test.json", as: AEADGroup.self) {
            for test in group.tests {
                let key = Self.hex(test.key), nonce = Self.hex(test.iv), aad = Self.hex(test.aad)
                let ciphertext = Self.hex(test.ct), tag = Self.hex(test.tag), message = Self.hex(test.msg)
                guard (96...1024).contains(group.ivSize) else {
                    expectCode(CryptographyError.invalidParameter) {
                        try key.withUnsafeBytes { k in
                            try nonce.withUnsafeBytes { n in
                                try message.withUnsafeBytes { m in
                                    try SwiftCryptoBackend.seal(m, key: k, nonce: n, aad: m)
                                }
                            }
                        }
                    }
                    continue
                }
                let opened = try? ciphertext.withUnsafeBytes { c in
                    try tag.withUnsafeBytes { t in
                        try key.withUnsafeBytes { k in
                            try nonce.withUnsafeBytes { n in
                                try aad.withUnsafeBytes { a in
                                    try SwiftCryptoBackend.open(ciphertext: c, tag: t, key: k, nonce: n, aad: a)
                                }
                            }
                        }
                    }
                }
                Self.check(test, opened == message, "aes-gcm")
                if test.result == "valid" {
                    let sealed = try message.withUnsafeBytes { m in
                        try key.withUnsafeBytes { k in
                            try nonce.withUnsafeBytes { n in
                                try aad.withUnsafeBytes { a in try SwiftCryptoBackend.seal(m, key: k, nonce: n, aad: a)
                                }
                            }
                        }
                    }
                    #expect(sealed.ciphertext == ciphertext && sealed.tag == tag, "aes-gcm tcId \(test.tcId) seal")
                }
                count += 1
            }
        }
        #expect(count > 250)
    }
}
#endif
