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
}
