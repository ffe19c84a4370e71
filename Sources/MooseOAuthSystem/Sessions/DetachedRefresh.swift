#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseOAuth
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A refresh whose caller's death does not matter: the coordinator call runs in a detached copy of
/// the calling program, which commits what the provider answered even if the caller is killed.
///
/// Short-lived programs — a CLI, a credential helper, a CI step — are killed all the time (a cancelled
/// job, an interrupted `kubectl`, an OOM kill). Killed between sending a rotating refresh token and
/// committing the answer, the rotated token dies with them, and the provider's reuse detection then
/// revokes the whole token family when the old one comes back. So the program starts a copy of itself
/// (`run(_:arguments:)`): detached — a session of its own, so a terminal's or a job's signals to the
/// caller's group do not reach it; the default signal mask and dispositions; stdin a pipe with the
/// request, stdout a pipe for the outcome, stderr `/dev/null`; no other descriptor of the caller's. The
/// copy reads the request (`readRequest()`), makes the coordinator call (`perform(_:on:)`), which takes
/// the refresh lease, refreshes, commits, writes one line of outcome (`answer(_:)`) and exits. The
/// caller only waits for that line; if the caller dies, the copy finishes the commit all the same.
/// Only the slow path pays for it: a valid cached token never starts a process.
///
/// `moose token`, `moose refresh` and the credential helpers run their refreshes so (`moose __refresh`);
/// a program of its own can do the same with a hidden command of its own.
public enum DetachedRefresh {
    /// What the detached copy does: the coordinator call the caller would have made.
    public struct Request: Codable, Sendable, Equatable {
        /// Which coordinator call.
        public enum Mode: String, Codable, Sendable {
            /// `accessToken(minimumValidity:)`
            case accessToken = "access-token"
            /// `refreshNow()`
            case refreshNow = "refresh-now"
            /// `refresh(rejecting:)`, with the rejected token (sent on stdin, never in the arguments).
            case rejecting
        }

        /// Which call.
        public var mode: Mode
        /// `accessToken(minimumValidity:)`'s seconds; `nil`: the coordinator's default.
        public var minimumValidity: Double?
        /// The token a resource server rejected (`rejecting` only).
        public var rejected: String?

        /// A request for `mode`.
        public init(mode: Mode, minimumValidity: Double? = nil, rejected: String? = nil) {
            self.mode = mode
            self.minimumValidity = minimumValidity
            self.rejected = rejected
        }
    }

    /// The copy's one line: success, or the error as the caller would have seen it.
    public struct Outcome: Codable, Sendable {
        /// The call succeeded (the session is committed).
        public var ok: Bool
        /// An `OAuthError`'s code name (`OAuthError.Code.description`).
        public var code: String?
        /// The error's message.
        public var message: String?
        /// The provider's OAuth `error`, if it gave one.
        public var oauthError: String?
        /// The provider's `error_description`, if it gave one.
        public var errorDescription: String?
        /// The provider's HTTP status, if it answered.
        public var status: Int?
        /// For a failure that is not an `OAuthError`: the program's exit status.
        public var exit: Int32?
        /// What lay under the error (a store fault's words: the file and the next step), as text —
        /// the error itself does not cross the process boundary. Read back as a `Cause`.
        public var storeCause: String?

        /// The call succeeded.
        public static let success = Outcome(ok: true)

        /// An outcome with only `ok` set.
        public init(ok: Bool) { self.ok = ok }

        /// A failed call's `error`, with `cause`: the words of what lies under it, if any.
        public init(_ error: OAuthError, cause: String? = nil) {
            ok = false
            code = error.code.description
            message = error.message
            oauthError = error.oauthError
            errorDescription = error.errorDescription
            status = error.status
            storeCause = cause
        }

        /// A failure that is not an `OAuthError`: its message and the program's exit status.
        public init(failure message: String, exit: Int32) {
            ok = false
            self.message = message
            self.exit = exit
        }

        /// The `OAuthError` the caller throws for a failed outcome (its `underlying` a `Cause` when
        /// one was carried); `nil` for success and for a failure that is not an `OAuthError`.
        public var error: OAuthError? {
            guard !ok, let code else { return nil }
            return OAuthError(
                OAuthError.Code(named: code), message ?? code, oauthError: oauthError,
                errorDescription: errorDescription, status: status, underlying: storeCause.map(Cause.init(text:)))
        }

        /// What the caller throws for a failed outcome: `error` when it carried an `OAuthError`, else a
        /// `Failure` with its message and exit status (a line that names neither: "the refresh failed",
        /// exit 1); `nil` for success.
        public var failure: (any Error)? {
            guard !ok else { return nil }
            if let error { return error }
            return Failure(message: message ?? "the refresh failed", exit: exit ?? 1)
        }
    }

    /// A failure in the detached copy that was not an `OAuthError`: its message, and the exit status
    /// the copy's program gave it (a command-line program exits with it too).
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The message.
        public let message: String
        /// The exit status.
        public let exit: Int32

        /// `message`.
        public var description: String { message }

        /// A failure with `message` and exit status `exit`.
        public init(message: String, exit: Int32) {
            self.message = message
            self.exit = exit
        }
    }

    /// What lay under a failure in the detached copy, as its words (see `Outcome.storeCause`).
    public struct Cause: Error, Sendable, CustomStringConvertible {
        /// The words, as the copy rendered them.
        public let text: String
        /// A cause of `text`.
        public init(text: String) { self.text = text }
        /// `text`.
        public var description: String { text }
    }

    /// How a detached call ended, as the caller sees it.
    public enum Answer: Sendable {
        /// No copy could be started here (no `posix_spawn` file actions to close the caller's
        /// descriptors, no pipes): the caller makes the call itself.
        case notStarted
        /// The copy answered.
        case answered(Outcome)
        /// The copy ended without an answer (killed, or not a program that answers), with its wait status.
        case noAnswer(status: Int32)
    }

    /// Starts `arguments` (the program's own path first: `ownExecutable()`) detached, hands it
    /// `request` on stdin, and waits for its one line of outcome.
    ///
    /// - Parameters:
    ///   - request: the coordinator call.
    ///   - arguments: the program and its arguments (a hidden command of the program that calls
    ///     `readRequest()`, `perform(_:on:)` and `answer(_:)`), never a secret: arguments are public on
    ///     most systems.
    /// - Returns: the answer, or `.notStarted` when this system cannot start the copy as described.
    public static func run(_ request: Request, arguments: [String]) -> Answer {
        guard !arguments.isEmpty, let child = spawn(arguments) else { return .notStarted }
        let input = (try? JSONEncoder().encode(request)).map { Array($0) } ?? []
        _ = input.withUnsafeBytes { write(child.input, $0.baseAddress, $0.count) }
        close(child.input)
        let answer = readAll(child.output, limit: 1 << 20)
        close(child.output)
        var status: Int32 = 0
        while waitpid(child.pid, &status, 0) < 0, errno == EINTR {}
        guard let line = answer.split(separator: UInt8(ascii: "\n")).first,
            let outcome = try? JSONDecoder().decode(Outcome.self, from: Data(line))
        else { return .noAnswer(status: status) }
        return .answered(outcome)
    }

    /// This program's own path (Linux: `/proc/self/exe`), so that a program starts itself; `nil`
    /// elsewhere (the caller then makes the call itself).
    public static func ownExecutable() -> String? {
        #if os(Linux)
        var path = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: path.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #else
        return nil
        #endif
    }

    /// In the detached copy: ignores `SIGPIPE` (the caller may be gone by the time the outcome is
    /// written, and its closed pipe must not end the copy before it commits), then reads the request
    /// from stdin (at most `limit` bytes).
    ///
    /// - Returns: the request, or `nil` when stdin holds none (the command was started by hand).
    public static func readRequest(limit: Int = 256 << 10) -> Request? {
        signal(SIGPIPE, SIG_IGN)
        return try? JSONDecoder().decode(Request.self, from: Data(readAll(0, limit: limit)))
    }

    /// In the detached copy: the coordinator call `request` names, as the caller would have made it.
    ///
    /// - Returns: the access token the call gave.
    /// - Throws: what the call throws (`OAuthError`).
    public static func perform(_ request: Request, on manager: TokenManager) async throws -> AccessToken {
        try await perform(request, on: manager.coordinator)
    }

    /// Runs `request` on `coordinator` (`perform(_:on:)` with a manager is the usual door).
    public static func perform(_ request: Request, on coordinator: RefreshCoordinator) async throws -> AccessToken {
        switch request.mode {
        case .accessToken: return try await coordinator.accessToken(minimumValidity: request.minimumValidity)
        case .refreshNow: return try await coordinator.refreshNow()
        case .rejecting: return try await coordinator.refresh(rejecting: AccessToken(value: request.rejected ?? ""))
        }
    }

    /// In the detached copy: writes `outcome` as its one line on stdout.
    public static func answer(_ outcome: Outcome) {
        var line = (try? JSONEncoder().encode(outcome)).map { Array($0) } ?? Array(#"{"ok":false}"#.utf8)
        line.append(UInt8(ascii: "\n"))
        _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }

    struct Child {
        let pid: pid_t
        /// Where the request is written.
        let input: Int32
        /// Where the outcome is read.
        let output: Int32
    }

    /// Starts `arguments` detached (see the type's documentation); `nil` when this system cannot.
    static func spawn(_ arguments: [String]) -> Child? {
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0 else { return nil }
        guard pipe(&fromChild) == 0 else {
            close(toChild[0])
            close(toChild[1])
            return nil
        }
        // Close-on-exec: no other program this process starts inherits either pipe (the child gets
        // its ends through dup2, which clears the flag on the copies).
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var pid = pid_t()
        let started =
            ChildProcess.closeInheritedDescriptors(&actions, &attributes)
            && ChildProcess.detach(&attributes) && ChildProcess.defaultSignals(&attributes)
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let spawned = started && posix_spawn(&pid, arguments[0], &actions, &attributes, argv, environ) == 0
        close(toChild[0])
        close(fromChild[1])
        guard spawned else {
            close(toChild[1])
            close(fromChild[0])
            return nil
        }
        return Child(pid: pid, input: toChild[1], output: fromChild[0])
    }

    /// Everything `fd` gives until end of file, at most `limit` bytes.
    static func readAll(_ fd: Int32, limit: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, min($0.count, limit - bytes.count)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer.prefix(count)
        }
        return bytes
    }
}
