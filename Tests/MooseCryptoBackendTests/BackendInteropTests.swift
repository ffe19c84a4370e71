// Both backends in one binary: libcrypto behind MooseCrypto's public API (MooseLibCrypto) and swift-crypto
// reached through `SwiftCryptoBackend`, `SwiftCryptoPublicKey` and `SwiftCryptoPrivateKey` (MooseSwiftCrypto).
// `swift build --enable-all-traits` (tools/test) has both.
#if MooseSwiftCrypto && MooseLibCrypto
import Foundation
import MooseCrypto
import MooseJWT
import MooseOAuth
import MooseSealing
import MooseTestSupport
import Testing

/// What one backend seals, the other opens, byte for byte: AES-GCM in every form the stores use
/// (the envelope's wrapped data keys, values under an `AESGCM.Context`, the key check), and the KDFs
/// and hashes give the same bytes.
struct SymmetricInteropTests {
    static let sizes = [0, 1, 15, 16, 17, 64, 1000, 65_537]

    @Test(arguments: [16, 24, 32])
    func aesGCMWithAFixedNonceIsByteIdentical(keySize: Int) throws {
        let key = try SecretKey(randomByteCount: keySize)
        for size in Self.sizes {
            let plaintext = try SecureRandom.bytes(count: size)
            let aad = try SecureRandom.bytes(count: size % 40)
            let nonce = try SecureRandom.bytes(count: 12)
            let libcrypto = try AESGCM.seal(plaintext, using: key, nonce: nonce, authenticating: aad)
            let swift = try key.withUnsafeBytes { k in
                try plaintext.withUnsafeBytes { p in
                    try nonce.withUnsafeBytes { n in
                        try aad.withUnsafeBytes { a in try SwiftCryptoBackend.seal(p, key: k, nonce: n, aad: a) }
                    }
                }
            }
            #expect(
                swift.ciphertext == libcrypto.ciphertext && swift.tag == libcrypto.tag,
                "\(keySize * 8)-bit key, \(size) bytes")
        }
    }

    @Test func aesGCMCombinedOpensAcrossBackends() throws {
        let key = try SecretKey(randomByteCount: 32)
        let context = try AESGCM.Context(key: key)
        for size in Self.sizes {
            let plaintext = try SecureRandom.bytes(count: size)
            let aad = Array("row-\(size)".utf8)
            // libcrypto → swift-crypto
            let sealedByLibCrypto = try context.sealCombined(plaintext, authenticating: aad)
            let opened = try key.withUnsafeBytes { k in
                try sealedByLibCrypto.withUnsafeBytes { s in
                    try aad.withUnsafeBytes { a in try SwiftCryptoBackend.openCombined(s, key: k, aad: a) }
                }
            }
            #expect(opened == plaintext)
            // swift-crypto → libcrypto (the context, and the one-shot form)
            let sealedBySwift = try key.withUnsafeBytes { k in
                try plaintext.withUnsafeBytes { p in
                    try aad.withUnsafeBytes { a in try SwiftCryptoBackend.sealCombined(p, key: k, aad: a) }
                }
            }
            #expect(sealedBySwift.count == 12 + size + 16)
            #expect(try context.openCombined(sealedBySwift, authenticating: aad) == plaintext)
            #expect(try AESGCM.openCombined(sealedBySwift, using: key, authenticating: aad) == plaintext)
            // A changed AAD fails on both, with the same code.
            expectCode(CryptographyError.authenticationFailure) {
                try context.openCombined(sealedBySwift, authenticating: aad + [0])
            }
            expectCode(CryptographyError.authenticationFailure) {
                try key.withUnsafeBytes { k in
                    try sealedByLibCrypto.withUnsafeBytes { s in
                        try (aad + [0]).withUnsafeBytes { a in try SwiftCryptoBackend.openCombined(s, key: k, aad: a) }
                    }
                }
            }
        }
    }

    /// The store's envelope (MooseSealing.Envelope): a data key wrapped by one backend unwraps with the
    /// other, a value sealed under it opens, and the key check is the same MAC.
    @Test func storeEnvelopeOpensAcrossBackends() throws {
        let master = try SecretKey(randomByteCount: 32)
        let dataKey = try SecretKey(randomByteCount: 32)
        let storeID = try SecureRandom.bytes(count: 16)
        let id: Int64 = 7
        let wrapAAD = Array("moose-data-key/v1".utf8) + storeID + Envelope.bigEndian(id)

        // libcrypto wraps, swift-crypto unwraps.
        let wrapped = try Envelope.wrap(dataKey, id: id, master: master, storeID: storeID)
        let unwrapped = try master.withUnsafeBytes { m in
            try wrapped.withUnsafeBytes { w in
                try wrapAAD.withUnsafeBytes { a in try SwiftCryptoBackend.openCombined(w, key: m, aad: a) }
            }
        }
        #expect(unwrapped == dataKey.withUnsafeBytes { Array($0) })

        // swift-crypto wraps, libcrypto (Envelope.unwrap) unwraps.
        let wrappedBySwift = try master.withUnsafeBytes { m in
            try dataKey.withUnsafeBytes { d in
                try wrapAAD.withUnsafeBytes { a in try SwiftCryptoBackend.sealCombined(d, key: m, aad: a) }
            }
        }
        let back = try Envelope.unwrap(wrappedBySwift, id: id, master: master, storeID: storeID)
        #expect(back.withUnsafeBytes { Array($0) } == dataKey.withUnsafeBytes { Array($0) })
        #expect(throws: SealingError.self) {
            try Envelope.unwrap(wrappedBySwift, id: id + 1, master: master, storeID: storeID)
        }

        // A value, sealed by swift-crypto under the data key, opens in libcrypto's context (the store's read path).
        let aad = Envelope.valueAAD(storeID: storeID, namespace: "sessions", name: "default", keyID: id)
        let value = Array(#"{"refresh_token":"not-a-real-one"}"#.utf8)
        let sealedValue = try dataKey.withUnsafeBytes { d in
            try value.withUnsafeBytes { v in
                try aad.withUnsafeBytes { a in try SwiftCryptoBackend.sealCombined(v, key: d, aad: a) }
            }
        }
        #expect(try AESGCM.Context(key: back).openCombined(sealedValue, authenticating: aad) == value)

        // The key check: HMAC-SHA-256(master, label ‖ store id) on both.
        let check = try Envelope.keyCheck(master: master, storeID: storeID)
        let label = Array("moose-key-check/v1".utf8) + storeID
        let swiftCheck = master.withUnsafeBytes { m in
            label.withUnsafeBytes { SwiftCryptoBackend.hmac(key: m, message: $0, hash: .sha256) }
        }
        #expect(swiftCheck == check)
    }

    @Test func hashesMACsAndKDFsAgree() throws {
        for size in Self.sizes {
            let data = try SecureRandom.bytes(count: size)
            for algorithm in DigestAlgorithm.allCases {
                #expect(data.withUnsafeBytes { SwiftCryptoBackend.hash($0, algorithm) } == algorithm.hash(data))
                let key = try SecureRandom.bytes(count: size % 200)
                let mac = try HMACAuthenticator(key: SecretKey(key), hash: algorithm).authenticationCode(for: data)
                #expect(
                    key.withUnsafeBytes { k in
                        data.withUnsafeBytes { SwiftCryptoBackend.hmac(key: k, message: $0, hash: algorithm) }
                    } == mac)
                let keyed = key.withUnsafeBytes { SwiftCryptoBackend.KeyedHMAC(key: $0, hash: algorithm) }
                #expect(data.withUnsafeBytes { keyed.authenticationCode(for: $0) } == mac)
                #expect(data.withUnsafeBytes { keyed.authenticationCode(for: $0) } == mac, "a keyed HMAC is reusable")
                let salt = Array(data.prefix(13)), info = Array(data.suffix(9))
                let length = 1 + size % (255 * algorithm.outputByteCount)
                let derived = try HKDFDerivation.deriveKey(
                    inputKeyMaterial: key, salt: salt, info: info, outputByteCount: length, hash: algorithm)
                let swift = try key.withUnsafeBytes { k in
                    try salt.withUnsafeBytes { s in
                        try info.withUnsafeBytes { i in
                            try SwiftCryptoBackend.hkdf(
                                inputKeyMaterial: k, salt: s, info: i, outputByteCount: length, hash: algorithm)
                        }
                    }
                }
                #expect(derived.withUnsafeBytes { Array($0) } == swift)
            }
        }
    }

    /// The passphrase key source's scrypt gives the same key on both (RFC 7914 §12's vectors, and the
    /// store's own parameters on a shorter cost).
    @Test func scryptAgrees() throws {
        let cases: [(String, String, Scrypt.Parameters, Int)] = [
            ("", "", .init(n: 16, r: 1, p: 1), 64),
            ("password", "NaCl", .init(n: 1024, r: 8, p: 16), 64),
            ("correct horse battery staple", "moose-store-salt", .init(n: 1 << 12, r: 8, p: 1), 32)
        ]
        for (password, salt, parameters, length) in cases {
            let libcrypto = try Scrypt.deriveKey(
                password: Array(password.utf8), salt: Array(salt.utf8), parameters: parameters,
                outputByteCount: length)
            let swift = try Array(password.utf8).withUnsafeBytes { p in
                try Array(salt.utf8).withUnsafeBytes { s in
                    try SwiftCryptoBackend.scrypt(password: p, salt: s, parameters: parameters, outputByteCount: length)
                }
            }
            #expect(libcrypto.withUnsafeBytes { Array($0) } == swift, "scrypt \(parameters)")
        }
        expectCode(CryptographyError.invalidParameter) {
            try [UInt8]().withUnsafeBytes { e in
                try SwiftCryptoBackend.scrypt(
                    password: e, salt: e, parameters: .init(n: 1000, r: 8, p: 1), outputByteCount: 32)
            }
        }
    }

    @Test func constantTimeComparisonAgrees() {
        let a: [UInt8] = [1, 2, 3, 4], b: [UInt8] = [1, 2, 3, 5]
        for (x, y) in [(a, a), (a, b), (a, [1, 2, 3]), ([], [])] as [([UInt8], [UInt8])] {
            let swift = x.withUnsafeBytes { p in y.withUnsafeBytes { SwiftCryptoBackend.constantTimeEquals(p, $0) } }
            #expect(swift == ConstantTime.equals(x, y))
        }
    }
}

/// Every JOSE signature algorithm: a key made by either backend moves to the other (PEM, DER and JWK
/// components), and a signature by either verifies with the other.
struct SignatureInteropTests {
    static let cases: [(PrivateKey.GenerationSpec, SignatureAlgorithm)] = [
        (.rsa(bits: 2048), .rsaPKCS1v15(.sha256)), (.rsa(bits: 2048), .rsaPKCS1v15(.sha384)),
        (.rsa(bits: 2048), .rsaPKCS1v15(.sha512)),
        (.rsa(bits: 2048), .rsaPSS(.sha256)), (.rsa(bits: 2048), .rsaPSS(.sha384)),
        (.rsa(bits: 2048), .rsaPSS(.sha512)),
        (.ec(.p256), .ecdsa(.sha256)), (.ec(.p384), .ecdsa(.sha384)), (.ec(.p521), .ecdsa(.sha512)),
        (.ed25519, .ed25519)
    ]

    @Test(arguments: cases)
    func libcryptoKeySignsForSwiftCryptoAndBack(spec: PrivateKey.GenerationSpec, algorithm: SignatureAlgorithm) throws {
        let libPrivate = try PrivateKey.generate(spec)
        let libPublic = try libPrivate.publicKey()
        let swiftPrivate = try SwiftCryptoPrivateKey(pem: libPrivate.pemRepresentation())
        let swiftPublic = try SwiftCryptoPublicKey(pem: libPublic.pemRepresentation())
        #expect(
            try SwiftCryptoPublicKey(der: libPublic.derRepresentation()).derRepresentation()
                == libPublic.derRepresentation())
        #expect(swiftPrivate.publicKey.derRepresentation() == (try libPublic.derRepresentation()))
        #expect(swiftPublic.type == libPublic.type)
        try crossVerify(
            libPrivate: libPrivate, libPublic: libPublic, swiftPrivate: swiftPrivate, swiftPublic: swiftPublic,
            algorithm: algorithm)
    }

    @Test(arguments: cases)
    func swiftCryptoKeySignsForLibCryptoAndBack(spec: PrivateKey.GenerationSpec, algorithm: SignatureAlgorithm) throws {
        let swiftPrivate = try SwiftCryptoPrivateKey.generate(spec)
        let swiftPublic = swiftPrivate.publicKey
        let libPrivate = try PrivateKey(pem: swiftPrivate.pemRepresentation())
        let libPublic = try PublicKey(der: swiftPublic.derRepresentation())
        #expect(try libPublic.pemRepresentation() == swiftPublic.pemRepresentation())
        #expect(try libPrivate.pemRepresentation() == swiftPrivate.pemRepresentation())
        try crossVerify(
            libPrivate: libPrivate, libPublic: libPublic, swiftPrivate: swiftPrivate, swiftPublic: swiftPublic,
            algorithm: algorithm)
    }

    /// JWK components (what `JWK` reads and writes) round-trip between the backends.
    @Test(arguments: cases)
    func jwkComponentsMoveBetweenBackends(spec: PrivateKey.GenerationSpec, algorithm: SignatureAlgorithm) throws {
        let libPrivate = try PrivateKey.generate(spec)
        let libPublic = try libPrivate.publicKey()
        let components = libPrivate.privateComponents
        let swiftPrivate: SwiftCryptoPrivateKey
        let swiftPublic: SwiftCryptoPublicKey
        switch libPublic.type {
        case .rsa:
            let (n, e) = try #require(libPublic.rsaComponents)
            swiftPublic = try SwiftCryptoPublicKey(rsaModulus: n, exponent: e)
            swiftPrivate = try SwiftCryptoPrivateKey(
                rsaModulus: n, publicExponent: e, privateExponent: #require(components["d"]),
                primes: (#require(components["p"]), #require(components["q"])))
            #expect(swiftPublic.rsaComponents?.modulus == n && swiftPublic.rsaComponents?.exponent == e)
        case .ec(let curve):
            let (x, y) = try #require(libPublic.ecCoordinates)
            swiftPublic = try SwiftCryptoPublicKey(curve: curve, x: x, y: y)
            swiftPrivate = try SwiftCryptoPrivateKey(curve: curve, d: #require(components["d"]), x: x, y: y)
            #expect(swiftPublic.ecCoordinates?.x == x && swiftPublic.ecCoordinates?.y == y)
        case .ed25519:
            swiftPublic = try SwiftCryptoPublicKey(ed25519: #require(libPublic.ed25519Raw))
            swiftPrivate = try SwiftCryptoPrivateKey(ed25519Seed: #require(components["d"]))
            #expect(swiftPublic.ed25519Raw == libPublic.ed25519Raw)
        }
        #expect(swiftPrivate.privateComponents == components)
        try crossVerify(
            libPrivate: libPrivate, libPublic: libPublic, swiftPrivate: swiftPrivate, swiftPublic: swiftPublic,
            algorithm: algorithm)
    }

    private func crossVerify(
        libPrivate: PrivateKey, libPublic: PublicKey, swiftPrivate: SwiftCryptoPrivateKey,
        swiftPublic: SwiftCryptoPublicKey,
        algorithm: SignatureAlgorithm
    ) throws {
        let message = Array("interop \(algorithm)".utf8)
        let byLibCrypto = try libPrivate.signature(for: message, algorithm: algorithm)
        let bySwift = try message.withUnsafeBytes { try swiftPrivate.signature(for: $0, algorithm: algorithm) }
        #expect(try swiftVerify(swiftPublic, byLibCrypto, message, algorithm), "libcrypto → swift-crypto, \(algorithm)")
        #expect(
            try libPublic.isValidSignature(bySwift, for: message, algorithm: algorithm),
            "swift-crypto → libcrypto, \(algorithm)")
        // Deterministic schemes sign identically (PKCS#1 v1.5, Ed25519); ECDSA and PSS are randomised.
        switch algorithm {
        case .rsaPKCS1v15, .ed25519: #expect(byLibCrypto == bySwift)
        case .rsaPSS, .ecdsa: break
        }
        // A changed message or signature fails on both.
        var tampered = bySwift
        tampered[tampered.count / 2] ^= 1
        #expect(try !libPublic.isValidSignature(tampered, for: message, algorithm: algorithm))
        #expect(try !swiftVerify(swiftPublic, tampered, message, algorithm))
        #expect(try !swiftVerify(swiftPublic, byLibCrypto, message + [0], algorithm))
        // The same mismatch error on both.
        let other: SignatureAlgorithm = if case .ed25519 = algorithm { .ecdsa(.sha256) } else { .ed25519 }
        expectCode(CryptographyError.algorithmMismatch) { try swiftVerify(swiftPublic, bySwift, message, other) }
        expectCode(CryptographyError.algorithmMismatch) {
            try libPublic.isValidSignature(bySwift, for: message, algorithm: other)
        }
    }
}

func swiftVerify(_ key: SwiftCryptoPublicKey, _ signature: [UInt8], _ message: [UInt8], _ algorithm: SignatureAlgorithm)
    throws -> Bool
{
    try signature.withUnsafeBytes { s in
        try message.withUnsafeBytes { try key.isValidSignature(s, for: $0, algorithm: algorithm) }
    }
}

/// JWS (RFC 7515) and DPoP proofs (RFC 9449): what MooseJWT and MooseOAuth sign on libcrypto verifies on
/// swift-crypto, and a JWS whose signature swift-crypto made passes MooseJWT's verifier.
struct JOSEInteropTests {
    static let algorithms: [(JWTAlgorithm, PrivateKey.GenerationSpec, SignatureAlgorithm)] = [
        (.rs256, .rsa(bits: 2048), .rsaPKCS1v15(.sha256)), (.ps384, .rsa(bits: 2048), .rsaPSS(.sha384)),
        (.es256, .ec(.p256), .ecdsa(.sha256)), (.es384, .ec(.p384), .ecdsa(.sha384)),
        (.es512, .ec(.p521), .ecdsa(.sha512)),
        (.eddsa, .ed25519, .ed25519)
    ]

    @Test(arguments: algorithms)
    func jwsSignedByEitherVerifiesWithTheOther(
        jwt: JWTAlgorithm, spec: PrivateKey.GenerationSpec, algorithm: SignatureAlgorithm
    ) throws {
        let libPrivate = try PrivateKey.generate(spec)
        let libPublic = try libPrivate.publicKey()
        let swiftPrivate = try SwiftCryptoPrivateKey(pem: libPrivate.pemRepresentation())
        let claims: JSONObject = ["iss": "https://issuer.example", "sub": "interop"]

        // MooseJWT on libcrypto signs; swift-crypto verifies the signing input.
        let token = try JWTSigner(key: JWTKey(privateKey: libPrivate), algorithm: jwt).sign(claims)
        let jws = try JWS(compact: token)
        #expect(try swiftVerify(swiftPrivate.publicKey, jws.signature, jws.signingInput, algorithm))

        // swift-crypto signs the same signing input; MooseJWT's verifier (libcrypto) accepts the token.
        let signature = try jws.signingInput.withUnsafeBytes {
            try swiftPrivate.signature(for: $0, algorithm: algorithm)
        }
        let parts = token.split(separator: ".")
        let swiftToken = "\(parts[0]).\(parts[1]).\(Base64URL.encode(signature))"
        let verifier = JWTVerifier(keys: [JWTKey(publicKey: libPublic)], allowedAlgorithms: [jwt])
        let verified = try verifier.verify(swiftToken)
        #expect(verified.claims["sub"]?.stringValue == "interop")
    }

    @Test(arguments: [JWTAlgorithm.es256, .eddsa, .rs256])
    func dpopProofVerifiesOnSwiftCrypto(algorithm: JWTAlgorithm) throws {
        let key = try DPoPKey.generate(algorithm)
        let proof = try key.proof(method: .post, url: URL(string: "https://as.example/token")!)
        let jws = try JWS(compact: proof)
        let jwk = try #require(jws.header.fields["jwk"])
        func field(_ name: String) throws -> [UInt8] { try Base64URL.decode(#require(jwk[name]?.stringValue)) }
        let publicKey: SwiftCryptoPublicKey
        let signatureAlgorithm: SignatureAlgorithm
        switch algorithm {
        case .es256:
            publicKey = try SwiftCryptoPublicKey(curve: .p256, x: field("x"), y: field("y"))
            signatureAlgorithm = .ecdsa(.sha256)
        case .eddsa:
            publicKey = try SwiftCryptoPublicKey(ed25519: field("x"))
            signatureAlgorithm = .ed25519
        default:
            publicKey = try SwiftCryptoPublicKey(rsaModulus: field("n"), exponent: field("e"))
            signatureAlgorithm = .rsaPKCS1v15(.sha256)
        }
        #expect(try swiftVerify(publicKey, jws.signature, jws.signingInput, signatureAlgorithm))
        var changed = jws.signingInput
        changed[changed.count - 1] ^= 1
        #expect(try !swiftVerify(publicKey, jws.signature, changed, signatureAlgorithm))
    }

    /// Keys written by another library (joserfc, Python cryptography) import on swift-crypto as they do on
    /// libcrypto, and the two read the same key.
    @Test(arguments: ["rsa", "ec256", "ed25519"])
    func joserfcKeysImportOnBothBackends(name: String) throws {
        let publicPEM = try Fixtures.string("joserfc/\(name)-public.pem")
        let privatePEM = try Fixtures.string("joserfc/\(name)-private.pem")
        let swiftPublic = try SwiftCryptoPublicKey(pem: publicPEM)
        let swiftPrivate = try SwiftCryptoPrivateKey(pem: privatePEM)
        #expect(swiftPublic.derRepresentation() == (try PublicKey(pem: publicPEM).derRepresentation()))
        #expect(swiftPrivate.privateComponents == (try PrivateKey(pem: privatePEM).privateComponents))
        #expect(swiftPrivate.publicKey.derRepresentation() == swiftPublic.derRepresentation())
    }
}
#endif
