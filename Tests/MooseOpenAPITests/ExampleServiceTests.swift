#if ExampleService
import Foundation
import MooseHTTP
import MooseTestSupport
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The example service (tools/example-service: Hummingbird 2 + the OpenAPI-generated client + one
/// TokenManager shared by every handler), built with the tests and run as a real process against a
/// second test IdP whose access tokens live 10 s, and the protected API checking them at that IdP.
struct ExampleServiceTests {
    /// 500 requests from 50 clients over ~20 s while the client-credentials token expires twice
    /// (10 s tokens, refreshed when less than 2 s is left: at ~8 s and ~16 s) → exactly two refreshes,
    /// counted in the IdP's own database (login + 2 = 3 tokens issued), and no failed request.
    @Test func fiveHundredRequestsWhileTheTokenExpiresTwice() async throws {
        let idp = try await SecondIdP.start(tokenSeconds: 10)
        var servers: [SpawnedServer] = []
        do {
            let api = try await ResourceServer.start(issuer: idp.issuer)
            servers.append(api)
            let binary = try #require(
                ExampleService.binary,
                "moose-example-service is not built next to the tests (swift build --build-tests)")
            // tokens the copied database already holds
            let issuedBefore = try await idp.tokensIssued(to: "moose-service")
            let service = try await SpawnedServer.launch(
                [binary],
                environment: [
                    "MOOSE_IDP_ISSUER": idp.issuer, "MOOSE_API_URL": api.url.absoluteString, "MOOSE_SERVICE_PORT": "0",
                    "MOOSE_MIN_VALIDITY": "2", "MOOSE_STOP_ON_EOF": "1"
                ])
            servers.append(service)
            try await load(service, idp, issuedBefore: issuedBefore)
        } catch {
            for server in servers.reversed() { await server.stop() }
            await idp.stop()
            throw error
        }
        for server in servers.reversed() { await server.stop() }
        await idp.stop()
    }

    func load(_ service: SpawnedServer, _ idp: SecondIdP, issuedBefore: Int) async throws {
        let whoami = service.url.appendingPathComponent("whoami")
        let started = ContinuousClock.now
        let outcomes = Outcomes()
        await withTaskGroup(of: Void.self) { group in
            for client in 0..<50 {
                group.addTask {
                    for round in 0..<10 {
                        // Request k goes out at k × 40 ms: 500 requests spread over 20 s.
                        try? await Task.sleep(
                            until: started + .milliseconds(((round * 50) + client) * 40), clock: .continuous)
                        do {
                            let response = try await Shared.transport.send(APIRequest(url: whoami, timeout: 15))
                            let body = try JSONDecoder().decode(JSON.self, from: response.body)
                            guard response.status.code == 200, let fingerprint = body["tokenFingerprint"]?.string else {
                                outcomes.state.withLock {
                                    $0.failures.append(
                                        "\(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))"
                                    )
                                }
                                continue
                            }
                            outcomes.state.withLock { $0.fingerprints[fingerprint, default: 0] += 1 }
                        } catch {
                            outcomes.state.withLock { $0.failures.append("\(error)") }
                        }
                    }
                }
            }
        }
        let elapsed = ContinuousClock.now - started
        let (failures, fingerprints) = outcomes.state.withLock { ($0.failures, $0.fingerprints) }
        #expect(failures.isEmpty, "\(failures.count) failed: \(failures.prefix(3))")
        #expect(fingerprints.values.reduce(0, +) == 500)
        #expect(
            try await idp.tokensIssued(to: "moose-service") - issuedBefore == 3,
            "login + exactly two refreshes at the IdP (the run took \(elapsed); past ~24 s a third expiry is reached)")
        #expect(fingerprints.count == 3, "three tokens served the 500 requests: \(fingerprints.values.sorted())")
    }
}

/// What the load's clients saw.
final class Outcomes: Sendable {
    let state = Mutex<(failures: [String], fingerprints: [String: Int])>(([], [:]))
}

enum ExampleService {
    /// tools/example-service's binary, next to the test bundle (`swift build --build-tests` builds it).
    static var binary: String? {
        if let path = ProcessInfo.processInfo.environment["MOOSE_EXAMPLE_SERVICE_BIN"] { return path }
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var folder = executable.deletingLastPathComponent()
        // Swift Testing may run inside the .xctest bundle folder.
        if folder.lastPathComponent.hasSuffix(".xctest") { folder = folder.deletingLastPathComponent() }
        for candidate in [folder, folder.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent("moose-example-service").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }
}

#endif
