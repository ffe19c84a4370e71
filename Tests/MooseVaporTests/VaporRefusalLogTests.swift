#if MooseVapor
import Foundation
import Logging
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseResourceServer
import MooseTestSupport
import MooseVapor
import Synchronization
import Testing
import VaporTesting

/// The Vapor middleware and authenticator log each refusal's reason (never the token or the query)
/// and count it; an unsupported scheme gets 401 with bare challenges. Local keys: no provider needed.
@Suite struct VaporRefusalLogTests {
    static let issuer = "https://id.example.com"
    static let resource = "https://api.example.com"

    @Test func refusalsAreLoggedWithTheirReasonAndCounted() async throws {
        let key = try PrivateKey.generate(.ec(.p256))
        let signer = try JWTSigner(key: JWTKey(privateKey: key, keyID: "k1"), algorithm: .es256)
        let now = Int64(Date().timeIntervalSince1970)
        let claims: JSONObject = [
            "iss": .string(Self.issuer), "sub": "alice", "aud": "https://elsewhere.example", "client_id": "app",
            "exp": .number(JSONNumber(now + 300)), "iat": .number(JSONNumber(now)), "jti": "t1", "scope": "api.read"
        ]
        let token = try signer.sign(claims, extraHeader: ["typ": "at+jwt"])
        let server = ResourceServer(
            configuration: ResourceServerConfiguration(
                issuer: Self.issuer, resource: Self.resource, algorithms: [.es256]),
            keys: StaticAccessTokenKeys([try JWTKey(publicKey: key.publicKey(), keyID: "k1")]))
        let logs = CapturedLogs()
        let count = Mutex(0)
        let counted: @Sendable (ResourceServerRefusal) -> Void = { _ in count.withLock { $0 += 1 } }
        try await withApp(configure: { app in
            app.logger.logLevel = .error
            app.grouped(
                ResourceServerMiddleware(
                    server: server, publicBaseURL: Self.resource, logger: logs.logger, onRefusal: counted)
            ).get("items") { _ in "ok" }
            app.grouped(
                ResourceServerAuthenticator(
                    server: server, publicBaseURL: Self.resource, logger: logs.logger, refusalLogLevel: .debug,
                    onRefusal: counted)
            ).get("optional") { _ in "ok" }
        }) { app in
            let tester = try app.testing()
            let refused = try await tester.sendRequest(
                .GET, "items?access_token=\(token)", headers: ["Authorization": "Bearer \(token)"])
            #expect(refused.status == .unauthorized)
            let basic = try await tester.sendRequest(.GET, "items", headers: ["Authorization": "Basic YWxpY2U6cHc="])
            #expect(basic.status == .unauthorized)
            let challenges = AuthenticationChallenge.parse(basic.headers["WWW-Authenticate"])
            #expect(challenges.map(\.scheme) == ["Bearer", "DPoP"] && challenges.allSatisfy { $0["error"] == nil })
            let optional = try await tester.sendRequest(
                .GET, "optional", headers: ["Authorization": "Bearer \(token)"])
            #expect(optional.status == .ok)
            // No credentials at the authenticator: expected there, neither logged nor counted.
            #expect(try await tester.sendRequest(.GET, "optional").status == .ok)
        }
        let refusals = logs.all.filter { $0.text.hasPrefix("access token refused") }
        #expect(refusals.map(\.level) == [.info, .info, .debug] && count.withLock { $0 } == 3)
        #expect(refusals.first?.text.contains("refusal.code=invalid_token") == true)
        #expect(refusals.first?.text.contains("refusal.reason=the token failed") == true)
        #expect(refusals.first?.text.contains("http.path=/items") == true)
        #expect(refusals.dropFirst().first?.text.contains("refusal.code=unsupported_scheme") == true)
        for record in logs.all {
            #expect(!record.text.contains(token) && !record.text.contains("access_token"))
            #expect(!record.text.contains("YWxpY2U6cHc="))
        }
    }
}
#endif
