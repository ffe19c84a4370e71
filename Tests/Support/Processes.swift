public import Foundation
import MooseOAuthSystem // ChildProcess
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A server process a test started (posix_spawn, not Foundation's Process: its waits hung under Swift
/// Testing here). It prints `READY <url>` once listening and exits when its standard input closes —
/// which `stop()` does, and which also happens when the test process dies, so nothing outlives a run.
public final class SpawnedServer: @unchecked Sendable {
    /// The process id (ended only by `stop()`: by closing stdin, then SIGTERM to this pid).
    public let pid: pid_t
    /// The URL from the `READY` line.
    public let url: URL
    // Written once in stop(); the class is used by one test at a time.
    private var stdinFD: Int32
    private let stdoutFD: Int32

    /// Starts `arguments` (absolute program path first) with `environment` added to this process's,
    /// and waits up to `timeout` seconds for its `READY <url>` line.
    public init(_ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60) throws {
        var input: [Int32] = [0, 0], output: [Int32] = [0, 0]
        guard pipe(&input) == 0, pipe(&output) == 0 else { throw SpawnError("pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        for fd in input + output { posix_spawn_file_actions_addclose(&actions, fd) }
        var child: pid_t = 0
        let status = spawnIsolated(&actions) { actions, attributes in
            withCArguments(arguments, environment: environment) { argv, envp in
                posix_spawn(&child, arguments[0], actions, attributes, argv, envp)
            }
        }
        close(input[0])
        close(output[1])
        _ = fcntl(input[1], F_SETFD, FD_CLOEXEC)
        _ = fcntl(output[0], F_SETFD, FD_CLOEXEC)
        guard status == 0 else {
            close(input[1]); close(output[0])
            throw SpawnError("cannot start \(arguments.first ?? "?"): error \(status)")
        }
        pid = child
        stdinFD = input[1]
        stdoutFD = output[0]
        guard let line = readLine(fd: output[0], timeout: timeout), line.hasPrefix("READY "),
            let url = URL(string: String(line.dropFirst(6)))
        else {
            kill(child, SIGTERM)
            var ignored: Int32 = 0
            waitpid(child, &ignored, 0)
            close(input[1]); close(output[0])
            throw SpawnError("\(arguments.joined(separator: " ")) did not print READY within \(timeout) s")
        }
        self.url = url
    }

    /// Starts a server off the cooperative thread pool (the wait for `READY` blocks a thread: on a
    /// 2-core machine, blocking one of Swift's two pool threads stalls every other test's timers).
    public static func launch(_ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60)
        async throws -> SpawnedServer
    {
        try await offThePool { try SpawnedServer(arguments, environment: environment, timeout: timeout) }
    }

    /// Stops the server: closes its standard input, waits up to 10 s, then SIGTERM (to this pid only).
    public func stop() async {
        try? await offThePool { self.stopBlocking() }
    }

    private func stopBlocking() {
        guard stdinFD >= 0 else { return }
        close(stdinFD)
        stdinFD = -1
        var status: Int32 = 0
        for _ in 0..<100 {
            if waitpid(pid, &status, WNOHANG) == pid { close(stdoutFD); return }
            usleep(100_000)
        }
        kill(pid, SIGTERM)
        waitpid(pid, &status, 0)
        close(stdoutFD)
    }

    /// A server nobody stopped gets EOF on its standard input now (it exits by itself).
    deinit { if stdinFD >= 0 { close(stdinFD) } }
}

/// Runs blocking work (process starts and waits) on a Dispatch thread, never on Swift's cooperative pool.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}

/// `runProcess` off the cooperative pool.
public func runProcessOffThePool(_ arguments: [String], environment: [String: String] = [:]) async -> (
    status: Int32, output: String
) {
    (try? await offThePool { runProcess(arguments, environment: environment) }) ?? (-1, "")
}

/// Runs `spawn` — which starts one child of the tests with the file actions and attributes it is given —
/// with the child set up as the library's `ChildProcess` sets up its own: every descriptor from 3 up
/// closed in it, and the default signal mask and dispositions (the attributes are made and destroyed
/// here); returns what `spawn` returns. Without the first, a child inherits whatever this process has
/// open without `FD_CLOEXEC` at that moment — Foundation's `Pipe`s of other tests among them: a server
/// holding the write end of another child's standard input kept that child from ever seeing
/// end-of-file, and the test waiting for it hung the run. Without the second, a child started from a
/// concurrency thread (which blocks every signal) could not be ended with SIGTERM.
func spawnIsolated(
    _ actions: inout posix_spawn_file_actions_t,
    _ spawn: (UnsafePointer<posix_spawn_file_actions_t>, UnsafePointer<posix_spawnattr_t>) -> Int32
) -> Int32 {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    _ = ChildProcess.closeInheritedDescriptors(&actions, &attributes)
    _ = ChildProcess.defaultSignals(&attributes)
    return spawn(&actions, &attributes)
}

/// The path of `name`, an executable SwiftPM built next to the test bundle (the bundle's folder and
/// up to three above it); `name` alone (a `PATH` lookup) when it is not there.
public func builtExecutable(_ name: String) -> String {
    var folder = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = folder.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        folder = folder.deletingLastPathComponent()
    }
    return name
}

/// A failure to start a process.
public struct SpawnError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Runs `arguments` to completion (the program first: a path, or a name looked up on `PATH`), with
/// `environment` added; returns its exit status and standard output (stderr is inherited).
public func runProcess(_ arguments: [String], environment: [String: String] = [:]) -> (status: Int32, output: String) {
    var output: [Int32] = [0, 0]
    guard pipe(&output) == 0 else { return (-1, "pipe failed") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, output[1], 1)
    posix_spawn_file_actions_addclose(&actions, output[0])
    posix_spawn_file_actions_addclose(&actions, output[1])
    var child: pid_t = 0
    let spawned = spawnIsolated(&actions) { actions, attributes in
        withCArguments(arguments, environment: environment) { argv, envp in
            posix_spawnp(&child, arguments[0], actions, attributes, argv, envp)
        }
    }
    close(output[1])
    guard spawned == 0 else { close(output[0]); return (-1, "cannot run \(arguments.first ?? "?"): error \(spawned)") }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(output[0], &buffer, buffer.count)
        if n > 0 { bytes.append(contentsOf: buffer[0..<n]) } else if n == 0 || errno != EINTR { break }
    }
    close(output[0])
    var status: Int32 = 0
    while waitpid(child, &status, 0) == -1 && errno == EINTR {}
    return ((status & 0x7f) == 0 ? (status >> 8) & 0xff : -1, String(decoding: bytes, as: UTF8.self))
}

/// One line from `fd` (without the newline), or nil at EOF or after `timeout` seconds.
private func readLine(fd: Int32, timeout: TimeInterval) -> String? {
    let deadline = Date().addingTimeInterval(timeout)
    var line: [UInt8] = []
    while Date() < deadline {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, 200)
        if ready < 0 && errno != EINTR { return nil }
        guard ready > 0 else { continue }
        var byte: UInt8 = 0
        let n = read(fd, &byte, 1)
        if n == 0 { return nil }
        if n < 0 { if errno == EINTR { continue } else { return nil } }
        if byte == 0x0A { return String(decoding: line, as: UTF8.self) }
        line.append(byte)
    }
    return nil
}

private func withCArguments<R>(
    _ arguments: [String], environment: [String: String],
    _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>, UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R
) -> R {
    var merged = ProcessInfo.processInfo.environment
    for (key, value) in environment { merged[key] = value }
    return withCEnvironment(arguments, merged, body)
}

/// The repository's protected API (tools/resource/api_server.py): accepts only tokens the IdP at
/// `issuer` reports active (RFC 7662 introspection); `/_test/stats` counts what it saw.
public enum ResourceServer {
    /// Starts one with `arguments` added (`--cache-seconds 0`, `--require-scope S`…), off the cooperative pool.
    public static func start(issuer: String, _ arguments: [String] = []) async throws -> SpawnedServer {
        try await SpawnedServer.launch(
            [
                "/usr/bin/python3", "-u", LocalServer.repositoryRoot + "/tools/resource/api_server.py",
                "--port", "0", "--issuer", issuer
            ] + arguments)
    }
}

/// One memory measurement at a time in this test process: a measurement counts the whole process's
/// resident memory, so two large downloads side by side (URLSession's and AsyncHTTPClient's suites run
/// in parallel) would charge each other's buffers.
public actor MemoryMeasurement {
    public static let shared = MemoryMeasurement()
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// Runs `body` when no other measurement runs.
    public func exclusively<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        while busy { await withCheckedContinuation { waiters.append($0) } }
        busy = true
        defer {
            busy = false
            if !waiters.isEmpty { waiters.removeFirst().resume() }
        }
        return try await body()
    }
}
