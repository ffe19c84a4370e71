import Foundation
import MooseHTTP
@testable import MooseOAuth
import MooseTesting
import Synchronization
import Testing

/// Offline is not "logged out": with a reachability that says offline, a refresh fails at once as
/// `offline`, sends nothing, keeps the session, and runs by itself when the network is back.
struct ReachabilityTests {
    @Test func offlineSpendsNothingAndThePostponedRefreshRunsWhenOnline() async throws {
        let sent = Mutex(0)
        let transport = ScriptedTransport { _ in
            let n = sent.withLock {
                $0 += 1; return $0
            }
            return .json(
                #"{"access_token":"fresh-\#(n)","token_type":"Bearer","expires_in":3600,"refresh_token":"r\#(n + 1)"}"#)
        }
        let client = OAuthClient(
            metadata: ProviderMetadata(
                issuer: "https://id.example.com", tokenEndpoint: URL(string: "https://id.example.com/token")),
            clientID: "c", transport: transport)
        let storage = InMemorySessionStorage()
        var tokens = TokenSet(accessToken: "old", refreshToken: "r1")
        tokens.expiresAt = Date().addingTimeInterval(-5)
        try await storage.replace(
            OAuthSession(issuer: "https://id.example.com", clientID: "c", tokens: tokens), key: "k")
        let reachability = ManualReachability(.offline)
        var configuration = RefreshCoordinator.Configuration()
        configuration.reachability = reachability
        // A retry schedule would sleep an hour: "at once" then means "not after an hour", a bound a
        // loaded CI machine cannot trip (a 20 s bound did, at 21.6 s, with every suite slow).
        configuration.backoff = 3600
        let coordinator = RefreshCoordinator(key: "k", storage: storage, configuration: configuration) {
            try await client.refresh($0)
        }
        let events = coordinator.events

        let started = Date()
        await #expect(throws: OAuthError.self) { _ = try await coordinator.accessToken() }
        do { _ = try await coordinator.accessToken() } catch let error as OAuthError {
            #expect(error.code == OAuthError.offline)
        }
        // At once: no request and no retry (a retry would send) — and well before a backoff schedule would end.
        #expect(sent.withLock { $0 } == 0, "nothing was sent while offline")
        #expect(Date().timeIntervalSince(started) < 600)
        let stored = try #require(try await storage.load("k"))
        #expect(stored.session.state == .active && stored.session.tokens.refreshToken == "r1", "the session is intact")

        reachability.set(.online)
        var refreshed = false
        for await event in events { if case .refreshed = event { refreshed = true; break } }
        #expect(refreshed)
        #expect(sent.withLock { $0 } == 1, "one postponed refresh when the network came back")
        #expect(coordinator.cachedAccessToken()?.value == "fresh-1")
    }

    @Test func theClientSaysOfflineInsteadOfRetrying() async throws {
        let sent = Mutex(0)
        let transport = ScriptedTransport { _ in
            sent.withLock { $0 += 1 }; return .json("{}")
        }
        struct Ping: Endpoint {
            var baseURL: URL { URL(string: "https://api.example.com")! }; var path: String { "/ping" }
        }
        let reachability = ManualReachability(.offline)
        let client = APIClient(
            transport: transport, retryPolicy: RetryPolicy(maxAttempts: 5), reachability: reachability)
        do {
            _ = try await client.send(Ping())
            Issue.record("a request went out while offline")
        } catch let error as HTTPRequestError {
            #expect(error.code == HTTPRequestError.offline)
        }
        #expect(sent.withLock { $0 } == 0)
        reachability.set(.online)
        _ = try await client.send(Ping())
        #expect(sent.withLock { $0 } == 1)
    }

    #if os(Linux)
    @Test func theSystemMonitorSeesThisMachineOnline() {
        let reachability = SystemReachability()
        reachability.start()
        defer { reachability.stop() }
        #expect(reachability.status == .online, "a machine running these tests has a non-loopback interface up")
    }
    #endif
}
