import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A second instance of the test IdP (tools/idp/start) on its own port and state, with short-lived
/// access tokens; it reuses the first instance's Python packages. Stopped (by its pid file, which
/// names only the server this started) and wiped by `stop()`.
public final class SecondIdP: Sendable {
    public let issuer: String
    public let state: String
    private let environment: [String: String]

    private init(issuer: String, state: String, environment: [String: String]) {
        self.issuer = issuer
        self.state = state
        self.environment = environment
    }

    /// Starts it (tools/idp/start: migrations, clients, the server), off the cooperative pool.
    /// `idTokenSeconds`: the ID tokens' lifetime (the IdP's default is 10 hours).
    public static func start(tokenSeconds: Int, idTokenSeconds: Int? = nil) async throws -> SecondIdP {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-idp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        ).path
        let primaryState =
            ProcessInfo.processInfo.environment["MOOSE_IDP_STATE"] ?? LocalServer.repositoryRoot + "/tools/idp/.state"
        var environment = [
            "MOOSE_IDP_STATE": state, "MOOSE_IDP_PORT": String(try freePort()),
            "MOOSE_IDP_ACCESS_TOKEN_SECONDS": String(tokenSeconds)
        ]
        if let idTokenSeconds { environment["MOOSE_IDP_ID_TOKEN_SECONDS"] = String(idTokenSeconds) }
        if FileManager.default.fileExists(atPath: primaryState + "/venv/bin/python") {
            environment["MOOSE_IDP_VENV"] = primaryState + "/venv"
        }
        // Start from a copy of the first instance's database (SQLite's online backup): its migrations
        // are done, so this start costs a second of CPU instead of many on a busy 2-core machine.
        if FileManager.default.fileExists(atPath: primaryState + "/db.sqlite3") {
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            _ = await runProcessOffThePool([
                "/usr/bin/python3", "-c",
                "import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))",
                primaryState + "/db.sqlite3", state + "/db.sqlite3"
            ])
        }
        let (status, output) = await runProcessOffThePool(
            [LocalServer.repositoryRoot + "/tools/idp/start"], environment: environment)
        guard status == 0, let issuer = output.split(separator: "\n").last.map(String.init), issuer.hasPrefix("http")
        else {
            try? FileManager.default.removeItem(atPath: state)
            throw SpawnError("a second tools/idp/start failed (\(status)): \(output)")
        }
        return SecondIdP(issuer: issuer, state: state, environment: environment)
    }

    public func stop() async {
        _ = await runProcessOffThePool([LocalServer.repositoryRoot + "/tools/idp/stop"], environment: environment)
        try? FileManager.default.removeItem(atPath: state)
    }

    /// Access tokens the IdP holds for `clientID`, read from its own database (a refresh deletes the
    /// access token it replaces: count refreshes with `refreshTokensIssued`).
    public func tokensIssued(to clientID: String) async throws -> Int {
        try await count("accesstoken", clientID)
    }

    /// Refresh tokens the IdP issued to `clientID` (one per login and per refresh: replaced ones are
    /// kept, revoked), read from its own database.
    public func refreshTokensIssued(to clientID: String) async throws -> Int {
        try await count("refreshtoken", clientID)
    }

    private func count(_ table: String, _ clientID: String) async throws -> Int {
        let script = """
            import sqlite3, sys
            db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=30)
            print(db.execute("SELECT COUNT(*) FROM oauth2_provider_\(table) t JOIN oauth2_provider_application a ON t.application_id = a.id WHERE a.client_id = ?", (sys.argv[2],)).fetchone()[0])
            """
        let (status, output) = await runProcessOffThePool([
            "/usr/bin/python3", "-c", script, state + "/db.sqlite3", clientID
        ])
        guard status == 0, let count = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw SpawnError("cannot read the IdP's database (\(status)): \(output)")
        }
        return count
    }

    /// A port nobody listens on right now (bound, read, released).
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SpawnError("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw SpawnError("bind failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
