#if MooseObservability
import CoreMetrics
import Foundation
import InMemoryTracing
import MetricsTestKit
import MooseHTTP
import MooseObservability
import MooseOAuth
import MooseTestSupport
import MooseURLSession
import Testing
import Tracing

/// Issue "Without a person", §5: counters, timers and spans around real grants at the test IdP, read
/// with swift-metrics' and swift-distributed-tracing's own test backends; no token, secret or query in
/// any attribute or dimension.
struct ObservedTransportTests {
    @Test func grantsAreCountedTimedAndTracedWithoutASecret() async throws {
        let metrics = TestMetrics()
        let tracer = InMemoryTracer()
        let transport = ObservedTransport(URLSessionTransport(), metrics: metrics, tracer: tracer)
        let metadata = try await Discovery(transport: transport).metadata(for: TestIdentityProvider.issuer)
        let client = OAuthClient(metadata: metadata, clientID: "moose-service", authentication: .clientSecretBasic("moose-service-secret"),
                                 transport: transport)
        let tokens = try await ClientCredentialsFlow(client: client).authorize(AuthorizationParameters(scopes: []))
        let wrong = OAuthClient(metadata: metadata, clientID: "moose-service", authentication: .clientSecretBasic("not-the-secret"), transport: transport)
        await #expect(throws: OAuthError.self) { _ = try await ClientCredentialsFlow(client: wrong).authorize(AuthorizationParameters(scopes: [])) }

        let ok = try metrics.expectCounter("moose_token_requests_total", [("grant", "client_credentials"), ("outcome", "ok")])
        #expect(ok.lastValue == 1)
        let refused = try metrics.expectCounter("moose_token_requests_total", [("grant", "client_credentials"), ("outcome", "refused")])
        #expect(refused.lastValue == 1)
        #expect(try metrics.expectCounter("moose_provider_requests_total", [("outcome", "ok")]).lastValue ?? 0 >= 1)   // discovery
        #expect(try metrics.expectTimer("moose_token_request_duration", [("grant", "client_credentials")]).values.count == 2)

        let spans = tracer.finishedSpans
        let token = spans.filter { $0.operationName == "oauth.token" }
        #expect(token.count == 2, "\(spans.map(\.operationName))")
        #expect(token.allSatisfy { $0.attributes["oauth.grant_type"]?.toSpanAttribute() == .string("client_credentials") })
        #expect(spans.contains { $0.operationName == "oauth.request" })
        for span in spans {
            let text = "\(span.attributes)"
            #expect(!text.contains(tokens.accessToken) && !text.contains("moose-service-secret") && !text.contains("not-the-secret"), "\(text)")
        }
    }

    @Test func refreshesAreCountedFromTheCoordinatorsEvents() async throws {
        let metrics = TestMetrics()
        let storage = InMemorySessionStorage()
        let expired = TokenSet(accessToken: "old", refreshToken: "r1", expiresAt: Date().addingTimeInterval(-5))
        _ = try await storage.replace(OAuthSession(issuer: "https://id.example.com", clientID: "c", tokens: expired), key: "k")
        let coordinator = RefreshCoordinator(key: "k", storage: storage) { _ in
            TokenSet(accessToken: "new", refreshToken: "r2", expiresAt: Date().addingTimeInterval(3600))
        }
        let task = CoordinatorMetrics.record(coordinator, metrics: metrics)
        defer { task.cancel() }
        try await Task.sleep(nanoseconds: 50_000_000)   // the listener is registered
        _ = try await coordinator.accessToken()
        for _ in 0..<100 where (try? metrics.expectCounter("moose_refreshes_total", [("outcome", "ok")]))?.lastValue != 1 {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        #expect(try metrics.expectCounter("moose_refreshes_total", [("outcome", "ok")]).lastValue == 1)
    }
}
#endif
