import Foundation
import MooseCrypto
import MooseOAuth
import MooseOAuthSystem
import MooseSQLiteStorage
import MooseSecretStore
import MooseTestSupport
import Testing

/// A damaged session row (one bit of its sealed bytes flipped in the real store file by another
/// program) never locks a person out of an app: the manager says `sessionDamaged` — not the retryable
/// `storeUnavailable` — without asking the provider, the other sessions keep working, a login
/// replaces the row and a logout removes it. At the real test provider.
struct DamagedSessionTests {
    @Test func aDamagedRowIsFinalForItsSessionOnlyAndALoginOrLogoutIsTheWayOut() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-damaged-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("store.sqlite").path
        let storage = EncryptedSessionStorage(
            store: try SecretStore(path: path, masterKey: .raw(try SecureRandom.bytes(count: 32))))
        let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: TestIdP.transport)
        let login = TokenManager.LoginMethod.loopback(timeout: 30) { url in
            let redirect =
                URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first {
                    $0.name == "redirect_uri"
                }?.value ?? ""
            try await browser.visit(url, stopAt: redirect)
        }
        let first = TokenManager(
            issuer: TestIdP.issuer, clientID: "moose-cli", storage: storage, transport: TestIdP.transport)
        _ = try await first.login(with: login)
        // A second session beside it, which must keep working.
        let copy = try #require(try await storage.load("default")).session
        try await storage.replace(copy, key: "other")

        try DamagedRow.flip(storePath: path, name: "default")

        // A new manager (the next launch of the app) on the same file.
        let spy = TokenEndpointSpy(TestIdP.transport)
        let app = TokenManager(issuer: TestIdP.issuer, clientID: "moose-cli", storage: storage, transport: spy)
        let events = app.events
        let firstEvent = Task { () -> RefreshEvent? in
            for await event in events { return event }
            return nil
        }
        let code = await errorCode { _ = try await app.accessToken() }
        #expect(
            code == OAuthError.sessionDamaged,
            "a damaged row is sessionDamaged, not the retryable storeUnavailable (got \(String(describing: code)))")
        #expect(spy.tokenCalls == 0, "nothing was sent to the provider for a session that cannot be opened")
        let event = await firstEvent.value
        if case .needsReauthentication? = event {
        } else {
            Issue.record("expected needsReauthentication, got \(String(describing: event))")
        }
        #expect(try await storage.keys() == ["default", "other"], "the damaged row is still listed")

        let other = TokenManager(
            issuer: TestIdP.issuer, clientID: "moose-cli", storage: storage, key: "other", transport: TestIdP.transport)
        #expect(try await other.accessToken().value == copy.tokens.accessToken, "the other session keeps working")

        // A login replaces the damaged row: the grant is stored, and served.
        _ = try await app.login(with: login)
        let fresh = try await app.accessToken()
        #expect(try await storage.load("default")?.session.tokens.accessToken == fresh.value)

        // A logout removes a damaged row: nothing revoked (there were no tokens to read), wiped.
        try DamagedRow.flip(storePath: path, name: "default")
        let result = await app.logout()
        #expect(result.hadSession && result.wipeError == nil, "\(String(describing: result.wipeError))")
        #expect(result.revocationError?.code == OAuthError.sessionDamaged)
        #expect(try await storage.keys() == ["other"])
        #expect(try await storage.load("default") == nil)
        #expect(try await other.accessToken().value == copy.tokens.accessToken)
    }
}
