public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process for tests, started with `posix_spawn` and reaped with `waitpid` on its own pid —
/// what Foundation's `Process` is used for here, without its reaping.
///
/// Foundation's `Process` (swift-corelibs-foundation) learns that a child ended from its own SIGCHLD
/// monitor thread; when that missed a child, `isRunning` stayed true and `waitUntilExit()` never
/// returned (the child a zombie, unreaped): seen under Swift Testing (TestIdentityProvider's note), and
/// a CI run at 4d7f4ee stopped at its 90-minute limit with CLI tests that never ended. Here the waits
/// are `waitpid` on the child's pid, which cannot miss it.
///
/// The child gets the streams set below (a `Pipe` or a `FileHandle`; unset: this process's own), the
/// default signal mask and dispositions (not the test runner's blocked SIGTERM), and none of this
/// process's other descriptors (another test's pipe held by this child would keep that test from
/// ever seeing end-of-file).
public final class TestProcess: @unchecked Sendable {
    // unchecked: configured, run and waited for by one test (one thread at a time); `lock` guards the
    // exit status, which `isRunning` and `waitUntilExit` may read from two threads.
    /// The program to run.
    public var executableURL: URL?
    /// Its arguments (without the program).
    public var arguments: [String] = []
    /// Its whole environment; nil: this process's.
    public var environment: [String: String]?
    /// Its standard input, output and error: a `Pipe`, a `FileHandle`, or nil (this process's own).
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?

    private var pid: pid_t = 0
    private let lock = NSLock()
    private var waitStatus: Int32?

    public init() {}

    /// The child's pid (0 before `run()`).
    public var processIdentifier: Int32 { pid }

    /// Starts the child; the ends of its pipes that it uses are closed here, as `Process` does.
    public func run() throws {
        guard let executableURL else { throw SpawnError("TestProcess: no executableURL") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // The child's ends: dup2'ed to 0, 1, 2; everything from 3 up is closed in the child.
        let streams: [(Any?, Int32, Bool)] = [
            (standardInput, 0, true), (standardOutput, 1, false), (standardError, 2, false)
        ]
        for (stream, target, isInput) in streams {
            // `FileHandle.nullDevice` has no descriptor of its own here (-1): the child opens /dev/null.
            let added: Int32
            if let fd = Self.childDescriptor(stream, isInput: isInput), fd >= 0 {
                added = posix_spawn_file_actions_adddup2(&actions, fd, target)
            } else if stream != nil {
                added = posix_spawn_file_actions_addopen(
                    &actions, target, "/dev/null", isInput ? O_RDONLY : O_WRONLY, 0)
            } else {
                added = 0
            }
            guard added == 0 else {
                throw SpawnError("TestProcess: cannot set up descriptor \(target): error \(added)")
            }
        }
        let program = executableURL.path
        var child: pid_t = 0
        let status = spawnIsolated(&actions) { actions, attributes in
            withCEnvironment([program] + arguments, environment ?? ProcessInfo.processInfo.environment) {
                argv, envp in posix_spawn(&child, program, actions, attributes, argv, envp)
            }
        }
        guard status == 0 else { throw SpawnError("cannot start \(program): error \(status)") }
        pid = child
        // This process's copies of the child's ends: closed, so a reader sees end-of-file when the
        // child (and whatever it passed them to) is done.
        for (stream, _, isInput) in streams {
            if let pipe = stream as? Pipe {
                try? (isInput ? pipe.fileHandleForReading : pipe.fileHandleForWriting).close()
            }
        }
    }

    private static func childDescriptor(_ stream: Any?, isInput: Bool) -> Int32? {
        if let pipe = stream as? Pipe {
            return isInput ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
        }
        if let handle = stream as? FileHandle { return handle.fileDescriptor }
        return nil
    }

    /// Whether the child has not ended yet (it is reaped here when it has).
    public var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        guard pid > 0, waitStatus == nil else { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid { waitStatus = status }
        return waitStatus == nil
    }

    /// Blocks until the child has ended and is reaped.
    public func waitUntilExit() {
        guard pid > 0 else { return }
        while isRunning {
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, 0)
            let failure = errno
            lock.lock()
            if reaped == pid, waitStatus == nil { waitStatus = status }
            let ended = reaped == pid || (reaped == -1 && failure == ECHILD) || waitStatus != nil
            lock.unlock()
            if ended { break }
        }
    }

    /// Its exit status, or the number of the signal that ended it (as `Process` reports them).
    public var terminationStatus: Int32 {
        lock.lock()
        defer { lock.unlock() }
        guard let status = waitStatus else { return -1 }
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    /// Sends SIGTERM.
    public func terminate() { if pid > 0 { kill(pid, SIGTERM) } }
}

/// `argv` and `envp` as C arrays for the call in `body`.
func withCEnvironment<R>(
    _ arguments: [String], _ environment: [String: String],
    _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>, UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R
) -> R {
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    return argv.withUnsafeMutableBufferPointer { a in
        envp.withUnsafeMutableBufferPointer { e in body(UnsafePointer(a.baseAddress!), UnsafePointer(e.baseAddress!)) }
    }
}

/// What a bounded run of a child ended with.
public struct BoundedRun: Sendable {
    /// Exit status, or the signal number (as `Process` reports it; 9 when killed at the deadline).
    public let status: Int32
    public let stdout: Data
    public let stderr: Data
    /// The child was still running at the deadline and was killed (SIGKILL).
    public let timedOut: Bool
}

/// Runs `arguments` (the program first: an absolute path) with `stdin` written to it, the whole
/// `environment`, and both output streams captured, and returns within about `timeout` + `drain`
/// seconds whatever happens: at the deadline the child is killed (SIGKILL), even one that closed its
/// output early, and output is read for at most `drain` seconds after it ended (a program it started
/// may still hold its streams open; what that program writes later is not captured).
/// Blocks the calling thread: call it off Swift's cooperative pool.
public func runBounded(
    _ arguments: [String], stdin: Data?, environment: [String: String], timeout: TimeInterval,
    drain: TimeInterval = 5
) throws -> BoundedRun {
    let input = Pipe(), output = Pipe(), errors = Pipe()
    let process = TestProcess()
    process.executableURL = URL(fileURLWithPath: arguments[0])
    process.arguments = Array(arguments.dropFirst())
    process.environment = environment
    process.standardInput = input
    process.standardOutput = output
    process.standardError = errors
    // A command that exits before reading all of its input closes the pipe: the write then fails
    // with EPIPE instead of killing the whole test process with SIGPIPE.
    _ = signal(SIGPIPE, SIG_IGN)
    try process.run()
    let writer = input.fileHandleForWriting
    if let stdin, !stdin.isEmpty {
        Thread {
            try? writer.write(contentsOf: stdin)
            try? writer.close()
        }.start()
    } else {
        try? writer.close()
    }
    let fds = [output.fileHandleForReading.fileDescriptor, errors.fileHandleForReading.fileDescriptor]
    var captured = [Data(), Data()]
    var open = [true, true]
    let deadline = Date().addingTimeInterval(timeout)
    var endedAt: Date?
    var timedOut = false
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while open.contains(true) || endedAt == nil {
        if endedAt == nil, !process.isRunning { endedAt = Date() }
        if let endedAt, Date().timeIntervalSince(endedAt) > drain { break }
        if endedAt == nil, Date() > deadline {
            timedOut = true
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            endedAt = Date()
        }
        var polled = (0..<2).map { pollfd(fd: open[$0] ? fds[$0] : -1, events: Int16(POLLIN), revents: 0) }
        let ready = poll(&polled, 2, 50)
        guard ready > 0 else { continue }
        for index in 0..<2 where open[index] && polled[index].revents != 0 {
            let n = read(fds[index], &buffer, buffer.count)
            if n > 0 {
                captured[index].append(contentsOf: buffer[0..<n])
            } else if n == 0 || errno != EINTR {
                open[index] = false
            }
        }
    }
    process.waitUntilExit()
    try? output.fileHandleForReading.close()
    try? errors.fileHandleForReading.close()
    return BoundedRun(status: process.terminationStatus, stdout: captured[0], stderr: captured[1], timedOut: timedOut)
}
