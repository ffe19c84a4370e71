import Foundation
import Testing

/// Runs the built `moose` binary and captures what it printed: end-to-end CLI tests.
struct CLIResult {
    let status: Int32
    let stdout: String
    let stderr: String

    /// stdout parsed as a JSON object (for `--json`).
    func json() throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any], "stdout is not JSON: \(stdout)")
    }

    /// The `code`s of the `reasons` in `--json` output.
    func reasonCodes() throws -> [String] {
        (try json()["reasons"] as? [[String: Any]] ?? []).compactMap { $0["code"] as? String }
    }
}

enum CLI {
    /// The `moose` binary: `$MOOSE_BIN`, or next to the test bundle in the build folder.
    static let binary: String = {
        if let path = ProcessInfo.processInfo.environment["MOOSE_BIN"], FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var folder = executable.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = folder.appendingPathComponent("moose").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            folder = folder.deletingLastPathComponent()
        }
        return "moose"
    }()

    /// Runs `moose arguments…` with `stdin` piped in; fails the test if it takes longer than `timeout`.
    static func run(_ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:],
                    timeout: TimeInterval = 30) throws -> CLIResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        // Feed stdin and drain stdout/stderr concurrently so large outputs never deadlock.
        let group = DispatchGroup()
        nonisolated(unsafe) var stdoutData = Data()
        nonisolated(unsafe) var stderrData = Data()
        group.enter()
        DispatchQueue.global().async { stdoutData = out.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        group.enter()
        DispatchQueue.global().async { stderrData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        DispatchQueue.global().async {
            if let stdin { try? input.fileHandleForWriting.write(contentsOf: stdin) }
            try? input.fileHandleForWriting.close()
        }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(5_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)   // SIGTERM may be blocked in children of the test runner
            Issue.record("moose \(arguments.joined(separator: " ")) did not finish within \(timeout) s")
        }
        process.waitUntilExit()
        group.wait()
        return CLIResult(status: process.terminationStatus,
                         stdout: String(decoding: stdoutData, as: UTF8.self),
                         stderr: String(decoding: stderrData, as: UTF8.self))
    }
}
