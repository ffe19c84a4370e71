import Foundation
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOAuth
import Synchronization
import Testing

/// A JWKS endpoint in memory (a fake is fine here: the keys and tokens are minted by the test so
/// every rule can be broken on purpose). Counts fetches.
final class FakeJWKS: HTTPTransport, @unchecked Sendable {
    private let state = Mutex<(document: Data, fetches: Int)>((Data(), 0))
    func publish(_ keys: [PrivateKey], kids: [String]) throws {
        let jwks = JWKS(
            keys: try zip(keys, kids).map { try JWK(publicKey: $0.publicKey(), keyID: $1, algorithm: .rs256) })
        state.withLock { $0.document = Data(jwks.json.utf8) }
    }
    func serve(_ document: Data) { state.withLock { $0.document = document } }
    var fetches: Int { state.withLock { $0.fetches } }
    func send(_ request: APIRequest) async throws -> APIResponse {
        let document = state.withLock { state -> Data in
            state.fetches += 1; return state.document
        }
        return APIResponse(status: 200, body: document)
    }
}

struct IDTokenTests {
    let issuer = "https://id.example.com"
    let key: PrivateKey
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    init() throws { key = try PrivateKey.generate(.rsa(bits: 2048)) }

    func mint(_ claims: JSONObject, kid: String = "k1", key: PrivateKey? = nil) throws -> String {
        var base: JSONObject = [
            "iss": .string(issuer), "sub": "alice", "aud": "moose-cli", "nonce": "n-123",
            "iat": .number(JSONNumber(Int64(now.timeIntervalSince1970))),
            "exp": .number(JSONNumber(Int64(now.timeIntervalSince1970) + 300))
        ]
        for member in claims { base[member.key] = member.value }
        return try JWTSigner(key: JWTKey(privateKey: key ?? self.key, keyID: kid), algorithm: .rs256).sign(base)
    }

    func validator(_ fake: FakeJWKS) -> IDTokenValidator {
        let now = self.now
        return IDTokenValidator(
            issuer: issuer, clientID: "moose-cli",
            jwks: JWKSCache(url: URL(string: "https://id.example.com/jwks")!, transport: fake, cooldown: 0),
            leeway: 30, clock: { now })
    }

    func expectRejected(
        _ token: String, nonce: String? = "n-123", fake: FakeJWKS, because code: JWTError.Code?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            try await validator(fake).validate(token, nonce: nonce)
            Issue.record("accepted", sourceLocation: sourceLocation)
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.invalidIDToken, sourceLocation: sourceLocation)
            if let code {
                #expect((error.underlying as? JWTError)?.code == code, "\(error)", sourceLocation: sourceLocation)
            }
        } catch {
            Issue.record("\(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func eachRuleHasItsError() async throws {
        let fake = FakeJWKS()
        try fake.publish([key], kids: ["k1"])
        #expect(try await validator(fake).validate(try mint([:]), nonce: "n-123").subject == "alice")
        await expectRejected(try mint([:]), nonce: "other-nonce", fake: fake, because: nil) // wrong nonce
        await expectRejected(try mint(["nonce": .null]), nonce: "n-123", fake: fake, because: nil) // missing nonce
        await expectRejected(
            try mint(["iss": "https://evil.example.net"]), fake: fake, because: JWTError.issuerMismatch)
        await expectRejected(try mint(["aud": "someone-else"]), fake: fake, because: JWTError.audienceMismatch)
        await expectRejected(
            try mint(["exp": .number(JSONNumber(Int64(now.timeIntervalSince1970) - 120))]), fake: fake,
            because: JWTError.expired)
        await expectRejected(try mint(["aud": ["moose-cli", "other"]]), fake: fake, because: nil) // several aud, no azp
        // Rule 3 (errata set 2): an audience the client does not trust is refused even with azp…
        await expectRejected(try mint(["aud": ["moose-cli", "other"], "azp": "moose-cli"]), fake: fake, because: nil)
        // …and accepted once the client says it trusts it.
        var trusting = validator(fake)
        trusting.trustedAudiences = ["other"]
        #expect(
            try await trusting.validate(try mint(["aud": ["moose-cli", "other"], "azp": "moose-cli"]), nonce: "n-123")
                .subject == "alice")
        await expectRejected(
            try mint([:], key: try PrivateKey.generate(.rsa(bits: 2048))), fake: fake,
            because: JWTError.invalidSignature)
        // Identities are compared code point for code point: an NFD issuer is not the NFC one.
        await expectRejected(
            try mint(["iss": "https://id.example.com/cafe\u{301}"]), fake: fake, because: JWTError.issuerMismatch)
    }

    /// A `jwks_uri` answering something that is no key set (an HTML error page with 200) is an
    /// `OAuthError` with its class (`invalidResponse`: the provider's fault), not a bare `JWTError`
    /// a refresh would pass through without a next step.
    @Test func aJWKSDocumentThatIsNoKeySetIsAClassedError() async throws {
        for document in ["<html>maintenance</html>", "[]", #"{"keys":"none"}"#] {
            let fake = FakeJWKS()
            fake.serve(Data(document.utf8))
            do {
                try await validator(fake).validate(try mint([:]), nonce: "n-123")
                Issue.record("validated against \(document)")
            } catch let error as OAuthError {
                #expect(error.code == OAuthError.invalidResponse, "\(document): \(error)")
                #expect(error.errorClass == .protocolViolation)
                #expect(error.underlying is JWTError)
            } catch {
                Issue.record("\(document): an unclassed \(type(of: error)) escaped: \(error)")
            }
        }
    }

    @Test func atHashIsCheckedWhenAnAccessTokenCameWithTheIDToken() async throws {
        let fake = FakeJWKS()
        try fake.publish([key], kids: ["k1"])
        let accessToken = "dNZX1hEZ9wBCzNL40Upu646bdzQA"
        // OIDC Core 3.1.3.8: base64url of the left half of SHA-256 of the access token's ASCII octets.
        let digest = DigestAlgorithm.sha256.hash(Array(accessToken.utf8))
        let atHash = Base64URL.encode(Array(digest.prefix(16)))
        let good = try mint(["at_hash": .string(atHash)])
        _ = try await validator(fake).validate(good, nonce: "n-123", accessToken: accessToken, serverClockOffset: nil)
        do {
            _ = try await validator(fake).validate(
                good, nonce: "n-123", accessToken: accessToken + "x", serverClockOffset: nil)
            Issue.record("an at_hash for another access token was accepted")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.invalidIDToken && error.message.contains("at_hash"))
        }
    }

    @Test func hmacIDTokensNeedTheClientSecretAndAnOptIn() async throws {
        let fake = FakeJWKS()
        try fake.publish([key], kids: ["k1"])
        let secret = "moose-confidential-secret-with-32-bytes!"
        var claims: JSONObject = [
            "iss": .string(issuer), "sub": "alice", "aud": "moose-cli", "nonce": "n-123",
            "iat": .number(JSONNumber(Int64(now.timeIntervalSince1970))),
            "exp": .number(JSONNumber(Int64(now.timeIntervalSince1970) + 300))
        ]
        let token = try JWTSigner(key: JWTKey(secret: Array(secret.utf8)), algorithm: .hs256).sign(claims)
        // Not opted in: refused, whatever the signature.
        await expectRejected(token, fake: fake, because: nil)
        // Opted in (OIDC Core §10.1): the client secret's octets are the key.
        let now = self.now
        let confidential = IDTokenValidator(
            issuer: issuer, clientID: "moose-cli",
            jwks: JWKSCache(url: URL(string: "https://id.example.com/jwks")!, transport: fake),
            algorithms: [.rs256, .hs256], clientSecret: secret, leeway: 30, clock: { now })
        #expect(try await confidential.validate(token, nonce: "n-123").subject == "alice")
        claims["sub"] = "mallory"
        let forged = try JWTSigner(
            key: JWTKey(secret: Array("another-secret-of-thirty-two-bytes!!".utf8)), algorithm: .hs256
        ).sign(claims)
        await #expect(throws: OAuthError.self) { try await confidential.validate(forged, nonce: "n-123") }
    }

    @Test func unknownKidRefetchesOnceThenRotationWorks() async throws {
        let fake = FakeJWKS()
        try fake.publish([key], kids: ["k1"])
        let cache = JWKSCache(url: URL(string: "https://id.example.com/jwks")!, transport: fake, cooldown: 60)
        let now = self.now
        let validator = IDTokenValidator(issuer: issuer, clientID: "moose-cli", jwks: cache, clock: { now })
        _ = try await validator.validate(try mint([:]), nonce: "n-123")
        #expect(fake.fetches == 1)
        // The provider rotates to k2; our cache has only k1. An unknown kid refetches… but the cooldown
        // (60 s) forbids a second fetch right after the first: the token is refused with unknownKey.
        let rotated = try PrivateKey.generate(.rsa(bits: 2048))
        try fake.publish([key, rotated], kids: ["k1", "k2"])
        let newToken = try mint([:], kid: "k2", key: rotated)
        do {
            _ = try await validator.validate(newToken, nonce: "n-123")
            Issue.record("refetched inside the cooldown")
        } catch let error as OAuthError {
            #expect((error.underlying as? JWTError)?.code == JWTError.unknownKey)
        }
        #expect(fake.fetches == 1)
        // With the cooldown over, one refetch picks up k2; many concurrent validations share it.
        let fresh = JWKSCache(url: URL(string: "https://id.example.com/jwks")!, transport: fake, cooldown: 0)
        let second = IDTokenValidator(issuer: issuer, clientID: "moose-cli", jwks: fresh, clock: { now })
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 { group.addTask { _ = try await second.validate(newToken, nonce: "n-123") } }
            try await group.waitForAll()
        }
        #expect(fake.fetches == 2, "concurrent validations did not share one fetch: \(fake.fetches)")
    }
}

struct JWKSPersistenceTests {
    @Test func aSavedJWKSSurvivesARestart() async throws {
        let key = try PrivateKey.generate(.rsa(bits: 2048))
        let fake = FakeJWKS()
        try fake.publish([key], kids: ["k1"])
        let saved = Mutex<([UInt8], Date)?>(nil)
        let persistence = JWKSCache.Persistence(
            load: { saved.withLock { $0.map { (document: $0.0, fetchedAt: $0.1) } } },
            save: { document, date in saved.withLock { $0 = (document, date) } })
        let url = URL(string: "https://id.example.com/jwks")!
        let first = JWKSCache(url: url, transport: fake, persistence: persistence)
        #expect(try await first.keys(for: "k1").count == 1)
        #expect(fake.fetches == 1 && saved.withLock { $0 != nil })
        // A new "process": starts from the saved document, no fetch for a known kid.
        let second = JWKSCache(url: url, transport: fake, persistence: persistence)
        #expect(try await second.keys(for: "k1").count == 1)
        #expect(fake.fetches == 1)
    }
}

struct ClockSkewValidationTests {
    @Test func anIDTokenIsJudgedByTheProvidersClockWhenOursIsOff() async throws {
        let key = try PrivateKey.generate(.rsa(bits: 2048))
        let fake = FakeJWKS()
        try fake.publish([key], kids: ["k1"])
        let serverNow = Date(timeIntervalSince1970: 1_800_000_000)
        let token = try JWTSigner(key: JWTKey(privateKey: key, keyID: "k1"), algorithm: .rs256).sign(
            [
                "iss": "https://id.example.com", "sub": "a", "aud": "c", "nonce": "n",
                "iat": .number(JSONNumber(Int64(serverNow.timeIntervalSince1970))),
                "exp": .number(JSONNumber(Int64(serverNow.timeIntervalSince1970) + 300))
            ])
        // Our clock is an hour behind: iat looks like the future.
        let localNow = serverNow.addingTimeInterval(-3600)
        let validator = IDTokenValidator(
            issuer: "https://id.example.com", clientID: "c",
            jwks: JWKSCache(url: URL(string: "https://id.example.com/jwks")!, transport: fake),
            leeway: 60, clock: { localNow })
        await #expect(throws: OAuthError.self) { try await validator.validate(token, nonce: "n") }
        #expect(try await validator.validate(token, nonce: "n", serverClockOffset: 3600).subject == "a")
    }
}

/// `moose token --id-token` and any app judge a stored ID token by the one margin rule the access
/// token has (`TokenSet.isIDTokenValidLongEnough`): the margin, capped at a quarter of its lifetime.
@Suite struct IDTokenValidityRuleTests {
    static func tokens(issuedAt: Int64?, expiresAt: Int64?) throws -> TokenSet {
        var claims: JSONObject = ["iss": "https://id.example.com", "sub": "alice", "aud": "app"]
        if let issuedAt { claims["iat"] = .number(JSONNumber(issuedAt)) }
        if let expiresAt { claims["exp"] = .number(JSONNumber(expiresAt)) }
        let id = try JWTSigner(
            key: JWTKey(secret: Array("moose-id-token-rule-secret-32-bytes!".utf8)), algorithm: .hs256
        )
        .sign(claims)
        return TokenSet(accessToken: "a", idToken: id)
    }

    @Test func theIDTokenIsJudgedByTheAccessTokensRule() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let start = Int64(now.timeIntervalSince1970)
        // A 60 s ID token with 20 s left: a 30 s margin is capped at 15 s (a quarter of 60 s) — valid.
        let short = try Self.tokens(issuedAt: start - 40, expiresAt: start + 20)
        #expect(short.isIDTokenValidLongEnough(30, at: now))
        #expect(!short.isIDTokenValidLongEnough(30, maximumMarginFraction: 0.5, at: now))
        #expect(short.idTokenExpiresAt == Date(timeIntervalSince1970: TimeInterval(start + 20)))
        // A one-hour ID token with 20 s left is not valid for 30 s.
        let long = try Self.tokens(issuedAt: start - 3580, expiresAt: start + 20)
        #expect(!long.isIDTokenValidLongEnough(30, at: now) && long.isIDTokenValidLongEnough(20, at: now))
        // Without `iat` the margin is not capped; without `exp` (or an ID token) it is never valid.
        #expect(!(try Self.tokens(issuedAt: nil, expiresAt: start + 20)).isIDTokenValidLongEnough(30, at: now))
        #expect(!(try Self.tokens(issuedAt: start, expiresAt: nil)).isIDTokenValidLongEnough(0, at: now))
        #expect(!TokenSet(accessToken: "a").isIDTokenValidLongEnough(0, at: now))
        #expect(TokenSet(accessToken: "a").idTokenExpiresAt == nil)
    }
}
