import Foundation
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOAuth
@testable import MooseResourceServer
import Testing

/// RFC 9449 §4.3 and §7: proofs at a resource server, and the shared `htu` rules.
@Suite struct ResourceDPoPTests {
    let harness: Harness
    init() throws { harness = try Harness() }

    func verify(
        _ server: ResourceServer, token: String, proof: String?, method: String = "GET",
        url: String = Harness.url
    ) async throws(ResourceServerRefusal) -> VerifiedPrincipal {
        try await server.verify(authorizationHeader: "DPoP \(token)", dpopHeader: proof, method: method, url: url)
    }

    @Test func aBoundTokenWithItsProofIsAcceptedOnceOnly() async throws {
        let server = harness.server()
        let token = try harness.token(bound: true)
        let proof = try harness.proof(for: token)
        let principal = try await verify(server, token: token, proof: proof)
        #expect(principal.scheme == .dpop && principal.confirmationThumbprint == harness.thumbprint)
        let replay = try #require(try await refusal { try await verify(server, token: token, proof: proof) })
        #expect(replay.code == ResourceServerRefusal.invalidDPoPProof && replay.status == 401)
        let dpop = try #require(AuthenticationChallenge.parse(replay.wwwAuthenticate).first { $0.hasScheme("DPoP") })
        #expect(dpop["error"] == "invalid_dpop_proof")
        // The Bearer challenge carries no error: the request used DPoP.
        #expect(AuthenticationChallenge.parse(replay.wwwAuthenticate).first { $0.hasScheme("Bearer") }?["error"] == nil)
    }

    @Test(arguments: [
        ("https://API.Example.COM/items", "https://api.example.com/items"), // host case
        ("HTTPS://api.example.com/items", "https://api.example.com/items"), // scheme case
        ("https://api.example.com:443/items", "https://api.example.com/items"), // default port
        ("https://api.example.com/%69tems", "https://api.example.com/items"), // unreserved percent-encoding
        // the request's query and fragment
        ("https://api.example.com/items", "https://api.example.com/items?page=2#top"),
        // RFC 9449 §4.3 check 9: the proof's query and fragment are ignored too
        ("https://api.example.com/items?page=2", "https://api.example.com/items?page=2"),
        ("https://api.example.com/items?a=1#f", "https://api.example.com/items"),
        ("https://api.example.com/items#f", "https://api.example.com/items?page=3")
    ])
    func equivalentURIsMatch(_ htu: String, _ request: String) async throws {
        let token = try harness.token(bound: true)
        let proof = try harness.proof(for: token, changes: ["htu": .string(htu)])
        _ = try await verify(harness.server(), token: token, proof: proof, url: request)
    }

    /// Each hostile proof is refused with `invalid_dpop_proof`.
    @Test(arguments: HostileProof.allCases) func hostileProofsAreRefused(_ hostile: HostileProof) async throws {
        let token = try harness.token(bound: true)
        let proof = try hostile.make(harness, token: token)
        let refused = try #require(
            try await refusal { try await verify(harness.server(), token: token, proof: proof) },
            "\(hostile) was accepted")
        #expect(
            refused.code == ResourceServerRefusal.invalidDPoPProof && refused.status == 401, "\(hostile): \(refused)")
    }

    enum HostileProof: String, CaseIterable, CustomStringConvertible {
        case missing, htuPathCase, htuQueryOtherPath, htuTrailingSlash, htuOtherHost, htuOtherPort, htmLowerCase,
            htmOther
        case iatFarFuture, iatTooOld, iatMissing, athMismatch, athMissing, jtiMissing, jtiHuge, otherKeySelfConsistent
        case signedByAnotherKey, privateKeyInJWK, typJWT, typMissing, algHS256, algNone, jwkMissing, oversized,
            jkuHeader
        case twoProofsCombined
        var description: String { rawValue }

        func make(_ h: Harness, token: String) throws -> String? {
            let now = Int64(Harness.now.timeIntervalSince1970)
            switch self {
            case .missing: return nil
            case .htuPathCase: return try h.proof(for: token, changes: ["htu": "https://api.example.com/Items"])
            case .htuQueryOtherPath:
                return try h.proof(for: token, changes: ["htu": "https://api.example.com/other?/items"])
            case .htuTrailingSlash: return try h.proof(for: token, changes: ["htu": "https://api.example.com/items/"])
            case .htuOtherHost: return try h.proof(for: token, changes: ["htu": "https://api.example.org/items"])
            case .htuOtherPort: return try h.proof(for: token, changes: ["htu": "https://api.example.com:8443/items"])
            case .htmLowerCase: return try h.proof(for: token, method: "get")
            case .htmOther: return try h.proof(for: token, method: "POST")
            case .iatFarFuture: return try h.proof(for: token, changes: ["iat": .number(JSONNumber(now + 3600))])
            case .iatTooOld: return try h.proof(for: token, changes: ["iat": .number(JSONNumber(now - 120))])
            case .iatMissing: return try h.proof(for: token, changes: ["iat": .null])
            case .athMismatch: return try h.proof(for: token + "x")
            case .athMissing: return try h.proof(for: nil)
            case .jtiMissing: return try h.proof(for: token, changes: ["jti": .null])
            case .jtiHuge: return try h.proof(for: token, jti: String(repeating: "j", count: 300))
            case .otherKeySelfConsistent:
                // A valid proof by another key: the token's cnf.jkt names the harness's key.
                let key = try PrivateKey.generate(.ec(.p256))
                let signer = try JWTSigner(key: JWTKey(privateKey: key), algorithm: .es256)
                return try h.proof(
                    for: token, header: DPoP.proofHeader(publicJWK: JWK(publicKey: key.publicKey())), signer: signer)
            case .signedByAnotherKey:
                let signer = try JWTSigner(key: JWTKey(privateKey: PrivateKey.generate(.ec(.p256))), algorithm: .es256)
                return try h.proof(for: token, signer: signer)
            case .privateKeyInJWK:
                var fields = h.dpopJWK.fields
                fields["d"] = .string(Base64URL.encode([UInt8](repeating: 1, count: 32)))
                return try h.proof(for: token, header: ["typ": "dpop+jwt", "jwk": .object(fields)])
            case .typJWT: return try h.proof(for: token, header: ["typ": "JWT", "jwk": .object(h.dpopJWK.fields)])
            case .typMissing: return try h.proof(for: token, header: ["typ": .null, "jwk": .object(h.dpopJWK.fields)])
            case .algHS256:
                let secret = Array(h.dpopJWK.json.utf8)
                let signer = try JWTSigner(key: JWTKey(secret: secret), algorithm: .hs256)
                return try h.proof(for: token, signer: signer)
            case .algNone:
                let header = Base64URL.encode(
                    Array(
                        JSONValue.object(["alg": "none", "typ": "dpop+jwt", "jwk": .object(h.dpopJWK.fields)])
                            .serialized().utf8))
                let claims = try DPoP.proofClaims(
                    method: "GET", url: Harness.url, accessToken: token, issuedAt: Harness.now, jti: "n")
                return header + "." + Base64URL.encode(Array(JSONValue.object(claims).serialized().utf8)) + "."
            case .jwkMissing: return try h.proof(for: token, header: ["typ": "dpop+jwt"])
            case .oversized:
                return try h.proof(for: token, changes: ["pad": .string(String(repeating: "p", count: 9000))])
            case .jkuHeader:
                return try h.proof(
                    for: token,
                    header: ["typ": "dpop+jwt", "jwk": .object(h.dpopJWK.fields), "jku": "https://evil.example"])
            case .twoProofsCombined: return try h.proof(for: token) + "," + h.proof(for: token)
            }
        }
    }

    /// The client side's proofs (MooseOAuth's DPoPKey, before it switches to the shared DPoP module) pass.
    @Test(arguments: [JWTAlgorithm.es256, .eddsa, .rs256]) func theClientSidesProofsAreAccepted(
        _ algorithm: JWTAlgorithm
    ) async throws {
        let key = try DPoPKey.generate(algorithm)
        let token = try harness.token(["cnf": .object(["jkt": .string(key.thumbprint)])])
        let url = try #require(URL(string: "https://api.example.com/items?page=3"))
        let proof = try key.proof(method: .get, url: url, accessToken: token, at: Harness.now)
        let principal = try await verify(harness.server(), token: token, proof: proof, url: url.absoluteString)
        #expect(principal.confirmationThumbprint == key.thumbprint)
    }

    @Test func aBoundTokenWithoutCnfIsNotAcceptedAsDPoP() async throws {
        let token = try harness.token()
        let refused = try #require(
            try await refusal { try await verify(harness.server(), token: token, proof: harness.proof(for: token)) })
        #expect(refused.code == ResourceServerRefusal.invalidToken)
    }

    @Test func requiredDPoPRefusesBearerAndDisabledRefusesDPoP() async throws {
        let unbound = try harness.token()
        let required = harness.server(harness.configuration(dpop: .required))
        let refused = try #require(
            try await refusal {
                try await required.verify(
                    authorizationHeader: "Bearer \(unbound)", dpopHeader: nil, method: "GET", url: Harness.url)
            })
        #expect(refused.code == ResourceServerRefusal.invalidToken && refused.challenges.map(\.scheme) == ["DPoP"])
        let bound = try harness.token(bound: true)
        let disabled = harness.server(harness.configuration(dpop: .disabled))
        let refusedDPoP = try #require(
            try await refusal { try await verify(disabled, token: bound, proof: harness.proof(for: bound)) })
        #expect(
            refusedDPoP.code == ResourceServerRefusal.invalidRequest
                && refusedDPoP.challenges.map(\.scheme) == ["Bearer"])
    }

    @Test func serverNoncesAreAskedForAndThenAccepted() async throws {
        let nonces = RotatingDPoPNonces(lifetime: 300, clock: { Harness.now })
        let server = harness.server(nonces: nonces)
        let token = try harness.token(bound: true)
        let first = try #require(
            try await refusal { try await verify(server, token: token, proof: harness.proof(for: token)) })
        #expect(first.code == ResourceServerRefusal.useDPoPNonce && first.status == 401)
        let nonce = try #require(first.dpopNonce)
        #expect(first.headers.contains { $0.name == "DPoP-Nonce" && $0.value == nonce })
        #expect(
            AuthenticationChallenge.parse(first.wwwAuthenticate).first { $0.hasScheme("DPoP") }?["error"]
                == "use_dpop_nonce")
        let stale = try #require(
            try await refusal { try await verify(server, token: token, proof: harness.proof(for: token, nonce: "old")) }
        )
        #expect(stale.code == ResourceServerRefusal.useDPoPNonce)
        _ = try await verify(server, token: token, proof: harness.proof(for: token, nonce: nonce))
        #expect(await server.currentNonce() == nonce)
    }

    @Test func theReplayCacheForgetsExpiredEntriesAndRefusesWhenFull() async throws {
        let clock = Clock()
        let cache = InMemoryDPoPReplayCache(capacity: 2, clock: { clock.now })
        let soon = Harness.now.addingTimeInterval(60)
        #expect(try await cache.firstUse(of: "a", until: soon))
        #expect(try await !cache.firstUse(of: "a", until: soon))
        #expect(try await cache.firstUse(of: "b", until: soon))
        await #expect(throws: InMemoryDPoPReplayCache.Full.self) { try await cache.firstUse(of: "c", until: soon) }
        clock.now = soon.addingTimeInterval(1)
        #expect(try await cache.firstUse(of: "c", until: soon.addingTimeInterval(60)))
        #expect(await cache.count == 1)
    }

    final class Clock: @unchecked Sendable {
        private let lock = NSLock()
        private var value = Harness.now
        var now: Date {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }

    @Test func targetURINormalization() throws {
        #expect(try DPoP.targetURI("HTTP://Example.COM:80") == "http://example.com/")
        #expect(try DPoP.targetURI("https://example.com:8443/a%2fb?q#f") == "https://example.com:8443/a%2Fb")
        #expect(try DPoP.targetURI("https://[::1]:443/x") == "https://[::1]/x")
        #expect(try DPoP.targetURI("https://EX%41mple.com/%c3%a9") == "https://example.com/%C3%A9")
        #expect(try DPoP.targetURI("https://example.com/A/") == "https://example.com/A/")
        for bad in [
            "/relative", "https://user@example.com/", "https://example.com:99999/", "https://example.com/a b",
            "https://example.com/%zz", "https://example.com/\u{e9}", "mailto:x@example.com", "",
            // Found by the dpop-proof fuzz harness: a ':' left in the host broke idempotence.
            "HTTPS://API.Exam:ple.com:443/a", "https://example.com/a\"b", "https://[::1/x", "https://exa[mple.com/"
        ] {
            #expect(throws: JWTError.self, "\(bad)") { try DPoP.targetURI(bad) }
        }
        #expect(throws: JWTError.self) { try DPoP.normalizedProofTarget("https://example.com/?q") }
        #expect(DPoP.accessTokenHash("abc") == "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0")
    }
}
