import Foundation
import MooseCrypto
import MooseOAuth
import MooseSQLiteStorage
import MooseSecretStore
import MooseTestSupport
import Testing

/// Issue "The first hour", §3: a login that replaces a session (an earlier login, or a second login of
/// the same profile finishing at the same moment) revokes the replaced refresh token at the provider:
/// no valid refresh token is left behind with no one holding it. Against the test IdP, in a real store.
struct ReplacedLoginTests {
    @Test func theReplacedRefreshTokenIsRevokedSequentiallyAndConcurrently() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-replaced-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SecretStore(
            path: folder.appendingPathComponent("store.sqlite").path, masterKey: .raw(try SecureRandom.bytes(count: 32))
        )
        let engine = SessionEngine(key: "default", storage: EncryptedSessionStorage(store: store))
        let client = try await TestIdP.client("moose-cli")

        // One after the other: the second login's store write revokes the first's refresh token.
        let (_, first, _) = try await LoginIntegrationTests.login(scopes: ["openid"])
        let (_, second, _) = try await LoginIntegrationTests.login(scopes: ["openid"])
        try await engine.completeLogin(first, client: client)
        try await engine.completeLogin(second, client: client)
        await #expect(throws: OAuthError.self, "the replaced refresh token still works") {
            _ = try await client.refresh(first)
        }
        let stored = try #require(try await engine.storage.load("default")).session.tokens
        #expect(stored.refreshToken == second.refreshToken)

        // Two at once: whichever lands second revokes the other's; the stored one stays valid.
        let (_, third, _) = try await LoginIntegrationTests.login(scopes: ["openid"])
        let (_, fourth, _) = try await LoginIntegrationTests.login(scopes: ["openid"])
        async let a: OAuthSession = engine.completeLogin(third, client: client)
        async let b: OAuthSession = engine.completeLogin(fourth, client: client)
        _ = try await (a, b)
        let kept = try #require(try await engine.storage.load("default")).session.tokens
        let lost = kept.refreshToken == third.refreshToken ? fourth : third
        await #expect(throws: OAuthError.self, "the refresh token of the login that lost the race still works") {
            _ = try await client.refresh(lost)
        }
        await #expect(throws: OAuthError.self) { _ = try await client.refresh(second) }
        _ = try await client.refresh(kept) // the kept session is live
    }
}
