import Foundation
import HTTPTypes
import MooseCrypto
import MooseHTTP
@testable import MooseJWT
@testable import MooseOAuth
import MooseOAuthSystem
import MooseTestSupport
import MooseURLSession
import Synchronization
import Testing

/// Proofs as RFC 9449 §4.2 shapes them, without a server.
struct DPoPProofTests {
    @Test(arguments: DPoPKey.supportedAlgorithms)
    func aProofCarriesWhatTheServerChecksAndVerifiesWithItsOwnJWK(algorithm: JWTAlgorithm) throws {
        let key = try DPoPKey.generate(algorithm)
        let url = URL(string: "https://api.example.com/v1/me?x=1#frag")!
        let proof = try key.proof(
            method: .get, url: url, accessToken: "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU", nonce: "n-1",
            at: Date(timeIntervalSince1970: 1_700_000_000))
        let jwt = try JWT(compact: proof)
        #expect(jwt.header.type == "dpop+jwt" && jwt.header.algorithm == algorithm.rawValue)
        let jwk = try JWK(#require(jwt.header.fields["jwk"]?.objectValue))
        #expect(!jwk.hasPrivateMaterial)
        #expect(try jwk.thumbprint() == key.thumbprint)
        // Verifiable with nothing but the key in its own header (what a DPoP server does; Moose's own
        // verifier never trusts an embedded jwk, so the signature is checked with the key directly).
        #expect(try jwk.verificationKey().verify(jwt.jws.signature, over: jwt.jws.signingInput, algorithm: algorithm))
        let claims = jwt.claims
        #expect(claims["htm"]?.stringValue == "GET")
        #expect(claims["htu"]?.stringValue == "https://api.example.com/v1/me") // no query, no fragment
        #expect(claims["iat"]?.int64Value == 1_700_000_000)
        #expect(claims["nonce"]?.stringValue == "n-1")
        // ath = base64url(SHA-256(access token)): RFC 9449 §7.1's example token and its ath.
        #expect(claims["ath"]?.stringValue == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo")
        #expect((claims["jti"]?.stringValue?.count ?? 0) >= 16)
        #expect(try key.proof(method: .get, url: url) != key.proof(method: .get, url: url), "a fresh jti every time")
    }

    @Test func theKeySurvivesTheStoreAndNeverShowsItsPrivatePart() throws {
        let key = try DPoPKey.generate()
        var tokens = TokenSet(accessToken: "at", tokenType: "DPoP", refreshToken: "rt")
        tokens.dpopKey = key
        let decoded = try JSONDecoder().decode(TokenSet.self, from: JSONEncoder().encode(tokens))
        #expect(decoded.dpopKey == key && decoded.isDPoPBound)
        let proof = try #require(decoded.dpopKey).proof(
            method: .post, url: URL(string: "https://id.example.com/token")!)
        #expect(try JWK(#require(JWT(compact: proof).header.fields["jwk"]?.objectValue)).thumbprint() == key.thumbprint)
        #expect(!String(describing: key).contains("PRIVATE") && !tokens.description.contains("PRIVATE"))
        #expect(tokens.description.contains(key.thumbprint))
    }

    @Test func aDPoPBoundRefreshTokenIsNeverSentWithoutItsKey() async throws {
        let sent = Mutex(0)
        let transport = ScriptedTransport { _ in
            sent.withLock { $0 += 1 }
            return .json(#"{"access_token":"a2","token_type":"DPoP"}"#)
        }
        let client = OAuthClient(
            metadata: ProviderMetadata(
                issuer: "https://id.example.com",
                tokenEndpoint: URL(string: "https://id.example.com/token")),
            clientID: "c", transport: transport)
        await #expect(throws: OAuthError.self) {
            _ = try await client.refresh(TokenSet(accessToken: "a1", tokenType: "DPoP", refreshToken: "r1"))
        }
        #expect(sent.withLock { $0 } == 0)
    }

    /// An independent implementation (joserfc, Python) verifies a proof Moose made.
    @Test(arguments: DPoPKey.supportedAlgorithms)
    func joserfcVerifiesMoosesProofs(algorithm: JWTAlgorithm) throws {
        let key = try DPoPKey.generate(algorithm)
        let proof = try key.proof(
            method: .post, url: URL(string: "https://id.example.com/token")!, accessToken: "tok", nonce: "abc")
        let script = Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/fixtures/verify_dpop_proof.py")
        let (status, output) = runCapturingStdout([
            "python3", script, proof, "POST", "https://id.example.com/token", "tok", "abc"
        ])
        #expect(status == 0, "\(output)")
        #expect(output.contains("ok \(key.thumbprint)"), "\(output)")
    }
}

/// DPoP and PAR against a real server that checks them: Glewlwyd (nonces mandatory).
@Suite(.serialized)
struct GlewlwydDPoPTests {
    /// Counts the requests that reach the server, by path.
    final class Counting: HTTPTransport {
        let inner: any HTTPTransport
        let paths = Mutex<[String]>([])
        init(_ inner: any HTTPTransport) { self.inner = inner }
        func send(_ request: APIRequest) async throws -> APIResponse {
            paths.withLock { $0.append(request.url?.path ?? "") }
            return try await inner.send(request)
        }
        func count(_ suffix: String) -> Int { paths.withLock { $0.filter { $0.hasSuffix(suffix) }.count } }
    }

    static func login(issuer: String, transport: any HTTPTransport) async throws -> (
        OAuthClient, AuthorizationCodeFlow.Request, TokenSet
    ) {
        let metadata = try await Discovery(transport: transport).metadata(for: issuer)
        var client = OAuthClient(metadata: metadata, clientID: "moose-public", transport: transport)
        client.dpop = .es256
        let agent = try LoopbackUserAgent(port: Glewlwyd.redirectPort, timeout: 60) { url in
            // The REST login blocks until the redirect is delivered: off the cooperative pool.
            try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
                DispatchQueue.global().async { done.resume(with: Result { try Glewlwyd.signIn(url) }) }
            }
        }
        let validator = IDTokenValidator(
            issuer: metadata.issuer, clientID: "moose-public",
            jwks: JWKSCache(url: try #require(metadata.jwksURI), transport: transport),
            algorithms: [.rs256, .es256, .eddsa])
        let flow = AuthorizationCodeFlow(
            client: client, redirectURI: agent.redirectURI, userAgent: agent, idTokens: validator)
        let request = try await flow.prepareRequest(
            AuthorizationParameters(scopes: ["openid", "profile", "email", "offline_access"]))
        let callback = try await agent.authorize(
            url: request.url, redirectURI: agent.redirectURI, expectedState: request.state)
        let tokens = try await flow.complete(request, callback: callback)
        await agent.loginFinished(nil) // the browser's tab (browser.py, waiting for it) gets its page
        return (client, request, tokens)
    }

    @Test func parDPoPLoginRefreshUserInfoAndBearerRefused() async throws {
        // Glewlwyd has one user and one registered loopback port: tests take turns.
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.parIssuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = Counting(URLSessionTransport())
            let (client, request, tokens) = try await Self.login(issuer: issuer, transport: transport)
            // PAR: the browser saw only client_id and request_uri.
            #expect(request.pushed)
            let query = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems?.map(\.name)
                .sorted()
            #expect(query == ["client_id", "request_uri"])
            #expect(transport.count("/par") == 1)
            // The tokens are bound to the login's key: token_type DPoP and cnf.jkt is its thumbprint.
            let key = try #require(tokens.dpopKey)
            #expect(tokens.isDPoPBound && request.dpopKey == key)
            let cnf = try JWT(compact: tokens.accessToken).claims["cnf"]?.objectValue
            #expect(cnf?["jkt"]?.stringValue == key.thumbprint)

            // UserInfo with the bound token and a proof: accepted; the same token as Bearer: refused.
            let info = try await client.userInfo(tokens: tokens, expectedSubject: nil)
            #expect(info["preferred_username"]?.stringValue == "alice")
            let userinfo = try #require(client.metadata.userinfoEndpoint)
            var bearer = APIRequest(url: userinfo)
            bearer.headerFields[.authorization] = "Bearer \(tokens.accessToken)"
            #expect(try await transport.send(bearer).status.code == 401)

            // Refresh with a proof from the same key: rotated, still bound, still usable.
            let fresh = try await client.refresh(tokens)
            #expect(fresh.isDPoPBound && fresh.dpopKey == key)
            #expect(
                fresh.refreshToken != nil
                    && !(fresh.refreshToken ?? "").utf8.elementsEqual((tokens.refreshToken ?? "").utf8))
            _ = try await client.userInfo(tokens: fresh, expectedSubject: nil)
        }
    }

    @Test func proofsWithTheWrongMethodURLOrTokenHashAreRefusedByTheServer() async throws {
        // Glewlwyd has one user and one registered loopback port: tests take turns.
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = URLSessionTransport()
            let (client, request, tokens) = try await Self.login(issuer: issuer, transport: transport)
            #expect(!request.pushed || client.metadata.pushedAuthorizationRequestEndpoint != nil)
            let key = try #require(tokens.dpopKey)
            let userinfo = try #require(client.metadata.userinfoEndpoint)
            func send(_ proof: String) async throws -> Int {
                var request = APIRequest(url: userinfo)
                request.headerFields[.authorization] = "DPoP \(tokens.accessToken)"
                request.headerFields[.dpop] = proof
                return try await transport.send(request).status.code
            }
            let nonce = { DPoPNonces.nonce(for: userinfo) }
            // The right proof works (after at most one nonce round trip)…
            _ = try await client.userInfo(tokens: tokens, expectedSubject: nil)
            #expect(
                try await send(key.proof(method: .get, url: userinfo, accessToken: tokens.accessToken, nonce: nonce()))
                    == 200)
            // …and each wrong claim is refused: the server really checks the proofs.
            #expect(
                try await send(key.proof(method: .post, url: userinfo, accessToken: tokens.accessToken, nonce: nonce()))
                    == 401)
            let elsewhere = userinfo.deletingLastPathComponent().appendingPathComponent("token")
            #expect(
                try await send(key.proof(method: .get, url: elsewhere, accessToken: tokens.accessToken, nonce: nonce()))
                    == 401)
            #expect(
                try await send(key.proof(method: .get, url: userinfo, accessToken: "another-token", nonce: nonce()))
                    == 401)
            #expect(
                try await send(key.proof(method: .get, url: userinfo, accessToken: tokens.accessToken, nonce: "stale"))
                    == 401)
            // A stolen access token presented without any proof: refused.
            var stolen = APIRequest(url: userinfo)
            stolen.headerFields[.authorization] = "DPoP \(tokens.accessToken)"
            #expect(try await transport.send(stolen).status.code == 401)
        }
    }

    @Test func nonceRotationMidSessionCostsAtMostOneRetryEach() async throws {
        // Glewlwyd has one user and one registered loopback port: tests take turns.
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let counting = Counting(URLSessionTransport())
            let (client, _, tokens) = try await Self.login(issuer: issuer, transport: counting)
            let before = counting.count("/userinfo")
            // The server changes its nonce every 10 uses (announced on a 200 or asked for with a 401).
            for _ in 0..<25 { _ = try await client.userInfo(tokens: tokens, expectedSubject: nil) }
            let sent = counting.count("/userinfo") - before
            #expect(sent >= 25 && sent <= 25 + 3, "25 calls took \(sent) requests")
        }
    }

    /// The stolen refresh token is useless without the key: a refresh with another key is refused.
    @Test func aRefreshWithAnotherKeyIsRefused() async throws {
        // Glewlwyd has one user and one registered loopback port: tests take turns.
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = URLSessionTransport()
            let (client, _, tokens) = try await Self.login(issuer: issuer, transport: transport)
            var stolen = tokens
            stolen.dpopKey = try DPoPKey.generate()
            await #expect(throws: OAuthError.self) { _ = try await client.refresh(stolen) }
        }
    }
}
