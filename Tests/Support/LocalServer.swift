import Foundation

/// The repo's small Python servers (tools/testserver, tools/hostile): each prints `PORT <n>` once
/// listening on 127.0.0.1 and exits when its parent process does.
public enum LocalServer {
    /// The repository's root folder.
    public static var repositoryRoot: String { Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "") }

    /// Starts `python script` (a path below the repository root) and returns the port it printed.
    /// Fails the whole test process if it cannot start: every test that needs it would fail anyway.
    public static func start(_ script: String, python: String = "/usr/bin/python3", environment: [String: String] = [:])
        -> Int
    {
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-u", repositoryRoot + "/" + script]
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { fatalError("cannot start \(script): \(error)") }
        var text = ""
        while !text.contains("\n") {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard
            let port = text.split(separator: " ").last.flatMap({
                Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
            })
        else {
            fatalError("\(script) did not print its port: \(text)")
        }
        return port
    }
}
