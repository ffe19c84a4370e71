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
            let binary = try #require(ExampleService.binary, "moose-example-service is not built next to the tests (swift build --build-tests)")
            let issuedBefore = try await idp.tokensIssued(to: "moose-service")   // tokens the copied database already holds
            let service = try await SpawnedServer.launch([binary], environment: [
                "MOOSE_IDP_ISSUER": idp.issuer, "MOOSE_API_URL": api.url.absoluteString, "MOOSE_SERVICE_PORT": "0",
                "MOOSE_MIN_VALIDITY": "2", "MOOSE_STOP_ON_EOF": "1",
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
                        try? await Task.sleep(until: started + .milliseconds(((round * 50) + client) * 40), clock: .continuous)
                        do {
                            let response = try await Shared.transport.send(APIRequest(url: whoami, timeout: 15))
                            let body = try JSONDecoder().decode(JSON.self, from: response.body)
                            guard response.status.code == 200, let fingerprint = body["tokenFingerprint"]?.string else {
                                outcomes.state.withLock { $0.failures.append("\(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))") }
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
        #expect(try await idp.tokensIssued(to: "moose-service") - issuedBefore == 3,
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

/// A second instance of the test IdP (tools/idp/start) on its own port and state, with short-lived
/// access tokens; it reuses the first instance's Python packages. Stopped (by its pid file, which
/// names only the server this started) and wiped by `stop()`.
final class SecondIdP: @unchecked Sendable {
    let issuer: String
    let state: String
    private let environment: [String: String]

    private init(issuer: String, state: String, environment: [String: String]) {
        self.issuer = issuer
        self.state = state
        self.environment = environment
    }

    /// Starts it (tools/idp/start: migrations, clients, the server), off the cooperative pool.
    static func start(tokenSeconds: Int) async throws -> SecondIdP {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("moose-idp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        let primaryState = ProcessInfo.processInfo.environment["MOOSE_IDP_STATE"] ?? LocalServer.repositoryRoot + "/tools/idp/.state"
        var environment = ["MOOSE_IDP_STATE": state, "MOOSE_IDP_PORT": String(try freePort()),
                           "MOOSE_IDP_ACCESS_TOKEN_SECONDS": String(tokenSeconds)]
        if FileManager.default.fileExists(atPath: primaryState + "/venv/bin/python") { environment["MOOSE_IDP_VENV"] = primaryState + "/venv" }
        // Start from a copy of the first instance's database (SQLite's online backup): its migrations
        // are done, so this start costs a second of CPU instead of many on a busy 2-core machine.
        if FileManager.default.fileExists(atPath: primaryState + "/db.sqlite3") {
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            _ = await runProcessOffThePool(["/usr/bin/python3", "-c",
                                            "import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))",
                                            primaryState + "/db.sqlite3", state + "/db.sqlite3"])
        }
        let (status, output) = await runProcessOffThePool([LocalServer.repositoryRoot + "/tools/idp/start"], environment: environment)
        guard status == 0, let issuer = output.split(separator: "\n").last.map(String.init), issuer.hasPrefix("http") else {
            try? FileManager.default.removeItem(atPath: state)
            throw SpawnError("a second tools/idp/start failed (\(status)): \(output)")
        }
        return SecondIdP(issuer: issuer, state: state, environment: environment)
    }

    func stop() async {
        _ = await runProcessOffThePool([LocalServer.repositoryRoot + "/tools/idp/stop"], environment: environment)
        try? FileManager.default.removeItem(atPath: state)
    }

    /// Access tokens the IdP issued to `clientID`, read from its own database.
    func tokensIssued(to clientID: String) async throws -> Int {
        let script = """
        import sqlite3, sys
        db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=30)
        print(db.execute("SELECT COUNT(*) FROM oauth2_provider_accesstoken t JOIN oauth2_provider_application a ON t.application_id = a.id WHERE a.client_id = ?", (sys.argv[2],)).fetchone()[0])
        """
        let (status, output) = await runProcessOffThePool(["/usr/bin/python3", "-c", script, state + "/db.sqlite3", clientID])
        guard status == 0, let count = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw SpawnError("cannot read the IdP's database (\(status)): \(output)")
        }
        return count
    }

    /// A port nobody listens on right now (bound, read, released).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SpawnError("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw SpawnError("bind failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
#endif
