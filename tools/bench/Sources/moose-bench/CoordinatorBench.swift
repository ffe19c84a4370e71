import Foundation
import MooseCrypto
import MooseHTTP
import MooseOAuth
import MooseSecretStore
import MooseSQLiteStorage
import MooseURLSession
import Synchronization

/// The coordinator's hot path against a Mutex read of the same struct (single caller, 8 concurrent
/// callers, and from @MainActor code), and 1,000 callers after expiry against one bare refresh.
enum CoordinatorBench {
    struct Cached { var token: AccessToken? }

    static func nsPerCall(_ iterations: Int, _ body: () async throws -> Void) async rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<iterations { try await body() }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(iterations)
    }

    static func concurrentNsPerCall(
        _ tasks: Int, _ iterations: Int, _ body: @escaping @Sendable () async throws -> Void
    ) async throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<tasks { group.addTask { for _ in 0..<iterations { try await body() } } }
            try await group.waitForAll()
        }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(tasks * iterations)
    }

    @MainActor static func mainActorNs(
        _ coordinator: RefreshCoordinator, mutex: borrowing Mutex<Cached>, iterations: Int
    ) async throws -> (Double, Double, Double) {
        var sink = 0
        func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
        var t = now()
        for _ in 0..<iterations { sink &+= (mutex.withLock { $0.token })?.value.utf8.count ?? 0 }
        let mutexNs = Double(now() - t) / Double(iterations)
        t = now()
        for _ in 0..<iterations { sink &+= coordinator.cachedAccessToken()?.value.utf8.count ?? 0 }
        let cachedNs = Double(now() - t) / Double(iterations)
        t = now()
        for _ in 0..<iterations { sink &+= try await coordinator.accessToken().value.utf8.count }
        let asyncNs = Double(now() - t) / Double(iterations)
        if sink == 42 { print("") }
        return (mutexNs, cachedNs, asyncNs)
    }

    static func run() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-coord-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SecretStore(
            path: folder.appendingPathComponent("s.sqlite").path, masterKey: .raw(try SecureRandom.bytes(count: 32)))
        let sessions = EncryptedSessionStorage(store: store)
        let tokens = TokenSet(
            accessToken: String(repeating: "a", count: 40), expiresAt: Date().addingTimeInterval(3600))
        let session = OAuthSession(issuer: "https://x", clientID: "c", tokens: tokens)
        try sessions.replaceNow(session, key: "p")
        let coordinator = benchCoordinator(key: "p", storage: sessions, current: session) { $0 }
        let mutex = Mutex(Cached(token: try await coordinator.accessToken()))
        let iterations = 2_000_000
        var sink = 0
        for _ in 0..<3 { // warm up
            _ = await nsPerCall(100_000) { sink &+= (mutex.withLock { $0.token })?.value.utf8.count ?? 0 }
            _ = try await nsPerCall(100_000) { sink &+= try await coordinator.accessToken().value.utf8.count }
        }
        var rows: [(String, Double, Double)] = []
        let m1 = await nsPerCall(iterations) { sink &+= (mutex.withLock { $0.token })?.value.utf8.count ?? 0 }
        let c1 = try await nsPerCall(iterations) { sink &+= try await coordinator.accessToken().value.utf8.count }
        rows.append(("1 caller: `await accessToken()`", m1, c1))
        let m8 = try await concurrentNsPerCall(8, iterations / 8) {
            if (mutex.withLock { $0.token })?.value.utf8.count == -1 { print("") }
        }
        let c8 = try await concurrentNsPerCall(8, iterations / 8) {
            if try await coordinator.accessToken().value.utf8.count == -1 { print("") }
        }
        rows.append(("8 concurrent callers: `await accessToken()`", m8, c8))
        let (mm, mc, ma) = try await mainActorNs(coordinator, mutex: mutex, iterations: 200_000)
        rows.append(("from @MainActor: `cachedAccessToken()`", mm, mc))
        rows.append(("from @MainActor: `await accessToken()`", mm, ma))
        print("\n## RefreshCoordinator hot path (valid cached token, ns per call)\n")
        print("| | Mutex read of the same struct | Moose | ratio | target |")
        print("|---|---|---|---|---|")
        for (label, floor, moose) in rows {
            print(
                "| \(label) | \(String(format: "%.1f", floor)) | \(String(format: "%.1f", moose)) | \(String(format: "%.2fx", moose / floor)) | ≤ 2x |"
            )
        }
        if sink == 42 { print("") }
        await refreshHerd()
    }

    /// 1,000 callers on an expired token against one bare refresh request, on the test IdP.
    static func refreshHerd() async {
        guard let issuer = ProcessInfo.processInfo.environment["MOOSE_IDP_ISSUER"] else {
            print("\n(1,000-caller refresh skipped: set MOOSE_IDP_ISSUER, as tools/bench/run does)")
            return
        }
        do {
            let transport = URLSessionTransport()
            let metadata = try await Discovery(transport: transport).metadata(for: issuer)
            let client = OAuthClient(
                metadata: metadata, clientID: "moose-service",
                authentication: .clientSecretBasic("moose-service-secret"), transport: transport)
            let flow = ClientCredentialsFlow(client: client)
            var bare: [Double] = [], herd: [Double] = []
            for round in 0..<7 {
                let t0 = DispatchTime.now().uptimeNanoseconds
                _ = try await flow.authorize(AuthorizationParameters(scopes: ["read"]))
                bare.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6)

                let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                    "moose-herd-\(round)-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: folder) }
                let store = try SecretStore(
                    path: folder.appendingPathComponent("s.sqlite").path,
                    masterKey: .raw(try SecureRandom.bytes(count: 32)))
                let sessions = EncryptedSessionStorage(store: store)
                try sessions.replaceNow(
                    OAuthSession(
                        issuer: issuer, clientID: "moose-service",
                        tokens: TokenSet(accessToken: "old", expiresAt: Date().addingTimeInterval(-1))), key: "p")
                let coordinator = benchCoordinator(key: "p", storage: sessions) { try await flow.refresh($0) }
                let t1 = DispatchTime.now().uptimeNanoseconds
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<1000 { group.addTask { _ = try await coordinator.accessToken() } }
                    try await group.waitForAll()
                }
                herd.append(Double(DispatchTime.now().uptimeNanoseconds - t1) / 1e6)
            }
            let b = bare.sorted()[3], h = herd.sorted()[3]
            print("\n## 1,000 callers holding a fresh token after expiry (ms, median of 7)\n")
            print("| one bare refresh request | 1,000 concurrent callers through the coordinator | ratio | target |")
            print("|---|---|---|---|")
            print(
                "| \(String(format: "%.2f", b)) | \(String(format: "%.2f", h)) | \(String(format: "%.2fx", h / b)) | ≤ 1.2x |"
            )
        } catch {
            print("\n(1,000-caller refresh failed: \(error))")
        }
    }
}
