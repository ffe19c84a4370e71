import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
@testable import MooseResourceServer
import MooseTesting
import Testing

/// `ResourceServer.verify(accessToken:)` (a token without a request), `ResourceServer(discovering:…)`
/// (a verifier from nothing but the issuer's URL) and the reports of what was accepted or refused.
@Suite struct BareTokenVerificationTests {
    let harness: Harness
    init() throws { harness = try Harness() }

    @Test func theTokenIsTakenOutOfWhatAPersonOrAPipeHandsOver() {
        #expect(ResourceServer.accessToken(in: Array("  abc.def \n".utf8)) == "abc.def")
        #expect(ResourceServer.accessToken(in: Array("Bearer   abc\r\n".utf8)) == "abc")
        #expect(ResourceServer.accessToken(in: Array("bEaReR abc".utf8)) == "abc")
        #expect(ResourceServer.accessToken(in: Array("Bearerabc".utf8)) == "Bearerabc")
        #expect(ResourceServer.accessToken(in: Array("Bearer\tabc".utf8)) == "abc")
        #expect(ResourceServer.accessToken(in: Array("Bearer \t abc".utf8)) == "abc")
        #expect(ResourceServer.accessToken(in: Array(" \t\n".utf8)) == nil)
        #expect(ResourceServer.accessToken(in: []) == nil)
        // Not UTF-8: replaced, never passed through as other bytes.
        #expect(ResourceServer.accessToken(in: [0xFF, 0x41]) == "\u{FFFD}A")
    }

    @Test func aBareTokenIsVerifiedAsBearer() async throws {
        let token = try harness.token()
        let principal = try await harness.server().verify(accessToken: token, requiredScopes: ["api.read"])
        #expect(principal.subject == "alice" && principal.scheme == .bearer && principal.verification == .signature)
        #expect(ResourceServer.isCompactJWS(token) && !ResourceServer.isCompactJWS("opaque-token"))

        // A DPoP-bound token: no proof can come with a bare token.
        let bound = try harness.token(bound: true)
        let refused = try #require(try await refusal { try await harness.server().verify(accessToken: bound) })
        #expect(refused.code == ResourceServerRefusal.invalidToken, "\(refused)")

        // A scope it lacks.
        let scope = try #require(
            try await refusal { try await harness.server().verify(accessToken: token, requiredScopes: ["api.write"]) })
        #expect(scope.code == ResourceServerRefusal.insufficientScope && scope.status == 403)
    }

    @Test func whatIsNoTokenIsSaidInATokensTerms() async throws {
        let spaced = try #require(
            try await refusal { try await harness.server().verify(accessToken: "two words\u{1B}[2J") })
        #expect(spaced.code == ResourceServerRefusal.invalidRequest && spaced.reason.contains("not an access token"))
        #expect(!spaced.reason.contains("Authorization") && !spaced.reason.contains("\u{1B}"))
        let huge = String(repeating: "a", count: 20_000)
        let long = try #require(try await refusal { try await harness.server().verify(accessToken: huge) })
        #expect(long.code == ResourceServerRefusal.invalidRequest && long.reason.contains("20000 bytes"), "\(long)")
        let opaque = try #require(try await refusal { try await harness.server().verify(accessToken: "opaque") })
        #expect(opaque.code == ResourceServerRefusal.invalidToken)
    }

    @Test func theReportsSayWhoAndHowNeverTheToken() async throws {
        let token = try harness.token()
        let principal = try await harness.server().verify(accessToken: token)
        let json = principal.jsonReport
        #expect(json["valid"] == .bool(true) && json["subject"]?.stringValue == "alice")
        #expect(json["client_id"]?.stringValue == "moose-app" && json["checked_by"]?.stringValue == "jwt")
        #expect(json["scopes"]?.arrayValue?.compactMap(\.stringValue) == ["api.read", "profile"])
        #expect(json["audiences"]?.arrayValue?.compactMap(\.stringValue) == [Harness.resource])
        #expect(json["expires_at"] == .number(JSONNumber(Int64(Harness.now.timeIntervalSince1970) + 300)))
        #expect(json["token_id"]?.stringValue == "token-1" && json["confirmation_thumbprint"] == .null)
        #expect(json["claims"]?["sub"]?.stringValue == "alice")
        let text = principal.textReport(resource: Harness.resource, now: Harness.now)
        #expect(
            text.split(separator: "\n").map(String.init) == [
                "valid: the token is accepted for \(Harness.resource)",
                "  subject   alice",
                "  client    moose-app",
                "  scopes    api.read profile",
                "  expires   2027-01-15T08:05:00Z (valid for 5m)",
                "  issuer    \(Harness.issuer)",
                "  checked   signature and claims (RFC 9068), keys from jwks_uri"
            ], "\(text)")
        #expect(!json.serialized().contains(token) && !text.contains(token))
        #expect(
            principal.textReport(resource: Harness.resource, now: Harness.now + 600).contains("(within the leeway)"))

        let refused = try #require(try await refusal { try await harness.server().verify(accessToken: "opaque") })
        #expect(
            refused.jsonReport
                == .object([
                    "valid": false, "error": "invalid_token", "status": .number(JSONNumber(Int64(401))),
                    "reason": .string(refused.reason)
                ]))
    }

    /// An access token of MooseTesting's provider (client credentials as `test-service`).
    static func serviceToken(_ provider: TestProvider) async throws -> String {
        let body = "grant_type=client_credentials&client_id=test-service&client_secret=service-secret"
        var request = APIRequest(
            method: .post, url: try #require(URL(string: provider.url(of: .token))), body: Data(body.utf8))
        request.headerFields[.contentType] = "application/x-www-form-urlencoded"
        let response = try await provider.send(request)
        let answer = try JSONValue(parsing: Array(response.body))
        return try #require(answer["access_token"]?.stringValue, "\(String(decoding: response.body, as: UTF8.self))")
    }

    @Test func aVerifierFromTheIssuersDiscoveryChecksItsJWTs() async throws {
        var configuration = TestProvider.Configuration()
        configuration.defaultAudience = Harness.resource
        let provider = TestProvider(configuration: configuration)
        let server = try await ResourceServer(
            discovering: provider.issuer, resource: Harness.resource, algorithms: JWTAlgorithm.asymmetric,
            transport: provider
        ) { $0.leeway = 5 }
        #expect(server.configuration.issuer == provider.issuer && server.configuration.leeway == 5)
        let principal = try await server.verify(accessToken: try await Self.serviceToken(provider))
        #expect(principal.clientID == "test-service" && principal.verification == .signature)
        // An issuer the transport finds no discovery document for: refused before any token arrives, as
        // the discovery error it is (the issuer rule and `iss` match are `ProviderMetadata.discover`'s own tests).
        let refusal = await #expect(throws: OAuthError.self) {
            _ = try await ResourceServer(
                discovering: "https://elsewhere.test", resource: Harness.resource, algorithms: [.rs256],
                transport: provider)
        }
        #expect(refusal?.code == OAuthError.discovery, "\(String(describing: refusal))")
    }

    @Test func aVerifierFromTheIssuersDiscoveryIntrospectsOpaqueTokens() async throws {
        var configuration = TestProvider.Configuration()
        configuration.accessTokenFormat = .opaque
        configuration.defaultAudience = Harness.resource
        let provider = TestProvider(configuration: configuration)
        let server = try await ResourceServer(
            discovering: provider.issuer, resource: Harness.resource, algorithms: JWTAlgorithm.asymmetric,
            transport: provider,
            introspection: .init(clientID: "test-confidential", clientSecret: "test-secret"))
        let token = try await Self.serviceToken(provider)
        #expect(!ResourceServer.isCompactJWS(token))
        let principal = try await server.verify(accessToken: token)
        #expect(principal.verification == .introspection && principal.jsonReport["checked_by"] == "introspection")
        #expect(principal.textReport(resource: Harness.resource).hasSuffix("checked   by introspection at the issuer"))
    }
}
