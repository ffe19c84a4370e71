import Foundation
import MooseHTTP
import MooseOAuth
import MooseOAuthSystem
import MooseTestSupport
import MooseURLSession
import Synchronization
import Testing

/// Issue "The first hour", §1: with the library's defaults (a 30 s margin, the loop guard at 5
/// refreshes in 30 s) a provider issuing tokens that live 5 s must cost one refresh per token
/// lifetime — not one per call, and never `refreshLimit`. Against a real provider (a second test IdP
/// whose access tokens live 5 s), through `TokenManager`, its `AuthMiddleware` and `APIClient`.
@Suite(.serialized)
struct ShortLivedTokenTests {
    struct UserInfo: Endpoint {
        let baseURL: URL
        var path: String { "/userinfo/" }
        var requiresAuthentication: Bool { true }
    }

    @Test func fiveSecondTokensCostOneRefreshPerLifetimeWithTheDefaults() async throws {
        let idp = try await SecondIdP.start(tokenSeconds: 5)
        do {
            try await run(idp)
        } catch {
            await idp.stop()
            throw error
        }
        await idp.stop()
    }

    private func run(_ idp: SecondIdP) async throws {
        let spy = TokenEndpointSpy(URLSessionTransport())
        let moose = TokenManager(
            issuer: idp.issuer, clientID: "moose-cli", storage: InMemorySessionStorage(), transport: spy,
            scopes: ["openid"]) // RefreshCoordinator.Configuration() defaults
        let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: URLSessionTransport())
        try await moose.login(
            with: .loopback(timeout: 30) { url in
                let redirect =
                    URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first {
                        $0.name == "redirect_uri"
                    }?.value ?? ""
                try await browser.visit(url, stopAt: redirect)
            })
        let afterLogin = spy.tokenCalls
        let first = try await moose.accessToken()
        #expect(first.expiresAt.map { $0.timeIntervalSinceNow <= 5.5 } == true, "the provider's tokens live 5 s")

        // No refresh before expiry: calls in the first part of the token's life use it.
        for _ in 0..<20 { #expect(try await moose.accessToken().value == first.value) }
        #expect(
            spy.tokenCalls == afterLogin, "\(spy.tokenCalls - afterLogin) refreshes of a token that had seconds to live"
        )

        // After expiry: 10 requests at once through the middleware → one refresh, ten answers.
        let expiry = try #require(first.expiresAt)
        try await Task.sleep(nanoseconds: UInt64(max(expiry.timeIntervalSinceNow + 0.3, 0) * 1e9))
        let api = APIClient(transport: URLSessionTransport(), middlewares: [moose.middleware])
        let base = try #require(URL(string: idp.issuer))
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<10 { group.addTask { try await api.send(UserInfo(baseURL: base)).status.code } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 10), "\(statuses)")
        #expect(
            spy.tokenCalls - afterLogin == 1, "\(spy.tokenCalls - afterLogin) refreshes for 10 callers after expiry")

        // A minute of steady calls (every 100 ms): one refresh per token (refreshed in its last
        // quarter, so every 3.75–5 s), never refused by the loop guard.
        let before = spy.tokenCalls
        let started = Date()
        var calls = 0
        while Date().timeIntervalSince(started) < 60 {
            do {
                _ = try await moose.accessToken()
            } catch {
                Issue.record("call \(calls) after \(Int(Date().timeIntervalSince(started))) s failed: \(error)")
                break
            }
            calls += 1
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        let refreshes = spy.tokenCalls - before
        #expect((11...17).contains(refreshes), "\(refreshes) refreshes in a minute of 5 s tokens (\(calls) calls)")
    }
}
