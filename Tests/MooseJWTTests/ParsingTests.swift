import Foundation
import MooseJWT
import MooseTestSupport
import Testing

struct ParsingTests {
    let fixtures: JoserfcTokens

    init() throws { fixtures = try JoserfcTokens.load() }

    // MARK: base64url

    @Test func base64URLRoundTripsAndIsStrict() throws {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(try Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        #expect(Base64URL.encode(Array("{}".utf8)) == "e30")
        #expect(try Base64URL.decode("e30") == Array("{}".utf8))
        let padded = expectJWTError(JWTError.invalidBase64URL) { _ = try Base64URL.decode("e30=") }
        #expect(padded?.position == 3)
        #expect(padded?.message.contains("padding") == true)
        let standard = expectJWTError(JWTError.invalidBase64URL) { _ = try Base64URL.decode("ab+c") }
        #expect(standard?.position == 2)
        expectJWTError(JWTError.invalidBase64URL) { _ = try Base64URL.decode("ab c") }
        expectJWTError(JWTError.invalidBase64URL) { _ = try Base64URL.decode("abcde") } // impossible length
        expectJWTError(JWTError.invalidBase64URL) { _ = try Base64URL.decode("e31") } // non-zero trailing bits
    }

    @Test func badBase64URLInATokenNamesThePartAndOffset() throws {
        let token = try fixtures.token("padded_base64")
        let error = expectJWTError(JWTError.invalidBase64URL) { _ = try JWS(compact: token) }
        let payloadStart = try #require(token.firstIndex(of: ".")).utf16Offset(in: token) + 1
        #expect(error?.message.contains("payload") == true)
        #expect((error?.position ?? 0) > payloadStart)
        expectJWTError(JWTError.invalidBase64URL) { _ = try JWS(compact: fixtures.token("standard_base64_alphabet")) }
    }

    // MARK: structure

    @Test func wrongPartCountsAndJWE() throws {
        expectJWTError(JWTError.malformed) { _ = try JWS(compact: fixtures.token("two_parts")) }
        expectJWTError(JWTError.malformed) { _ = try JWS(compact: fixtures.token("four_parts")) }
        expectJWTError(JWTError.malformed) { _ = try JWS(compact: "") }
        expectJWTError(JWTError.malformed) { _ = try JWS(compact: "..") }
        let jwe = expectJWTError(JWTError.encryptedTokenUnsupported) { _ = try JWS(compact: fixtures.token("jwe")) }
        #expect(jwe?.message.contains("encrypted") == true)
    }

    @Test func headerRules() throws {
        expectJWTError(JWTError.invalidJSON) { _ = try JWS(compact: fixtures.token("header_not_json")) }
        expectJWTError(JWTError.invalidJSON) { _ = try JWS(compact: fixtures.token("header_not_object")) }
        let noAlg = expectJWTError(JWTError.malformed) { _ = try JWS(compact: fixtures.token("no_alg")) }
        #expect(noAlg?.field == "alg")
    }

    @Test func duplicateClaimsAreRefused() throws {
        let error = expectJWTError(JWTError.invalidJSON) { _ = try JWT(compact: fixtures.token("duplicate_claims")) }
        #expect(error?.message.contains("duplicate") == true)
    }

    @Test func sizeLimit() throws {
        let huge = String(repeating: "a", count: 1 << 20)
        let error = expectJWTError(JWTError.tokenTooLarge) { _ = try JWS(compact: "\(huge).\(huge).\(huge)") }
        #expect(error?.message.contains("65536") == true)
        #expect(throws: Never.self) { _ = try JWS(compact: fixtures.token("rs256"), maximumSize: 2000) }
        expectJWTError(JWTError.tokenTooLarge) { _ = try JWS(compact: fixtures.token("rs256"), maximumSize: 1000) }
    }

    @Test func deeplyNestedJSONIsRefusedNotRecursed() throws {
        // A validly signed token whose payload nests 5,000 arrays deep.
        let token = try fixtures.token("deeply_nested")
        expectJWTError(JWTError.invalidJSON) { _ = try JWT(compact: token) }
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        let error = expectJWTError(JWTError.invalidJSON) { _ = try JSONValue(parsing: Array(deep.utf8)) }
        #expect(error?.message.contains("deeper") == true)
    }

    // MARK: JSON

    @Test func jsonParserAcceptsRFC8259() throws {
        let text = #"{"a":[1,-0.5,2e10,true,false,null],"b":"é\u00e9\ud83e\udd8c\n","c":{}, "d" : [ ] }"#
        let value = try JSONValue(parsing: Array(text.utf8))
        #expect(value["a"]?.arrayValue?.count == 6)
        #expect(value["a"]?.arrayValue?[2].doubleValue == 2e10)
        #expect(value["b"]?.stringValue == "éé🦌\n")
        #expect(value.objectValue?.keys == ["a", "b", "c", "d"])
        // Order-preserving, exact round trip of numbers.
        #expect(value.serialized() == #"{"a":[1,-0.5,2e10,true,false,null],"b":"éé🦌\n","c":{},"d":[]}"#)
    }

    @Test(arguments: [
        "", "{", "{\"a\":1,}", "[1,]", "01", "1.", "-", "{'a':1}", "\"\u{01}\"", "\"\\x\"", "\"\\ud800\"",
        "tru", "nul", "{\"a\" 1}", "[1 2]", "1 2", "\"abc", "{\"a\":1}}", "NaN", "+1"
    ])
    func jsonParserRejects(text: String) {
        expectJWTError(JWTError.invalidJSON) { _ = try JSONValue(parsing: Array(text.utf8)) }
    }

    @Test func jsonParserRejectsInvalidUTF8() {
        let bytes: [UInt8] = [0x22, 0xC3, 0x28, 0x22]
        expectJWTError(JWTError.invalidJSON) { _ = try JSONValue(parsing: bytes) }
    }

    @Test func garbageNeverCrashes() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let length = Int.random(in: 0..<200, using: &generator)
            let alphabet = Array("eyJhbGciOiJIUzI1NiJ9.-_=+/ {}\"[]:,0123456789abcdefXYZ".utf8)
            let bytes = (0..<length).map { _ in alphabet.randomElement(using: &generator) ?? 0 }
            _ = try? JWT(compact: String(decoding: bytes, as: UTF8.self))
            _ = try? JSONValue(parsing: bytes)
        }
    }

    // MARK: JWK / JWKS

    @Test func jwksSkipsUnsupportedKeysAndSaysWhy() throws {
        let json =
            #"{"keys":[{"kty":"EC","crv":"secp256k1","x":"AA","y":"AA","kid":"k1"},{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"ok"},{"nokty":1}]}"#
        let jwks = try JWKS(json: json)
        #expect(jwks.keys.map(\.keyID) == ["ok"])
        #expect(jwks.skipped.count == 2)
        #expect(jwks.skipped[0].contains("k1"))
    }

    @Test func publicJWKDropsPrivateMembersAndRoundTrips() throws {
        let secretJWKS = try JWKS(json: Fixtures.string("joserfc/jwks-private.json"))
        for jwk in secretJWKS.keys where jwk.keyType != "oct" {
            #expect(jwk.hasPrivateMaterial)
            let publicJWK = jwk.publicJWK
            #expect(!publicJWK.hasPrivateMaterial)
            let key = try jwk.signingKey()
            let rebuilt = try JWK(publicKey: #require(key.publicKey), keyID: jwk.keyID)
            #expect(try rebuilt.thumbprint() == jwk.thumbprint())
        }
    }

    @Test func signerRoundTripsEveryAlgorithm() throws {
        let keys: [(JWTAlgorithm, JWTKey)] = [
            (.hs256, JWTKey(secret: [UInt8](repeating: 7, count: 32))),
            (.hs384, JWTKey(secret: [UInt8](repeating: 7, count: 48))),
            (.hs512, JWTKey(secret: [UInt8](repeating: 7, count: 64))),
            (.rs256, try JWTKey(privateKey: .generate(.rsa(bits: 2048)))),
            (.ps512, try JWTKey(privateKey: .generate(.rsa(bits: 2048)))),
            (.es384, try JWTKey(privateKey: .generate(.ec(.p384)))),
            (.es512, try JWTKey(privateKey: .generate(.ec(.p521)))),
            (.ed25519, try JWTKey(privateKey: .generate(.ed25519)))
        ]
        for (algorithm, key) in keys {
            let token = try JWTSigner(key: key, algorithm: algorithm).sign(["sub": "moose", "n": 42])
            let jwt = try JWTVerifier(keys: [key], allowedAlgorithms: [algorithm]).verify(token)
            #expect(jwt.claims.subject == "moose" && jwt.claims["n"]?.int64Value == 42, "\(algorithm)")
            #expect(jwt.header.algorithm == algorithm.rawValue)
        }
        // A weak HMAC secret cannot sign.
        expectJWTError(JWTError.weakKey) { _ = try JWTSigner(key: JWTKey(secret: [1, 2, 3]), algorithm: .hs256) }
    }

    @Test func durationDescriptions() {
        #expect(DurationText.describe(0) == "0s")
        #expect(DurationText.describe(252) == "4m 12s")
        #expect(DurationText.describe(-180) == "3m")
        #expect(DurationText.describe(90_061) == "1d 1h")
    }
}
