import Foundation
import MooseCrypto
import MooseJWT
import MooseTestSupport
import Testing

/// Tokens and keys made by joserfc (tools/fixtures/make_joserfc_fixtures.py): every rule of
/// DESIGN.md's JWT section, each refused with its own error.
struct VerifierTests {
    let fixtures: JoserfcTokens
    let jwks: JWKS
    let asymmetricKeys: [JWTKey]

    init() throws {
        fixtures = try JoserfcTokens.load()
        jwks = try JWKS(json: Fixtures.string("joserfc/jwks.json"))
        asymmetricKeys = try jwks.keys.map { try $0.verificationKey() }
    }

    func verifier(
        _ algorithms: Set<JWTAlgorithm> = JWTAlgorithm.asymmetric,
        issuer: String? = nil, audiences: Set<String>? = ["moose-cli"], leeway: TimeInterval = 0
    ) -> JWTVerifier {
        JWTVerifier(
            keys: asymmetricKeys, allowedAlgorithms: algorithms,
            validation: ClaimValidation(issuer: issuer, audiences: audiences, leeway: leeway, clock: fixtures.clock))
    }

    @Test func jwksLoadsEveryKey() {
        #expect(jwks.keys.count == 6)
        #expect(jwks.skipped.isEmpty)
    }

    @Test(arguments: ["rs256", "ps256", "es256", "es384", "es512", "eddsa", "ed25519"])
    func asymmetricTokensVerify(name: String) throws {
        let jwt = try verifier(issuer: "https://id.example.com", audiences: ["moose-cli"]).verify(fixtures.token(name))
        #expect(jwt.claims.subject == "248289761001")
        #expect(jwt.claims.audience == ["https://api.example.com", "moose-cli"])
        #expect(jwt.claims["tenant"]?["region"]?.stringValue == "eu-west-1")
        #expect(jwt.claims.fields.count == 18)
    }

    @Test func hmacTokenVerifiesWithTheSecretFileBytes() throws {
        let secret = try Fixtures.data("joserfc/hs256.secret")
        let key = JWTKey(secret: secret)
        let verifier = JWTVerifier(
            keys: [key], allowedAlgorithms: [.hs256],
            validation: ClaimValidation(audiences: ["moose-cli"], clock: fixtures.clock))
        #expect(try verifier.verify(fixtures.token("hs256")).claims.subject == "248289761001")
        // A secret shorter than the hash is refused (RFC 7518 §3.2) even if the MAC would match.
        let short = JWTVerifier(keys: [JWTKey(secret: Array(secret.prefix(16)))], allowedAlgorithms: [.hs256])
        expectJWTError(JWTError.weakKey) { _ = try short.verify(fixtures.token("hs256")) }
    }

    @Test func customClaimsDecodeIntoUserTypes() throws {
        struct Mine: Decodable { let sub: String; let roles: [String]; let email_verified: Bool }
        let jwt = try verifier().verify(fixtures.token("es256"))
        let mine = try jwt.claims(as: Mine.self)
        #expect(mine.sub == "248289761001" && mine.roles == ["reader", "writer"] && mine.email_verified)
    }

    // MARK: - One test per rule

    @Test func algNoneIsNeverAccepted() throws {
        expectJWTError(JWTError.algorithmNone) {
            _ = try verifier(Set(JWTAlgorithm.allCases)).verify(fixtures.token("alg_none"))
        }
        expectJWTError(JWTError.algorithmNone) {
            _ = try verifier(Set(JWTAlgorithm.allCases)).verify(fixtures.token("alg_none_uppercase"))
        }
    }

    @Test func algorithmMustBeInTheAllowList() throws {
        let error = expectJWTError(JWTError.algorithmNotAllowed) {
            _ = try verifier([.rs256]).verify(fixtures.token("es256"))
        }
        #expect(error?.field == "alg")
    }

    @Test func hmacWithAPublicKeyIsRefused() throws {
        // The classic forgery: HS256 "signed" with the RSA public key's PEM as the secret.
        let token = try fixtures.token("alg_confusion_hs256_with_rsa_pem")
        expectJWTError(JWTError.keyAlgorithmMismatch) { _ = try verifier(Set(JWTAlgorithm.allCases)).verify(token) }
        // Even if the caller hands the PEM bytes over as an HMAC "secret" next to the public key, the
        // mixed key set is refused.
        let pem = try Fixtures.data("joserfc/rsa-public.pem")
        let mixed = JWTVerifier(
            keys: asymmetricKeys + [JWTKey(secret: pem, keyID: "rsa-2026")],
            allowedAlgorithms: Set(JWTAlgorithm.allCases))
        expectJWTError(JWTError.invalidKey) { _ = try mixed.verify(token) }
    }

    @Test func keyTypeAndCurveMustMatchTheAlgorithm() throws {
        // An EdDSA token verified against only the P-256 key: wrong key type.
        let ec = try #require(asymmetricKeys.first { $0.keyID == "ec256-2026" })
        let only = JWTVerifier(
            keys: [JWTKey(publicKey: try #require(ec.publicKey))], allowedAlgorithms: [.eddsa, .es384])
        expectJWTError(JWTError.keyAlgorithmMismatch) { _ = try only.verify(fixtures.token("eddsa")) }
        // ES384 token with a P-256 key: wrong curve.
        let error = expectJWTError(JWTError.keyAlgorithmMismatch) { _ = try only.verify(fixtures.token("es384")) }
        #expect(error?.field == "crv")
    }

    @Test func keyPinnedToAnAlgorithmIsUsedOnlyWithIt() throws {
        // "rsa-2026" is pinned to RS256 in the JWKS; a PS256 token claiming that kid is refused.
        let pinned = try #require(asymmetricKeys.first { $0.keyID == "rsa-2026" })
        let token = try fixtures.token("ps256")
        let jws = try JWS(compact: token)
        #expect(jws.header.keyID == "rsa-pss-2026")
        let verifier = JWTVerifier(keys: [pinned], allowedAlgorithms: [.ps256])
        expectJWTError(JWTError.unknownKey) { _ = try verifier.verify(token) }
        // The same RSA key, still pinned to RS256, under the PS256 token's kid.
        let renamed = JWTVerifier(
            keys: [
                try JWK(publicKey: #require(pinned.publicKey), keyID: "rsa-pss-2026", algorithm: .rs256)
                    .verificationKey()
            ],
            allowedAlgorithms: [.ps256])
        expectJWTError(JWTError.keyAlgorithmMismatch) { _ = try renamed.verify(token) }
    }

    @Test func headerKeyReferencesAreNeverTrusted() throws {
        for (name, field) in [("embedded_jwk", "jwk"), ("jku_header", "jku"), ("x5u_header", "x5u")] {
            let error = expectJWTError(JWTError.untrustedKeyReference) {
                _ = try verifier().verify(fixtures.token(name))
            }
            #expect(error?.field == field)
        }
    }

    @Test func unknownCriticalHeaderIsRefused() throws {
        expectJWTError(JWTError.unsupportedCriticalHeader) { _ = try verifier().verify(fixtures.token("unknown_crit")) }
        // A caller that understands the extension may accept it.
        var understanding = verifier()
        understanding.understoodCriticalHeaders = ["exp_policy"]
        #expect(throws: Never.self) { _ = try understanding.verify(fixtures.token("unknown_crit")) }
    }

    @Test func ecdsaSignatureMustBeRawNotDER() throws {
        expectJWTError(JWTError.invalidSignature) { _ = try verifier().verify(fixtures.token("es256_der_signature")) }
    }

    @Test func signaturesAreChecked() throws {
        expectJWTError(JWTError.invalidSignature) { _ = try verifier().verify(fixtures.token("tampered_signature")) }
        expectJWTError(JWTError.invalidSignature) { _ = try verifier().verify(fixtures.token("tampered_payload")) }
        expectJWTError(JWTError.invalidSignature) { _ = try verifier().verify(fixtures.token("signed_by_other_key")) }
    }

    @Test func keyIsChosenByKid() throws {
        let error = expectJWTError(JWTError.unknownKey) { _ = try verifier().verify(fixtures.token("unknown_kid")) }
        #expect(error?.message.contains("no-such-key") == true)
    }

    @Test func withoutKidOnlyASingleFittingKeyIsUsed() throws {
        let signer = try JWTSigner(key: JWTKey(privateKey: .generate(.ec(.p256))), algorithm: .es256)
        let token = try signer.sign(["sub": "x"])
        let own = try #require(signer.key.publicKey)
        let single = JWTVerifier(keys: [JWTKey(publicKey: own)], allowedAlgorithms: [.es256])
        #expect(try single.verify(token).claims.subject == "x")
        let other = try PrivateKey.generate(.ec(.p256)).publicKey()
        let two = JWTVerifier(keys: [JWTKey(publicKey: own), JWTKey(publicKey: other)], allowedAlgorithms: [.es256])
        expectJWTError(JWTError.ambiguousKey) { _ = try two.verify(token) }
    }

    @Test func expiryNotBeforeAndIssuedAtUseTheInjectedClockAndLeeway() throws {
        let expired = try fixtures.token("expired") // exp = now - 180 s
        let error = expectJWTError(JWTError.expired) { _ = try verifier().verify(expired) }
        #expect(error?.message.contains("3m") == true)
        #expect(throws: Never.self) { _ = try verifier(leeway: 200).verify(expired) }
        expectJWTError(JWTError.notYetValid) { _ = try verifier().verify(fixtures.token("not_yet_valid")) }
        expectJWTError(JWTError.issuedInFuture) { _ = try verifier().verify(fixtures.token("issued_in_future")) }
    }

    @Test func issuerAndAudienceAreExact() throws {
        let v = verifier(issuer: "https://id.example.com", audiences: ["moose-cli"])
        #expect(throws: Never.self) { _ = try v.verify(fixtures.token("valid_short")) }
        expectJWTError(JWTError.issuerMismatch) { _ = try v.verify(fixtures.token("wrong_issuer")) }
        expectJWTError(JWTError.audienceMismatch) { _ = try v.verify(fixtures.token("wrong_audience")) }
        // A trailing slash is a different issuer.
        expectJWTError(JWTError.issuerMismatch) {
            _ = try verifier(issuer: "https://id.example.com/").verify(fixtures.token("valid_short"))
        }
    }

    @Test func audiencePresentButNotConfiguredIsRefusedUnlessAnyIsAccepted() throws {
        // RFC 7519 §4.1.3: a processor that does not identify itself in aud MUST reject the token.
        let error = expectJWTError(JWTError.audienceNotChecked) {
            _ = try verifier(audiences: nil).verify(fixtures.token("es256"))
        }
        #expect(error?.field == "aud")
        var any = verifier(audiences: nil)
        any.validation.acceptsAnyAudience = true
        #expect(throws: Never.self) { _ = try any.verify(fixtures.token("es256")) }
    }

    @Test func identitiesCompareCodePointForCodePoint() throws {
        // "é" as one scalar (NFC) and as "e" + combining acute (NFD): equal to Swift's ==, not to RFC 7519 §2.
        let nfc = "https://id.example.com/caf\u{E9}", nfd = "https://id.example.com/cafe\u{301}"
        #expect(nfc == nfd)
        let key = JWTKey(secret: Array(repeating: UInt8(7), count: 32))
        let signer = try JWTSigner(key: key, algorithm: .hs256)
        let token = try signer.sign(["iss": .string(nfd), "aud": .string(nfd), "sub": "alice"])
        let strict = JWTVerifier(
            keys: [key], allowedAlgorithms: [.hs256],
            validation: ClaimValidation(issuer: nfc, audiences: [nfd], checksTime: false))
        expectJWTError(JWTError.issuerMismatch) { _ = try strict.verify(token) }
        let audience = JWTVerifier(
            keys: [key], allowedAlgorithms: [.hs256],
            validation: ClaimValidation(issuer: nfd, audiences: [nfc], checksTime: false))
        expectJWTError(JWTError.audienceMismatch) { _ = try audience.verify(token) }
        let exact = JWTVerifier(
            keys: [key], allowedAlgorithms: [.hs256],
            validation: ClaimValidation(issuer: nfd, audiences: [nfd], checksTime: false))
        #expect(throws: Never.self) { _ = try exact.verify(token) }
    }

    @Test func numericDatesOutsideTheRangeAreRefusedAndFormattingIsTotal() throws {
        let key = JWTKey(secret: Array(repeating: UInt8(7), count: 32))
        let signer = try JWTSigner(key: key, algorithm: .hs256)
        let verifier = JWTVerifier(
            keys: [key], allowedAlgorithms: [.hs256], validation: ClaimValidation(acceptsAnyAudience: true))
        for text in ["1e300", "-1e300", "18446744073709551616", "100000000001", "-100000000001"] {
            for claim in ["exp", "nbf", "iat"] {
                let payload = Array("{\"sub\":\"a\",\"\(claim)\":\(text)}".utf8)
                let token = try signer.sign(payload: payload)
                let error = expectJWTError(JWTError.invalidClaim) { _ = try verifier.verify(token) }
                #expect(error?.field == claim)
                // The diagnostic path (moose inspect) reports it and never traps.
                let report = try TokenInspection(token, verifier: verifier, validation: verifier.validation)
                #expect(report.verdict == .invalid)
            }
        }
        // Every formatting helper is total over all finite (and non-finite) inputs.
        for seconds in [1e300, -1e300, 9.3e18, -9.3e18, .infinity, -.infinity, .nan, 0, 1e11, -1e11] {
            _ = ISO8601.string(from: Date(timeIntervalSince1970: seconds))
            _ = DurationText.describe(seconds)
            _ = JSONNumber(seconds).text
        }
        #expect(ISO8601.string(from: Date(timeIntervalSince1970: 1e300)) == "(out of range)")
        #expect(ISO8601.string(from: Date(timeIntervalSince1970: 1e11)) == "5138-11-16T09:46:40Z")
    }

    @Test func requiredClaimsAndClaimTypes() throws {
        var v = verifier()
        v.validation.requiredClaims = ["nbf"]
        expectJWTError(JWTError.missingClaim) { _ = try v.verify(fixtures.token("valid_short")) }
        expectJWTError(JWTError.invalidClaim) { _ = try verifier().verify(fixtures.token("exp_not_a_number")) }
    }

    @Test func expectedTypeIsChecked() throws {
        var v = verifier()
        v.expectedType = "at+jwt"
        expectJWTError(JWTError.typeMismatch) { _ = try v.verify(fixtures.token("es256")) }
        v.expectedType = "application/JWT"
        #expect(throws: Never.self) { _ = try v.verify(fixtures.token("es256")) }
    }

    @Test func rocaKeysAreRefused() throws {
        // Wycheproof's ROCA-vulnerable key (json_web_crypto_test.json, tcId 46) is covered in
        // RFCVectorTests; here the detector itself: generated keys never carry the fingerprint.
        let fresh = try PrivateKey.generate(.rsa(bits: 2048)).publicKey()
        #expect(!fresh.hasROCAFingerprint)
    }
}
