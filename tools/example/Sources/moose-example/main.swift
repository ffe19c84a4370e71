// The code an app copies to use Moose. Run: swift run --package-path tools/example moose-example
// (MOOSE_IDP_ISSUER names the provider; $BROWSER, if set, is the command that opens the login page.)
import Foundation
import Moose

struct UserInfo: Endpoint {
    let baseURL: URL
    var path: String { "/userinfo/" }
    var requiresAuthentication: Bool { true }   // AuthInterceptor attaches the token
}

/// Opens the login page: `$BROWSER` (tests use a scripted one), else xdg-open.
func openBrowser(_ url: URL) throws {
    let command = (ProcessInfo.processInfo.environment["BROWSER"] ?? "xdg-open").split(separator: " ").map(String.init)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = command + [url.absoluteString]
    try process.run()
}

let issuer = ProcessInfo.processInfo.environment["MOOSE_IDP_ISSUER"] ?? "http://127.0.0.1:8765"
let transport = URLSessionTransport()

// 1. Discovery: endpoints and keys from the provider.
let metadata = try await Discovery(transport: transport).metadata(for: issuer)
let client = OAuthClient(metadata: metadata, clientID: "moose-cli", transport: transport)
guard let jwksURI = metadata.jwksURI else { fatalError("\(issuer) publishes no JWKS") }
let idTokens = IDTokenValidator(issuer: metadata.issuer, clientID: client.clientID,
                                jwks: JWKSCache(url: jwksURI, transport: transport))

// 2. The secret store: tokens encrypted at rest, the key in a separate 0600 file.
let home = FileManager.default.temporaryDirectory.appendingPathComponent("moose-example-\(getpid())")
defer { try? FileManager.default.removeItem(at: home) }
let store = try SecretStore(path: home.appendingPathComponent("data/store.sqlite").path,
                            masterKey: .keyFile(home.appendingPathComponent("config/store.key").path))
let sessions = EncryptedSessionStorage(store: store)

// 3. Log in: authorization code + PKCE with a loopback redirect.
let agent = try LoopbackUserAgent { url in try openBrowser(url) }
let login = AuthorizationCodeFlow(client: client, redirectURI: agent.redirectURI, userAgent: agent, idTokens: idTokens)
let tokens = try await login.authorize(AuthorizationParameters(scopes: ["openid", "profile"]))
try await sessions.replace(Session(issuer: metadata.issuer, clientID: client.clientID, tokens: tokens), key: "example")

// 4. One coordinator per session: every request gets a valid token, one refresh at a time.
let coordinator = RefreshCoordinator(key: "example", storage: sessions, authorizer: login)

// 5. An HTTP client for the API, with the AuthInterceptor in its pipeline.
let api = HTTPClient(transport: transport, interceptors: [AuthInterceptor(coordinator: coordinator)])
let me = try await api.json(from: UserInfo(baseURL: URL(string: issuer)!))
print("UserInfo says: signed in as \(me["sub"]?.string ?? "?")")

// Force a refresh the way a 401 would, and call again: the interceptor retries with the new token.
let current = try await coordinator.accessToken()
let fresh = try await coordinator.refresh(rejecting: current)
print("Refreshed: generation \(current.generation) → \(fresh.generation)")
let again = try await api.json(from: UserInfo(baseURL: URL(string: issuer)!))
print("UserInfo again: \(again["sub"]?.string ?? "?")")

// 6. Log out: revoke at the provider, wipe the local session.
let result = await client.logout(try await sessions.load("example")?.session.tokens ?? tokens)
try await sessions.delete("example")
await coordinator.didLogOut()
print("Logged out (refresh token revoked: \(result.refreshTokenRevoked == true))")
