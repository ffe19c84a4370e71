// README, "Quick start: in an app": the code between the markers is quoted there word for word
// (ReadmeQuickStartTests checks it), and compiled here with the package's tests.
// README quick start begins
import Foundation
import MooseHTTP
import MooseOAuth
import MooseOAuthSystem
import MooseURLSession

struct MyProfile: Endpoint { // an API call that needs the user's token
    var baseURL: URL { URL(string: "https://api.example.com")! }
    var path: String { "/me" }
    var requiresAuthentication: Bool { true }
}

func quickStart(storage: any SessionStorage, openBrowser: @escaping @Sendable (URL) async throws -> Void) async throws {
    let transport = URLSessionTransport()
    let moose = TokenManager(
        issuer: "https://id.example.com", clientID: "my-app", storage: storage, transport: transport)
    // browser, PKCE, the redirect to http://127.0.0.1:53682/callback (register that exact URI: most providers match it)
    let user = try await moose.login(with: .loopback(port: 53682, open: openBrowser))
    let token = try await moose.accessToken() // valid now; one refresh however many callers ask
    // the token on every call; a 401 refreshes once
    let api = APIClient(transport: transport, middlewares: [moose.middleware])
    let me = try await api.json(from: MyProfile())
    print(user.displayName ?? "-", token.expiresAt ?? "-", me["sub"]?.string ?? "-")
    _ = await moose.logout() // revoke, end-session URL, wipe the local session
}
// README quick start ends
