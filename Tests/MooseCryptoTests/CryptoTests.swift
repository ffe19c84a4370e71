import Foundation
import MooseCrypto
import MooseTestSupport
import Testing

struct CryptoTests {
    @Test func sha2KnownAnswers() {
        // FIPS 180-2 "abc" vectors.
        #expect(
            Hex.encode(DigestAlgorithm.sha256.hash(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            Hex.encode(DigestAlgorithm.sha384.hash(Array("abc".utf8))).hasPrefix("cb00753f45a35e8bb5a03d699ac65007"))
        #expect(
            Hex.encode(DigestAlgorithm.sha512.hash(Array("abc".utf8))).hasPrefix("ddaf35a193617abacc417349ae204131"))
    }

    @Test func randomBytesDiffer() throws {
        let a = try SecureRandom.bytes(count: 32)
        let b = try SecureRandom.bytes(count: 32)
        #expect(a.count == 32 && a != b)
        #expect(try SecureRandom.bytes(count: 0).isEmpty)
    }

    @Test func constantTimeEquality() {
        #expect(ConstantTime.equals([1, 2, 3] as [UInt8], [1, 2, 3] as [UInt8]))
        #expect(!ConstantTime.equals([1, 2, 3] as [UInt8], [1, 2, 4] as [UInt8]))
        #expect(!ConstantTime.equals([1, 2, 3] as [UInt8], [1, 2] as [UInt8]))
        #expect(ConstantTime.equals([UInt8](), [UInt8]()))
    }

    @Test func aesGCMRejectsTamperingAndWrongAAD() throws {
        let key = try SecretKey(randomByteCount: 32)
        let box = try AESGCM.seal(Array("refresh-token".utf8), using: key, authenticating: Array("ns/name/1".utf8))
        #expect(box.nonce.count == 12)
        #expect(
            try AESGCM.open(box, using: key, authenticating: Array("ns/name/1".utf8)) == Array("refresh-token".utf8))
        #expect(throws: CryptographyError.self) {
            try AESGCM.open(box, using: key, authenticating: Array("ns/other/1".utf8))
        }
        var flipped = box.ciphertext
        flipped[0] ^= 1
        let tampered = AESGCM.SealedBox(nonce: box.nonce, ciphertext: flipped, tag: box.tag)
        do {
            _ = try AESGCM.open(tampered, using: key, authenticating: Array("ns/name/1".utf8))
            Issue.record("tampered ciphertext opened")
        } catch CryptographyError.authenticationFailure {
        } catch { Issue.record("wrong error \(error)") }
        let combined = try AESGCM.SealedBox(combined: box.combined)
        #expect(combined == box)
        #expect(throws: CryptographyError.self) { try AESGCM.SealedBox(combined: [UInt8](repeating: 0, count: 27)) }
        #expect(throws: CryptographyError.self) {
            try AESGCM.seal([UInt8](), using: SecretKey([UInt8](repeating: 0, count: 20)))
        }
    }

    @Test(arguments: [
        (PrivateKey.GenerationSpec.rsa(bits: 2048), SignatureAlgorithm.rsaPKCS1v15(.sha256)),
        (.rsa(bits: 2048), .rsaPSS(.sha384)),
        (.ec(.p256), .ecdsa(.sha256)),
        (.ec(.p384), .ecdsa(.sha384)),
        (.ec(.p521), .ecdsa(.sha512)),
        (.ed25519, .ed25519)
    ])
    func signVerifyRoundTrip(spec: PrivateKey.GenerationSpec, algorithm: SignatureAlgorithm) throws {
        let key = try PrivateKey.generate(spec)
        let message = Array("the quick brown moose".utf8)
        let signature = try key.signature(for: message, algorithm: algorithm)
        let publicKey = try key.publicKey()
        #expect(try publicKey.isValidSignature(signature, for: message, algorithm: algorithm))
        #expect(try !publicKey.isValidSignature(signature, for: Array("other".utf8), algorithm: algorithm))
        if case .ec(let curve) = spec { #expect(signature.count == 2 * curve.coordinateByteCount) }
        // PEM round trips keep the key.
        let reread = try PublicKey(pem: publicKey.pemRepresentation())
        #expect(try reread.isValidSignature(signature, for: message, algorithm: algorithm))
        let rereadPrivate = try PrivateKey(pem: key.pemRepresentation())
        #expect(
            try publicKey.isValidSignature(
                rereadPrivate.signature(for: message, algorithm: algorithm),
                for: message, algorithm: algorithm))
    }

    @Test func algorithmMustMatchKeyType() throws {
        let ec = try PrivateKey.generate(.ec(.p256)).publicKey()
        do {
            _ = try ec.isValidSignature(
                [UInt8](repeating: 1, count: 64), for: [UInt8](), algorithm: .rsaPKCS1v15(.sha256))
            Issue.record("RSA algorithm accepted an EC key")
        } catch CryptographyError.algorithmMismatch {
        } catch { Issue.record("wrong error \(error)") }
    }

    @Test func ecdsaDERConversionIsStrict() throws {
        var raw = [UInt8](repeating: 0, count: 64)
        raw[31] = 1; raw[63] = 0x80
        let der = try #require(ECDSASignature.der(fromRaw: raw, curve: .p256))
        #expect(der == [0x30, 0x07, 0x02, 0x01, 0x01, 0x02, 0x02, 0x00, 0x80])
        #expect(ECDSASignature.raw(fromDER: der, curve: .p256) == raw)
        #expect(ECDSASignature.raw(fromDER: der + [0], curve: .p256) == nil) // trailing byte
        #expect(
            // non-minimal
            ECDSASignature.raw(fromDER: [0x30, 0x07, 0x02, 0x02, 0x00, 0x01, 0x02, 0x01, 0x01], curve: .p256) == nil)
        // negative
        #expect(ECDSASignature.raw(fromDER: [0x30, 0x06, 0x02, 0x01, 0x81, 0x02, 0x01, 0x01], curve: .p256) == nil)
        #expect(
            // long-form length < 128
            ECDSASignature.raw(fromDER: [0x30, 0x81, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01], curve: .p256) == nil)
        #expect(ECDSASignature.der(fromRaw: [UInt8](repeating: 0, count: 64), curve: .p256) == nil) // r = s = 0
        #expect(ECDSASignature.der(fromRaw: [UInt8](repeating: 1, count: 63), curve: .p256) == nil) // wrong length
    }

    @Test func ecPointMustBeOnCurve() {
        let x = [UInt8](repeating: 1, count: 32)
        #expect(throws: CryptographyError.self) { try PublicKey(curve: .p256, x: x, y: x) }
        #expect(throws: CryptographyError.self) { try PublicKey(curve: .p256, x: [1], y: [2]) }
    }

    @Test func badKeyMaterialGetsClearErrors() {
        do {
            _ = try PublicKey(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
            Issue.record("garbage PEM accepted")
        } catch {
            #expect(error.code == CryptographyError.invalidKey)
            #expect(!error.description.isEmpty)
        }
        #expect(throws: CryptographyError.self) { try PublicKey(ed25519: [1, 2, 3]) }
        #expect(throws: CryptographyError.self) { try PrivateKey.generate(.rsa(bits: 1024)) }
    }

    @Test func scryptRFC7914Vector() throws {
        // RFC 7914 §12, second vector: P="password", S="NaCl", N=1024, r=8, p=16, dkLen=64.
        let key = try Scrypt.deriveKey(
            password: Array("password".utf8), salt: Array("NaCl".utf8),
            parameters: .init(n: 1024, r: 8, p: 16), outputByteCount: 64)
        let hex = key.withUnsafeBytes { Hex.encode($0) }
        #expect(hex.hasPrefix("fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162"))
        #expect(throws: CryptographyError.self) {
            try Scrypt.deriveKey(password: [UInt8](), salt: [UInt8](), parameters: .init(n: 1000, r: 8, p: 1))
        }
    }

    @Test func hkdfRFC5869Case1() throws {
        let okm = try HKDFDerivation.deriveKey(
            inputKeyMaterial: [UInt8](repeating: 0x0b, count: 22),
            salt: Hex.decode("000102030405060708090a0b0c")!,
            info: Hex.decode("f0f1f2f3f4f5f6f7f8f9")!, outputByteCount: 42)
        #expect(
            okm.withUnsafeBytes { Hex.encode($0) }
                == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    }
}

/// Keys written by another library (joserfc / Python cryptography) must import every time.
/// Regression: a decoder kept a pointer to a temporary Swift string, so PEM import failed at random.
struct IndependentKeyTests {
    @Test(arguments: ["rsa", "ec256", "ed25519"])
    func pemKeysFromJoserfcImportRepeatedly(name: String) throws {
        let publicPEM = try Fixtures.string("joserfc/\(name)-public.pem")
        let privatePEM = try Fixtures.string("joserfc/\(name)-private.pem")
        for round in 0..<50 {
            // Churn the heap between imports so a dangling pointer would see different bytes.
            let noise = (0..<round).map { String(repeating: "PEM", count: $0 + 1) }
            let publicKey = try PublicKey(pem: publicPEM)
            let privateKey = try PrivateKey(pem: privatePEM)
            withExtendedLifetime(noise) {}
            let algorithm: SignatureAlgorithm =
                switch publicKey.type {
                case .rsa: .rsaPKCS1v15(.sha256)
                case .ec: .ecdsa(.sha256)
                case .ed25519: .ed25519
                }
            let message = Array("round \(round)".utf8)
            #expect(
                try publicKey.isValidSignature(
                    privateKey.signature(for: message, algorithm: algorithm), for: message,
                    algorithm: algorithm))
        }
    }
}
