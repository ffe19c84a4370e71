import Foundation
import MooseJWT
import MooseOAuth
import Testing

/// Issue "The first hour", §4: a refresh that brings an ID token with names renames the session (a
/// device login without an ID token showed none, or UserInfo's); one without names keeps them.
struct RefreshRenamingTests {
    @Test func namesInARefreshedIDTokenReplaceTheSessionsNames() async throws {
        let storage = InMemorySessionStorage()
        let expired = TokenSet(
            accessToken: "old", refreshToken: "r1", expiresAt: Date().addingTimeInterval(-10), scopes: ["openid"])
        _ = try await storage.replace(
            OAuthSession(
                issuer: "https://id.example.com", clientID: "tv", tokens: expired,
                attributes: ["moose.name": "Old Name"]), key: "tv")
        let signer = try JWTSigner(
            key: JWTKey(secret: Array("a secret of thirty-two bytes, ok".utf8)), algorithm: .hs256)
        let idToken = try signer.sign([
            "sub": .string("42"), "preferred_username": .string("alice"), "name": .string("Alice Liddell")
        ])
        let coordinator = RefreshCoordinator(key: "tv", storage: storage) { _ in
            TokenSet(
                accessToken: "new", refreshToken: "r2", idToken: idToken, expiresAt: Date().addingTimeInterval(3600),
                scopes: ["openid"])
        }
        _ = try await coordinator.accessToken()
        let stored = try #require(try await storage.load("tv")).session
        #expect(
            stored.attributes["moose.preferred_username"] == "alice"
                && stored.attributes["moose.name"] == "Alice Liddell")
        #expect(SessionSummary(key: "tv", session: stored).displayName == "alice")
    }

    /// Who a session acts as, one rule for `moose login` and `moose status`: the client of a
    /// client-credentials grant, a workload's source kind (never its path or variable), else the person.
    @Test func thePrincipalNamesTheClientTheWorkloadOrThePerson() {
        func summary(_ grant: SessionPlan.Grant?, attributes: [String: String] = [:]) -> SessionSummary {
            var plan = SessionPlan(name: "p", issuer: "https://id.example.com", clientID: "svc", scopes: [])
            if let grant { plan.grant = grant }
            let session = OAuthSession(
                issuer: "https://id.example.com", clientID: "svc", tokens: TokenSet(accessToken: "a", scopes: []),
                subject: "42", attributes: plan.stored(in: attributes))
            return SessionSummary(key: "p", session: session)
        }
        #expect(summary(.clientCredentials, attributes: ["moose.name": "Alice"]).principal == "client svc")
        #expect(summary(.workload(.init(source: "file:/run/secrets/token"))).principal == "workload file")
        #expect(summary(.workload(.init(source: "github"))).principal == "workload github")
        #expect(
            summary(.workload(.init(source: nil)), attributes: ["moose.email": "a@example.com"]).principal
                == "client svc", "a workload whose source is its app's own acts as its client")
        #expect(summary(nil, attributes: ["moose.preferred_username": "alice"]).principal == "alice")
        #expect(summary(nil).principal == "42")
    }
}
