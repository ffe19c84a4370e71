import Foundation
import MooseCrypto
import MooseOAuth
import MooseSQLiteStorage
import MooseSecretStore
import MooseTestSupport
import Testing

/// A session is opened only by a manager whose provider and client made it (issue "One session,
/// whatever made it", §1): a session `moose login` made (the real CLI, at the real test provider) is
/// adopted and renewed by a `TokenManager` for the same issuer and client on the same store, and
/// refused — nothing handed out, nothing renewed, nothing written — by a manager for another client.
struct SessionOwnerTests {
    @Test func aManagerOpensACLISessionOfItsClientAndRefusesAnotherClients() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("moose-owner-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let environment = [
            "XDG_DATA_HOME": home.appendingPathComponent("data").path,
            "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
            "BROWSER": TestIdentityProvider.browserCommand, "MOOSE_STORE_KEY": ""
        ]
        let login = await runProcessOffThePool(
            [builtExecutable("moose"), "login", "--issuer", TestIdP.issuer, "--client-id", "moose-cli"],
            environment: environment)
        #expect(login.status == 0, "\(login.output)")
        let store = try SecretStore(
            path: home.appendingPathComponent("data/moose/store.sqlite").path,
            masterKey: .keyFile(home.appendingPathComponent("config/moose/store.key").path))
        let storage = EncryptedSessionStorage(store: store)
        let made = try #require(try await storage.load("default"))

        // Another client pointed at the CLI's key: refused, nothing sent, nothing written.
        let spy = TokenEndpointSpy(TestIdP.transport)
        let stranger = TokenManager(
            issuer: TestIdP.issuer, clientID: "moose-confidential", authentication: .clientSecretBasic("x"),
            storage: storage, transport: spy)
        var refused: OAuthError?
        do { _ = try await stranger.accessToken() } catch { refused = error as? OAuthError }
        #expect(refused?.code == OAuthError.invalidConfiguration, "\(String(describing: refused))")
        #expect(refused?.message.contains("belongs to client moose-cli") == true, "\(String(describing: refused))")
        do {
            _ = try await stranger.coordinator.refreshNow(); Issue.record("another client renewed the CLI's session")
        } catch {}
        #expect(spy.tokenCalls == 0, "another client's manager sent a grant for the CLI's session")
        #expect(
            try await storage.load("default")?.generation == made.generation,
            "another client's manager wrote the CLI's session")

        // The same issuer and client (the app the profile was made for): adopted, and renewed.
        let owner = TokenManager(
            issuer: TestIdP.issuer, clientID: "moose-cli", storage: storage, transport: TestIdP.transport)
        // The token the CLI stored, while it is valid at all: the test IdP's live 60 s, and under CI's
        // parallel load the default 30 s margin was passed before this line (a refresh, not an adoption).
        if made.session.tokens.isValidLongEnough(5) {
            #expect(try await owner.accessToken(minimumValidity: 0).value == made.session.tokens.accessToken)
        }
        let renewed = try await owner.coordinator.refreshNow()
        #expect(renewed.value != made.session.tokens.accessToken)
        // …and the CLI goes on with what the app committed.
        let token = await runProcessOffThePool([builtExecutable("moose"), "token"], environment: environment)
        #expect(token.status == 0 && token.output.trimmingCharacters(in: .whitespacesAndNewlines) == renewed.value)
    }
}
