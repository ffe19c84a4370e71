// docs/library.md, ```swift block 1: the region is quoted there word for word (DocSnippetTests).
import Foundation
import Moose

func library1() async throws {
    // snippet begins
    // The code an app copies to use Moose. Run: swift run --package-path tools/example moose-example
    // (MOOSE_IDP_ISSUER names the provider; $BROWSER, if set, is the command that opens the login page.)

    struct UserInfo: Endpoint {
        let baseURL: URL
        var path: String { "/userinfo/" }
        var requiresAuthentication: Bool { true } // the manager's middleware attaches the token
    }

    let issuer = ProcessInfo.processInfo.environment["MOOSE_IDP_ISSUER"] ?? "http://127.0.0.1:8765"
    let home = FileManager.default.temporaryDirectory.appendingPathComponent("moose-example-\(getpid())")
    defer { try? FileManager.default.removeItem(at: home) }

    // 1. One object: issuer + client + storage (tokens encrypted at rest, the key in a 0600 file).
    let transport = URLSessionTransport()
    let store = try SecretStore(
        path: home.appendingPathComponent("data/store.sqlite").path,
        masterKey: .keyFile(home.appendingPathComponent("config/store.key").path))
    let moose = TokenManager(
        issuer: issuer, clientID: "moose-cli", storage: EncryptedSessionStorage(store: store),
        transport: transport, scopes: ["openid", "profile"])

    // 2. Log in: authorization code + PKCE with a loopback redirect.
    // The login page opens in $BROWSER (tests use a scripted one), else xdg-open: SystemBrowser starts it
    // without the app's descriptors (the loopback listener stays the app's) and with default signals.
    let user = try await moose.login(with: .loopback { url in SystemBrowser().open(url) })
    print("Signed in as \(user.displayName ?? "?")")

    // 3. Requests through an HTTP client with the manager's middleware: a valid token, one refresh at a time.
    let api = APIClient(transport: transport, middlewares: [moose.middleware])
    let me = try await api.json(from: UserInfo(baseURL: URL(string: issuer)!))
    print("UserInfo says: signed in as \(me["sub"]?.string ?? "?")")

    // Force a refresh the way a 401 would, and call again: the middleware retries with the new token.
    let current = try await moose.accessToken()
    let fresh = try await moose.coordinator.refresh(rejecting: current)
    print("Refreshed: generation \(current.generation) → \(fresh.generation)")
    let again = try await api.json(from: UserInfo(baseURL: URL(string: issuer)!))
    print("UserInfo again: \(again["sub"]?.string ?? "?")")

    // 4. Log out: revoke at the provider, end-session URL, wipe the local session — one call.
    let result = await moose.logout()
    print("Logged out (refresh token revoked: \(result.refreshTokenRevoked == true))")
    // snippet ends
}
