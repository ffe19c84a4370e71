import Foundation
import MooseCrypto
@testable import MooseJWT
import MooseTestSupport
import Testing

struct RFCVectorTests {
    @Test func everyRFCVectorVerifies() throws {
        let fixtures = try RFCVectors.load()
        #expect(fixtures.vectors.count == 9)
        for vector in fixtures.vectors {
            let key = try jwk(vector.key).verificationKey()
            let algorithm = try #require(JWTAlgorithm(rawValue: vector.alg))
            let verifier = JWTVerifier(
                keys: [key], allowedAlgorithms: [algorithm],
                validation: ClaimValidation(checksTime: false))
            let jws = try JWS(compact: vector.compact)
            #expect(throws: Never.self, "\(vector.source)") { try verifier.verifySignature(of: jws) }
            if let payload = vector.payload {
                #expect(String(decoding: jws.payload, as: UTF8.self) == payload, "\(vector.source)")
            }
            // One flipped bit in the signature must fail.
            var parts = vector.compact.split(separator: ".").map(String.init)
            var signature = try Base64URL.decode(parts[2])
            signature[signature.count / 2] ^= 0x10
            parts[2] = Base64URL.encode(signature)
            let tampered = try JWS(compact: parts.joined(separator: "."))
            expectJWTError(JWTError.invalidSignature) { try verifier.verifySignature(of: tampered) }
        }
    }

    @Test func signingReproducesDeterministicVectors() throws {
        // PKCS#1 v1.5, HMAC and Ed25519 signatures are deterministic: Moose must produce the RFC's bytes.
        let fixtures = try RFCVectors.load()
        let deterministic = fixtures.vectors.filter { $0.deterministic == true }
        #expect(deterministic.count == 4)
        for vector in deterministic {
            let key = try jwk(vector.key).signingKey()
            let algorithm = try #require(JWTAlgorithm(rawValue: vector.alg))
            let parts = vector.compact.split(separator: ".")
            let input = Array("\(parts[0]).\(parts[1])".utf8)
            let signer = try JWTSigner(key: key, algorithm: algorithm)
            let signature = try signer.key.sign(input, algorithm: algorithm)
            #expect(Base64URL.encode(signature) == String(parts[2]), "\(vector.source)")
        }
    }

    @Test func rfc7519ExampleDecodes() throws {
        let fixtures = try RFCVectors.load()
        let jwt = try JWT(compact: fixtures.vectors[0].compact)
        #expect(jwt.header.algorithm == "HS256")
        #expect(jwt.header.type == "JWT")
        #expect(jwt.claims.issuer == "joe")
        #expect(jwt.claims.expiresAt == Date(timeIntervalSince1970: 1_300_819_380))
        #expect(jwt.claims["http://example.com/is_root"]?.boolValue == true)
        #expect(jwt.claims.isExpired(at: Date(timeIntervalSince1970: 1_300_819_380)))
        #expect(!jwt.claims.isExpired(at: Date(timeIntervalSince1970: 1_300_819_379)))
        #expect(!jwt.claims.isExpired(at: Date(timeIntervalSince1970: 1_300_819_400), leeway: 60))
        #expect(jwt.claims.timeToExpiry(from: Date(timeIntervalSince1970: 1_300_819_280)) == 100)
    }

    @Test func rfc7638Thumbprint() throws {
        let fixtures = try RFCVectors.load()
        #expect(try jwk(fixtures.thumbprint.key).thumbprint() == fixtures.thumbprint.thumbprint)
    }

    @Test func rfc7636PKCEChallenge() throws {
        let fixtures = try RFCVectors.load()
        let challenge = Base64URL.encode(DigestAlgorithm.sha256.hash(Array(fixtures.pkce.code_verifier.utf8)))
        #expect(challenge == fixtures.pkce.code_challenge)
    }

    @Test func unsecuredRFCExampleIsNeverAccepted() throws {
        let fixtures = try RFCVectors.load()
        let jwt = try JWT(compact: fixtures.unsecured.compact) // decoding is fine…
        #expect(jwt.header.algorithm == "none")
        let key = try jwk(fixtures.vectors[0].key).verificationKey()
        let verifier = JWTVerifier(keys: [key], allowedAlgorithms: Set(JWTAlgorithm.allCases))
        // …verifying never
        expectJWTError(JWTError.algorithmNone) { _ = try verifier.verify(fixtures.unsecured.compact) }
    }

    /// Wycheproof's JSON Web Crypto cases. Compact JWS cases must match `result`; JSON-serialized JWS
    /// (not a compact token) must be refused; every JWE — even Wycheproof's `valid` ones — must be refused
    /// with `encryptedTokenUnsupported`, because Moose does not decrypt tokens (documented in README).
    @Test func wycheproofJSONWebCrypto() throws {
        let root = try #require(
            JSONSerialization.jsonObject(with: Fixtures.data("wycheproof/json_web_crypto_test.json"))
                as? [String: Any])
        let groups = try #require(root["testGroups"] as? [[String: Any]])
        var count = 0
        for group in groups {
            let privateJSON = try JSONSerialization.data(withJSONObject: try #require(group["private"]))
            let jwks = try JWKS(json: Array(privateJSON))
            let keys = try jwks.keys.map { try $0.verificationKey() }
            for test in try #require(group["tests"] as? [[String: Any]]) {
                let id = test["tcId"] as? Int ?? -1
                let result = test["result"] as? String
                count += 1
                if let jwe = test["jwe"] {
                    guard let compact = jwe as? String else { continue } // JSON-serialized JWE: nothing to parse
                    // Five parts: "encrypted tokens are not supported"; a JWE missing a part is plainly malformed.
                    let fiveParts = compact.split(separator: ".", omittingEmptySubsequences: false).count == 5
                    expectJWTError(fiveParts ? JWTError.encryptedTokenUnsupported : JWTError.malformed) {
                        _ = try JWS(compact: compact)
                    }
                    continue
                }
                guard let compact = test["jws"] as? String else {
                    #expect(result == "invalid", "tcId \(id): JSON serialization is not a compact JWS")
                    continue
                }
                let algorithms = Set(keys.compactMap { $0.pinnedAlgorithm.flatMap(JWTAlgorithm.init(rawValue:)) })
                let verifier = JWTVerifier(
                    keys: keys, allowedAlgorithms: algorithms.isEmpty ? Set(JWTAlgorithm.allCases) : algorithms)
                let accepted = (try? verifier.verifySignature(of: JWS(compact: compact))) != nil
                switch result {
                case "valid": #expect(accepted, "tcId \(id) \(test["comment"] ?? "")")
                case "invalid": #expect(!accepted, "tcId \(id) \(test["comment"] ?? "") \(compact.prefix(120))")
                default: break
                }
            }
        }
        #expect(count == 83)
    }
}
