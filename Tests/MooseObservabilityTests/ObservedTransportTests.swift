#if MooseObservability
import CoreMetrics
import Foundation
import InMemoryTracing
import MetricsTestKit
import MooseHTTP
import MooseObservability
import MooseOAuth
import MooseSQLiteStorage
import MooseSecretStore
import MooseTestSupport
import MooseURLSession
import Synchronization
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
        let client = OAuthClient(
            metadata: metadata, clientID: "moose-service", authentication: .clientSecretBasic("moose-service-secret"),
            transport: transport)
        let tokens = try await ClientCredentialsFlow(client: client).authorize(AuthorizationParameters(scopes: []))
        let wrong = OAuthClient(
            metadata: metadata, clientID: "moose-service", authentication: .clientSecretBasic("not-the-secret"),
            transport: transport)
        await #expect(throws: OAuthError.self) {
            _ = try await ClientCredentialsFlow(client: wrong).authorize(AuthorizationParameters(scopes: []))
        }

        let ok = try metrics.expectCounter(
            "moose_token_requests_total", [("grant", "client_credentials"), ("outcome", "ok")])
        #expect(ok.lastValue == 1)
        let refused = try metrics.expectCounter(
            "moose_token_requests_total", [("grant", "client_credentials"), ("outcome", "refused")])
        #expect(refused.lastValue == 1)
        // discovery
        #expect(try metrics.expectCounter("moose_provider_requests_total", [("outcome", "ok")]).lastValue ?? 0 >= 1)
        #expect(
            try metrics.expectTimer("moose_token_request_duration_seconds", [("grant", "client_credentials")]).values
                .count == 2)

        let spans = tracer.finishedSpans
        let token = spans.filter { $0.operationName == "oauth.token" }
        #expect(token.count == 2, "\(spans.map(\.operationName))")
        #expect(
            token.allSatisfy { $0.attributes["oauth.grant_type"]?.toSpanAttribute() == .string("client_credentials") })
        #expect(spans.contains { $0.operationName == "oauth.request" })
        for span in spans {
            let text = "\(span.attributes)"
            #expect(
                !text.contains(tokens.accessToken) && !text.contains("moose-service-secret")
                    && !text.contains("not-the-secret"), "\(text)")
        }
    }

    @Test func refreshesAreCountedFromTheCoordinatorsEvents() async throws {
        let metrics = TestMetrics()
        let storage = InMemorySessionStorage()
        let expired = TokenSet(accessToken: "old", refreshToken: "r1", expiresAt: Date().addingTimeInterval(-5))
        _ = try await storage.replace(
            OAuthSession(issuer: "https://id.example.com", clientID: "c", tokens: expired), key: "k")
        let coordinator = RefreshCoordinator(key: "k", storage: storage) { _ in
            TokenSet(accessToken: "new", refreshToken: "r2", expiresAt: Date().addingTimeInterval(3600))
        }
        let task = CoordinatorMetrics.record(coordinator, metrics: metrics)
        defer { task.cancel() }
        try await Task.sleep(nanoseconds: 50_000_000) // the listener is registered
        _ = try await coordinator.accessToken()
        for _ in 0..<100
        where (try? metrics.expectCounter("moose_refreshes_total", [("outcome", "ok")]))?.lastValue != 1 {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        #expect(try metrics.expectCounter("moose_refreshes_total", [("outcome", "ok")]).lastValue == 1)
    }

    /// Eight callers after expiry in one process: one grant, the rest joined; a second coordinator on
    /// the same store file (another process) reads the fresh token without a grant. The store's
    /// operations are counted by operation and outcome, a lost compare-and-set as `conflict`.
    @Test func theSingleFlightAndTheStoresOperationsAreCounted() async throws {
        let metrics = TestMetrics()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-observed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SecretStore(
            path: folder.appendingPathComponent("store.sqlite").path, masterKey: .raw([UInt8](repeating: 7, count: 32)))
        let storage = ObservedSessionStorage.wrapping(EncryptedSessionStorage(store: store), metrics: metrics)
        let expired = TokenSet(accessToken: "old", refreshToken: "r1", expiresAt: Date().addingTimeInterval(-5))
        let first = try await storage.replace(
            OAuthSession(issuer: "https://id.example.com", clientID: "c", tokens: expired), key: "k")
        let grants = Mutex(0)
        let refresher: @Sendable (TokenSet) async throws -> TokenSet = { _ in
            grants.withLock { $0 += 1 }
            try await Task.sleep(nanoseconds: 200_000_000)
            return TokenSet(accessToken: "new", refreshToken: "r2", expiresAt: Date().addingTimeInterval(3600))
        }
        let coordinator = RefreshCoordinator(key: "k", storage: storage, refresher: refresher)
        let task = CoordinatorMetrics.record(coordinator, metrics: metrics)
        defer { task.cancel() }
        try await Task.sleep(nanoseconds: 50_000_000) // the listeners are registered
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try await coordinator.accessToken().value } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(tokens == Array(repeating: "new", count: 8) && grants.withLock { $0 } == 1)

        let other = RefreshCoordinator(key: "k", storage: storage, refresher: refresher)
        let otherTask = CoordinatorMetrics.record(other, metrics: metrics)
        defer { otherTask.cancel() }
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(try await other.accessToken().value == "new" && grants.withLock { $0 } == 1)

        func count(_ label: String, _ dimensions: [(String, String)]) -> Int64 {
            (try? metrics.expectCounter(label, dimensions))?.totalValue ?? 0
        }
        for _ in 0..<1000
        where count("moose_single_flight_total", [("outcome", "read")]) == 0
            || count("moose_single_flight_total", [("outcome", "granted")]) == 0
        {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        #expect(count("moose_single_flight_total", [("outcome", "granted")]) == 1)
        #expect(
            count("moose_single_flight_total", [("outcome", "joined")]) >= 1, "eight concurrent callers: some joined")
        #expect(
            count("moose_single_flight_total", [("outcome", "read")]) == 1,
            "the second coordinator read the first one's refresh")
        #expect(count("moose_store_operations_total", [("operation", "replace"), ("outcome", "ok")]) == 1)
        // One refresh, two fenced writes: the record of the rotation in flight, then the answer.
        #expect(count("moose_store_operations_total", [("operation", "save"), ("outcome", "ok")]) == 2)
        #expect(count("moose_store_operations_total", [("operation", "acquire_lease"), ("outcome", "ok")]) == 1)
        #expect(count("moose_store_operations_total", [("operation", "release_lease"), ("outcome", "ok")]) == 1)
        #expect(count("moose_store_operations_total", [("operation", "load"), ("outcome", "ok")]) >= 2)

        // A compare-and-set on a generation that is gone: a conflict, counted as one.
        await #expect(throws: OAuthError.self) {
            _ = try await storage.save(
                OAuthSession(issuer: "https://id.example.com", clientID: "c", tokens: expired), key: "k",
                expectedGeneration: first, lease: nil)
        }
        #expect(count("moose_store_operations_total", [("operation", "save"), ("outcome", "conflict")]) == 1)
        #expect(
            try metrics.expectTimer("moose_store_operation_duration_seconds", [("operation", "save")]).values.count == 3
        )
    }
}
#endif
