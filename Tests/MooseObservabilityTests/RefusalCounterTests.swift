#if MooseObservability
import Foundation
import MetricsTestKit
import MooseCrypto
import MooseJWT
import MooseObservability
import MooseResourceServer
import Testing

/// Issue 41 §3: a resource server's refusals are counted by code and status through `RefusalCounter`,
/// with nothing from the request (token, reason, path) in a dimension. A real `ResourceServer` with real
/// keys refuses; swift-metrics' own `TestMetrics` reads the counters.
struct RefusalCounterTests {
    static let issuer = "https://id.example.com"
    static let resource = "https://api.example.com"

    /// An RFC 9068 access token for the API, signed by `key`.
    static func token(signedBy key: PrivateKey, scope: String = "api.read") throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return try JWTSigner(key: JWTKey(privateKey: key, keyID: "k1"), algorithm: .es256).sign(
            [
                "iss": .string(issuer), "sub": "alice", "aud": .string(resource), "client_id": "app",
                "iat": .number(JSONNumber(now)), "exp": .number(JSONNumber(now + 300)), "jti": "j1",
                "scope": .string(scope)
            ], extraHeader: ["typ": "at+jwt"])
    }

    @Test func everyRefusalIsCountedByCodeAndStatusAndNothingElse() async throws {
        let key = try PrivateKey.generate(.ec(.p256))
        let server = ResourceServer(
            configuration: ResourceServerConfiguration(
                issuer: Self.issuer, resource: Self.resource, algorithms: [.es256]),
            keys: StaticAccessTokenKeys([try JWTKey(publicKey: key.publicKey(), keyID: "k1")]))
        let metrics = TestMetrics()
        let counter = RefusalCounter(metrics: metrics)
        let forged = try Self.token(signedBy: try PrivateKey.generate(.ec(.p256)))
        let attempts: [String?] = [
            nil, "Basic YWxpY2U6c2VjcmV0", "Bearer \(forged)", "Bearer \(forged)", "Bearer a b",
            "Bearer \(try Self.token(signedBy: key, scope: "other"))"
        ]
        for authorization in attempts {
            do throws(ResourceServerRefusal) {
                _ = try await server.verify(
                    authorizationHeader: authorization, dpopHeader: nil, method: "GET", url: Self.resource + "/x",
                    requiredScopes: ["api.read"])
                Issue.record("accepted \(authorization ?? "nothing")")
            } catch {
                counter.onRefusal(error)
            }
        }
        let good = try await server.verify(
            authorizationHeader: "Bearer \(try Self.token(signedBy: key))", dpopHeader: nil, method: "GET",
            url: Self.resource + "/x", requiredScopes: ["api.read"])
        #expect(good.subject == "alice")

        func count(_ code: String, _ status: String) throws -> Int64? {
            try metrics.expectCounter(RefusalCounter.label, [("code", code), ("status", status)]).totalValue
        }
        let seen = metrics.counters.map { "\($0.label) \($0.dimensions) \($0.totalValue)" }
        #expect(try count("missing_credentials", "401") == 1, "\(seen)")
        #expect(try count("unsupported_scheme", "401") == 1)
        #expect(try count("invalid_token", "401") == 2)
        #expect(try count("invalid_request", "400") == 1)
        #expect(try count("insufficient_scope", "403") == 1)
        let dimensions = metrics.counters.flatMap(\.dimensions)
        #expect(Set(dimensions.map(\.0)) == ["code", "status"])
        #expect(!dimensions.contains { $0.1.contains(forged) || $0.1.contains("alice") || $0.1.contains("/x") })
    }
}
#endif
