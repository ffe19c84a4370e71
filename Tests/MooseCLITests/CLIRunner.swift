import Foundation
import MooseTestSupport
import Testing

/// Runs the built `moose` binary and captures what it printed: end-to-end CLI tests.
struct CLIResult {
    let status: Int32
    let stdout: String
    let stderr: String

    /// stdout parsed as a JSON object (for `--json`).
    func json() throws -> [String: Any] {
        try #require(
            JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any], "stdout is not JSON: \(stdout)")
    }

    /// The `code`s of the `reasons` in `--json` output.
    func reasonCodes() throws -> [String] {
        (try json()["reasons"] as? [[String: Any]] ?? []).compactMap { $0["code"] as? String }
    }
}

enum CLI {
    /// The `moose` binary: `$MOOSE_BIN`, or next to the test bundle in the build folder.
    static let binary: String = {
        if let path = ProcessInfo.processInfo.environment["MOOSE_BIN"],
            FileManager.default.isExecutableFile(atPath: path)
        {
            return path
        }
        return builtExecutable("moose")
    }()

    /// A fresh home: XDG data and config folders under a new temporary directory (not created), the
    /// scripted browser as `$BROWSER`, and no key from the environment.
    static func home(_ label: String) -> (URL, [String: String]) {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)")
        return (
            home,
            [
                "XDG_DATA_HOME": home.appendingPathComponent("data").path,
                "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
                "BROWSER": TestIdentityProvider.browserCommand, "MOOSE_STORE_KEY": ""
            ]
        )
    }

    /// A fresh home with a session logged in at the test IdP.
    static func logIn(_ label: String) async throws -> (URL, [String: String]) {
        let (home, environment) = Self.home(label)
        let login = try await run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"],
            environment: environment, timeout: 60)
        #expect(login.status == 0, "\(login.stderr)")
        return (home, environment)
    }

    /// The default profile's session as the store holds it (JSON), read with `moose store get`
    /// (a row is `{"generation": N, "session": {…}}`).
    static func storedSession(environment: [String: String]) async throws -> [String: Any] {
        let row = try await storedRow(environment: environment)
        return try #require(row["session"] as? [String: Any])
    }

    /// The default profile's whole session row.
    static func storedRow(environment: [String: String]) async throws -> [String: Any] {
        let stored = try await run(
            ["store", "get", "default", "--namespace", "moose.session"], environment: environment)
        return try #require(JSONSerialization.jsonObject(with: Data(stored.stdout.utf8)) as? [String: Any])
    }

    /// Runs `moose arguments…` with `stdin` piped in; fails the test if it takes longer than `timeout`.
    /// With `executable`, runs that program with `arguments` instead (a shell around `moose`).
    ///
    /// The wait happens on a thread of its own, never on one of Swift's cooperative threads (two on
    /// a 2-core machine): a test blocked there starved every other test in the process for seconds.
    static func run(
        _ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:],
        timeout: TimeInterval = 30, executable: String? = nil
    ) async throws -> CLIResult {
        let outcome: Result<(CLIResult, timedOut: Bool), any Error> = await withCheckedContinuation { continuation in
            Thread {
                continuation.resume(
                    returning: Result {
                        try runBlocking(
                            arguments, stdin: stdin, environment: environment, timeout: timeout, executable: executable)
                    })
            }.start()
        }
        let (result, timedOut) = try outcome.get()
        if timedOut {
            Issue.record(
                "\(executable ?? "moose") \(arguments.joined(separator: " ")) did not finish within \(timeout) s")
        }
        return result
    }

    /// `run` on the calling thread, for a `defer` and for a step whose aftermath the test times (an
    /// awaiting test resumes whenever the cooperative pool gets to it, which is not "right after").
    static func runSynchronously(
        _ arguments: [String], environment: [String: String] = [:],
        timeout: TimeInterval = 30, executable: String? = nil
    ) throws -> CLIResult {
        let (result, timedOut) = try runBlocking(
            arguments, stdin: nil, environment: environment, timeout: timeout, executable: executable)
        if timedOut {
            Issue.record(
                "\(executable ?? "moose") \(arguments.joined(separator: " ")) did not finish within \(timeout) s")
        }
        return result
    }

    /// Ends a child that stops when its standard input closes: closes `input`, gives it `grace`
    /// seconds, then SIGKILL — so a child that never sees end-of-file (another process holding a copy
    /// of the pipe) cannot hang the test run in `waitUntilExit`.
    static func end(_ process: TestProcess, closing input: Pipe, grace: TimeInterval = 10) {
        try? input.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(grace)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// `run`'s work, blocking the calling thread; `timedOut` when it had to be killed.
    private static func runBlocking(
        _ arguments: [String], stdin: Data?, environment: [String: String],
        timeout: TimeInterval, executable: String?
    ) throws -> (CLIResult, timedOut: Bool) {
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        // posix_spawn and waitpid (TestProcess), bounded: a child past `timeout` is killed, and what a
        // program it started keeps open is read for 5 s more at most.
        let run = try runBounded(
            [executable ?? binary] + (executable == nil ? arguments : Array(arguments.dropFirst())), stdin: stdin,
            environment: env, timeout: timeout)
        return (
            CLIResult(
                status: run.status, stdout: String(decoding: run.stdout, as: UTF8.self),
                stderr: String(decoding: run.stderr, as: UTF8.self)), run.timedOut
        )
    }
}
