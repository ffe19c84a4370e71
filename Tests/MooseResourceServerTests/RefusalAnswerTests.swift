import Foundation
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOAuth
@testable import MooseResourceServer
import Testing

/// What a refusal says (its code, reason, status and challenges) where it used to say something else,
/// `ResourceServer(metadata:…)`'s DPoP options, and the RFC 9728 document derived from the verifier.
@Suite struct RefusalAnswerTests {
    let harness: Harness
    init() throws { harness = try Harness() }

    func refused(
        _ server: ResourceServer, authorization: String?, dpop: String? = nil, url: String = Harness.url
    ) async throws -> ResourceServerRefusal {
        try #require(
            try await refusal {
                try await server.verify(authorizationHeader: authorization, dpopHeader: dpop, method: "GET", url: url)
            })
    }

    func challenge(_ refusal: ResourceServerRefusal, _ scheme: String) -> AuthenticationChallenge? {
        AuthenticationChallenge.parse(refusal.wwwAuthenticate).first { $0.hasScheme(scheme) }
    }

    /// RFC 9449 §4.3 check 1: two `DPoP` fields (joined with a comma) are refused as such, not as an
    /// encrypted token.
    @Test func twoDPoPHeadersAreRefusedAsTwoProofs() async throws {
        let token = try harness.token(bound: true)
        let joined = try harness.proof(for: token) + ", " + harness.proof(for: token)
        let refusal = try await refused(harness.server(), authorization: "DPoP \(token)", dpop: joined)
        #expect(refusal.code == ResourceServerRefusal.invalidDPoPProof && refusal.status == 401)
        #expect(refusal.reason.contains("several DPoP header fields"), "\(refusal.reason)")
        #expect(!refusal.reason.contains("encrypted"))
        #expect(challenge(refusal, "DPoP")?["error"] == "invalid_dpop_proof")
        #expect(challenge(refusal, "DPoP")?["error_description"] == "The request carries more than one DPoP proof")
    }

    /// `.required`: a Bearer token is answered with the DPoP challenge saying what happened.
    @Test func requiredDPoPSaysABearerTokenIsNotEnough() async throws {
        let server = harness.server(harness.configuration(dpop: .required))
        let refusal = try await refused(server, authorization: "Bearer \(try harness.token())")
        #expect(refusal.code == ResourceServerRefusal.invalidToken && refusal.status == 401)
        #expect(refusal.challenges.map(\.scheme) == ["DPoP"])
        let dpop = try #require(challenge(refusal, "DPoP"))
        #expect(dpop["error"] == "invalid_token")
        #expect(dpop["error_description"]?.contains("DPoP-bound access token") == true)
        #expect(dpop["resource_metadata"] != nil && dpop["algs"] != nil)
    }

    /// `.disabled`: a DPoP token is answered with the Bearer challenge saying DPoP is not accepted.
    @Test func disabledDPoPSaysDPoPIsNotAccepted() async throws {
        let server = harness.server(harness.configuration(dpop: .disabled))
        let token = try harness.token(bound: true)
        let refusal = try await refused(server, authorization: "DPoP \(token)", dpop: try harness.proof(for: token))
        #expect(refusal.code == ResourceServerRefusal.invalidRequest && refusal.status == 400)
        let bearer = try #require(challenge(refusal, "Bearer"))
        #expect(bearer["error"] == "invalid_request" && bearer["error_description"]?.contains("not DPoP") == true)
    }

    /// RFC 6750 §3.1: an unsupported scheme is answered like no credentials: 401, challenges without an
    /// error code (a 400 does not start an OAuth client's login).
    @Test(arguments: ["Basic YWxpY2U6c2VjcmV0", "Token abc", "Negotiate", "", "Bearers abc", "Basic a, Bearer b"])
    func anUnsupportedSchemeGets401WithBareChallenges(_ header: String) async throws {
        let refusal = try await refused(harness.server(), authorization: header)
        #expect(refusal.code == ResourceServerRefusal.unsupportedScheme && refusal.status == 401, "\(refusal)")
        #expect(refusal.challenges.map(\.scheme) == ["Bearer", "DPoP"])
        for challenge in AuthenticationChallenge.parse(refusal.wwwAuthenticate) {
            #expect(challenge["error"] == nil && challenge["error_description"] == nil)
            #expect(challenge["resource_metadata"] == "https://api.example.com/.well-known/oauth-protected-resource")
        }
    }

    /// The metadata initializer takes the same DPoP options as the configuration one: nonces and a
    /// replay cache shared between two servers (two processes behind a load balancer).
    @Test func theMetadataInitializerTakesNoncesAndASharedReplayCache() async throws {
        let (signer, jwk) = try KeyRotationTests.signer(kid: "k1")
        let endpoint = KeyRotationTests.JWKSEndpoint()
        endpoint.publish([jwk])
        let metadata = ProviderMetadata(
            issuer: Harness.issuer, jwksURI: URL(string: "https://id.example.com/jwks"))
        let shared = InMemoryDPoPReplayCache(clock: { Harness.now })
        let nonces = RotatingDPoPNonces(lifetime: 300, clock: { Harness.now })
        func make() throws -> ResourceServer {
            try ResourceServer(
                metadata: metadata, resource: Harness.resource, algorithms: [.es256], transport: endpoint,
                replayCache: shared, nonces: nonces
            ) {
                $0.clock = { Harness.now }
                $0.proofs = DPoPProofVerifier(clock: { Harness.now })
            }
        }
        let first = try make()
        let second = try make()
        let token = try harness.token(bound: true, signer: signer)
        let noNonce = try await refused(first, authorization: "DPoP \(token)", dpop: try harness.proof(for: token))
        #expect(noNonce.code == ResourceServerRefusal.useDPoPNonce)
        let nonce = try #require(noNonce.dpopNonce)
        let proof = try harness.proof(for: token, nonce: nonce)
        let principal = try await first.verify(
            authorizationHeader: "DPoP \(token)", dpopHeader: proof, method: "GET", url: Harness.url)
        #expect(principal.subject == "alice")
        // The other server saw the proof through the shared cache: a replay.
        let replay = try await refused(second, authorization: "DPoP \(token)", dpop: proof)
        #expect(replay.code == ResourceServerRefusal.invalidDPoPProof && replay.reason.contains("used before"))
    }

    /// The RFC 9728 document states the verifier's rules: every proof algorithm it accepts, DPoP's mode.
    @Test func theProtectedResourceDocumentFollowsTheVerifier() throws {
        let server = harness.server()
        let document = ProtectedResourceDocument(for: server, scopesSupported: ["api.read"])
        let accepted = DPoPProofVerifier.asymmetricAlgorithms.map(\.rawValue).sorted()
        #expect(accepted.count == 11)
        #expect(document.dpopSigningAlgorithms == accepted)
        #expect(document.resource == Harness.resource && document.authorizationServers == [Harness.issuer])
        #expect(document.url == server.configuration.resourceMetadataURL)
        #expect(!document.dpopBoundAccessTokensRequired)
        let algorithms = document.object["dpop_signing_alg_values_supported"]?.arrayValue?.compactMap(\.stringValue)
        #expect(algorithms == accepted)

        var narrow = harness.configuration(dpop: .required)
        narrow.proofs.allowedAlgorithms = [.es256, .hs256]
        let required = ProtectedResourceDocument(for: narrow, authorizationServers: ["https://other.example"])
        #expect(required.dpopSigningAlgorithms == ["ES256"] && required.dpopBoundAccessTokensRequired)
        #expect(required.authorizationServers == ["https://other.example"])
        // The DPoP challenge's algs say the same.
        let challenge = ResourceServer(configuration: narrow, keys: StaticAccessTokenKeys([]))
            .challenges(for: nil, error: nil).first { $0.scheme == "DPoP" }
        #expect(challenge?["algs"] == "ES256")

        let bearerOnly = ProtectedResourceDocument(for: harness.configuration(dpop: .disabled))
        #expect(
            bearerOnly.dpopSigningAlgorithms == nil && bearerOnly.object["dpop_signing_alg_values_supported"] == nil)
    }

    /// A refusal's log fields: code, status, reason, method and path; never the query (it may carry a token).
    @Test func logFieldsNameTheReasonAndNeverTheQuery() async throws {
        let token = try harness.token(["aud": "https://elsewhere.example"])
        let refusal = try await refused(harness.server(), authorization: "Bearer \(token)")
        let fields = refusal.logFields(method: "GET", path: "/items?access_token=\(token)")
        #expect(fields["refusal.code"] == "invalid_token" && fields["refusal.status"] == "401")
        #expect(fields["refusal.reason"] == refusal.reason && refusal.reason.contains("aud"))
        #expect(fields["http.path"] == "/items" && fields["http.method"] == "GET")
        #expect(!fields.values.contains { $0.contains(token) || $0.contains("access_token") })
        let hostile = refusal.logFields(method: "G\r\nET", path: "/a\nb" + String(repeating: "x", count: 1000))
        #expect(hostile["http.method"] == "G??ET" && hostile["http.path"]?.utf8.count == 256)
    }
}
