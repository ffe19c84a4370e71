// An app's tests of its sign-in, renewal and failures against MooseTesting's TestProvider: in process,
// no network, a test clock. docs/testing.md shows these tests; tools/test runs them
// (swift test --package-path tools/example), so the page cannot rot.
import Foundation
import Moose
import MooseTesting
import Testing

/// The app's API call; the provider's UserInfo endpoint stands in for the app's own API.
struct Profile: Endpoint {
    let baseURL: URL
    var path: String { "/userinfo" }
    var requiresAuthentication: Bool { true } // the manager's middleware attaches the token
}

@Suite struct SignInTests {
    let clock = TestClock()
    let provider: TestProvider
    let manager: TokenManager
    let api: APIClient

    init() {
        provider = TestProvider(clock: clock.read)
        var configuration = RefreshCoordinator.Configuration()
        configuration.clock = clock.read // the app's clock is the provider's
        configuration.backoff = 0.01 // a retry waits 10 ms of real time, not 0.5 s
        manager = TokenManager(
            issuer: provider.issuer, clientID: "test-app", storage: InMemorySessionStorage(), transport: provider,
            scopes: ["openid", "profile", "offline_access"], configuration: configuration)
        api = APIClient(transport: provider, middlewares: [manager.middleware], retryPolicy: .none)
    }

    func signIn() async throws {
        try await manager.login(with: .userAgent(provider.browser, redirectURI: TestProvider.Client.defaultRedirect))
    }

    @Test func aTokenThatExpiredBeforeTheRequestIsRenewedOnce() async throws {
        try await signIn()
        clock.advance(by: 3600) // the access token has expired
        async let first = api.json(from: Profile(baseURL: URL(string: provider.issuer)!))
        async let second = api.json(from: Profile(baseURL: URL(string: provider.issuer)!))
        let answers = try await [first, second]
        #expect(answers.allSatisfy { $0["sub"]?.string == "alice" })
        #expect(provider.requests(to: .refresh).count == 1) // one refresh for both requests
    }

    @Test func aTokenTheAPIRefusesMidRequestIsRenewedAndTheRequestRetried() async throws {
        try await signIn()
        provider.clockSkew = 3600 // the provider thinks the token has expired; the app does not
        let profile = try await api.json(from: Profile(baseURL: URL(string: provider.issuer)!))
        #expect(profile["sub"]?.string == "alice")
        #expect(provider.requests(to: .userInfo).count == 2 && provider.requests(to: .refresh).count == 1)
    }

    @Test func theRotatedRefreshTokenIsTheOneUsedNext() async throws {
        try await signIn()
        clock.advance(by: 3600)
        _ = try await manager.accessToken()
        clock.advance(by: 3600)
        _ = try await manager.accessToken()
        let sent = provider.requests(to: .refresh).map { $0.field("refresh_token") }
        let issued = provider.refreshTokens.map(\.token)
        #expect(sent == [issued[0], issued[1]]) // never a spent one: no reuse, no revoked session
        #expect(!provider.refreshTokens.contains { $0.revoked })
    }

    @Test func aRevokedSessionSendsTheUserToTheSignIn() async throws {
        try await signIn()
        provider.revokeSessions()
        clock.advance(by: 3600)
        do {
            _ = try await manager.accessToken()
            Issue.record("a revoked session gave a token")
        } catch let error as OAuthError {
            #expect(error.errorClass == .needsLogin) // the app shows its sign-in screen
        }
    }

    @Test func anOutageDoesNotSignTheUserOut() async throws {
        try await signIn()
        provider.inject(.status(503), at: .token, count: .max)
        clock.advance(by: 3600)
        do {
            _ = try await manager.refreshNow()
            Issue.record("the refresh worked during the outage")
        } catch let error as OAuthError {
            #expect(error.errorClass == .retryable) // try later; the user stays signed in
        }
        #expect(try await manager.summary() != nil)
        provider.clearFaults()
        #expect(try await manager.accessToken().value.isEmpty == false)
    }
}
