import ArgumentParser
import MooseOAuth
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A refresh whose caller's death does not matter (issue "A refresh survives its caller", §2).
///
/// `moose token`, `moose refresh` and the credential helpers are killed all the time — a cancelled CI
/// job, an interrupted `kubectl`, an OOM kill. Killed between sending a rotating refresh and
/// committing its answer, the rotated refresh token dies with them, and the provider's reuse
/// detection then revokes the whole token family when the old one comes back. So the exchange and
/// its commit run in a process of their own: `moose __refresh`, started detached (a session of its
/// own, so a terminal's or a job's signals to the caller's group do not reach it; the default signal
/// mask and dispositions; stdin a pipe with the request, stdout a pipe for the outcome, stderr
/// `/dev/null`; no other descriptor of the caller's), which takes the refresh lease, refreshes
/// through the coordinator, commits, writes one line of outcome and exits. The caller only waits for
/// that line; if the caller dies, the child finishes the commit all the same (a write to the closed
/// pipe is ignored). Only the slow path pays for it: a valid cached token never starts a process.
///
/// Where no child can be started (no `/proc/self/exe`, `MOOSE_REFRESH_IN_PROCESS=1`), the refresh
/// runs in the caller's process as before.
enum DetachedRefresh {
    /// What the child does: the coordinator call the caller would have made.
    struct Request: Codable, Sendable {
        enum Mode: String, Codable, Sendable {
            /// `accessToken(minimumValidity:)`
            case accessToken = "access-token"
            /// `refreshNow()`
            case refreshNow = "refresh-now"
            /// `refresh(rejecting:)`, with the rejected token (sent on stdin, never in the arguments).
            case rejecting
        }

        var mode: Mode
        var minimumValidity: Double?
        var rejected: String?
    }

    /// The child's one line: success, or the error as the caller would have seen it.
    struct Outcome: Codable, Sendable {
        var ok: Bool
        /// An `OAuthError`'s code name and fields.
        var code: String?
        var message: String?
        var oauthError: String?
        var errorDescription: String?
        var status: Int?
        /// A `CLIError`'s exit status (with `message`).
        var exit: Int32?
        /// The store fault under a `storeUnavailable` (`OAuthContext.storeCause`): the file and the next step.
        var storeCause: String?

        static let success = Outcome(ok: true)

        init(ok: Bool) { self.ok = ok }

        init(_ error: any Error) {
            ok = false
            if let error = error as? OAuthError {
                code = error.code.description
                message = error.message
                oauthError = error.oauthError
                errorDescription = error.errorDescription
                status = error.status
                storeCause = OAuthContext.storeCause(error)
            } else if let error = error as? CLIError {
                message = error.message
                exit = error.status
            } else {
                message = "\(error)"
                exit = 1
            }
        }

        /// The error the caller throws for a failed outcome.
        var error: any Error {
            if let code {
                return OAuthError(
                    OAuthError.Code(named: code), message ?? code, oauthError: oauthError,
                    errorDescription: errorDescription,
                    status: status, underlying: storeCause.map(StoreFault.init(text:)))
            }
            return CLIError(message: message ?? "the refresh failed", status: exit ?? 1)
        }
    }

    /// Runs `request` for `profile` in a detached `moose __refresh`, and returns when it reported; throws
    /// what it reported. `false`: no child could be started here (the caller runs the refresh itself).
    static func run(_ request: Request, profile: String, store: StoreOptions) throws -> Bool {
        guard ProcessInfo.processInfo.environment["MOOSE_REFRESH_IN_PROCESS"] != "1", let executable = ownExecutable()
        else { return false }
        let arguments = [executable, "__refresh", "--profile", profile] + store.commandLine
        guard let child = try spawn(arguments) else { return false }
        let input = (try? JSONEncoder().encode(request)).map { Array($0) } ?? []
        _ = input.withUnsafeBytes { write(child.input, $0.baseAddress, $0.count) }
        close(child.input)
        let answer = readAll(child.output, limit: 1 << 20)
        close(child.output)
        var status: Int32 = 0
        while waitpid(child.pid, &status, 0) < 0, errno == EINTR {}
        guard let line = answer.split(separator: UInt8(ascii: "\n")).first,
            let outcome = try? JSONDecoder().decode(Outcome.self, from: Data(line))
        else {
            throw CLIError.failed(
                "the refresh process ended without an answer (status \(status)); the session is as the store holds it: "
                    + "try again (moose status shows it)")
        }
        if !outcome.ok { throw outcome.error }
        return true
    }

    /// This program's own path (Linux: `/proc/self/exe`), so that `moose-pg` starts `moose-pg`.
    static func ownExecutable() -> String? {
        #if os(Linux)
        var path = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: path.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #else
        return nil
        #endif
    }

    struct Child {
        let pid: pid_t
        /// Where the request is written.
        let input: Int32
        /// Where the outcome is read.
        let output: Int32
    }

    /// Starts `arguments` detached (see the type's documentation); `nil` when this system cannot.
    static func spawn(_ arguments: [String]) throws -> Child? {
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
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer.prefix(count)
        }
        return bytes
    }
}

/// `moose __refresh --profile P [store options]`: the detached refresher (`DetachedRefresh`). Not for
/// people: it reads its request on stdin and answers one JSON line on stdout.
struct RefreshWorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "__refresh", abstract: "The detached refresher (internal).",
        shouldDisplay: false)
    @OptionGroup var store: StoreOptions
    @Option var profile: String

    func run() throws {
        // The caller may be gone by the time the outcome is written: its closed pipe must not end this
        // process before (or while) it commits.
        signal(SIGPIPE, SIG_IGN)
        let outcome: DetachedRefresh.Outcome
        do {
            let input = DetachedRefresh.readAll(0, limit: 256 << 10)
            guard let request = try? JSONDecoder().decode(DetachedRefresh.Request.self, from: Data(input)) else {
                throw CLIError.usage("moose __refresh is moose's own refresher: it takes a request on stdin")
            }
            try Self.perform(request, profile: profile, store: store)
            outcome = .success
        } catch {
            outcome = DetachedRefresh.Outcome(error)
        }
        var line = (try? JSONEncoder().encode(outcome)).map { Array($0) } ?? Array(#"{"ok":false}"#.utf8)
        line.append(UInt8(ascii: "\n"))
        _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }

    /// The coordinator call `request` names, on `profile`'s session, as the caller would have made it.
    static func perform(_ request: DetachedRefresh.Request, profile: String, store: StoreOptions) throws {
        let context = try OAuthContext(options: store, create: false)
        defer { context.sessions.close() }
        guard let (session, settings) = try context.loadOrFail(profile) else {
            throw CLIError.failed("no session for profile \(profile); run moose login --profile \(profile)")
        }
        try OAuthContext.refreshInProcess(request, context: context, session: session, settings: settings)
    }
}

extension OAuthContext {
    /// Runs `request` on `session`'s coordinator in this process (the detached child, or a caller that
    /// cannot start one).
    static func refreshInProcess(
        _ request: DetachedRefresh.Request, context: OAuthContext, session: OAuthSession,
        settings: Profile
    ) throws {
        let coordinator = context.coordinator(for: session, profile: settings)
        switch request.mode {
        case .accessToken:
            let minimum = request.minimumValidity
            try refreshing(coordinator) { try await $0.accessToken(minimumValidity: minimum) }
        case .refreshNow:
            try refreshing(coordinator) { try await $0.refreshNow() }
        case .rejecting:
            let rejected = AccessToken(value: request.rejected ?? "")
            try refreshing(coordinator) { try await $0.refresh(rejecting: rejected) }
        }
    }

    /// Runs `request` for `profile` — detached when this system can start the child, else here.
    static func renew(
        _ request: DetachedRefresh.Request, profile: String, store: StoreOptions, context: OAuthContext,
        session: OAuthSession, settings: Profile
    ) throws {
        if try DetachedRefresh.run(request, profile: profile, store: store) { return }
        try refreshInProcess(request, context: context, session: session, settings: settings)
    }
}

extension StoreOptions {
    /// The options as a command line for another `moose` (paths and names only: a key itself never
    /// travels in arguments; `--key-env` names a variable the child inherits).
    var commandLine: [String] {
        var words: [String] = []
        if let storePath { words += ["--store", storePath] }
        if let keyFile { words += ["--key-file", keyFile] }
        if let keyEnvironment { words += ["--key-env", keyEnvironment] }
        if let passphraseFile { words += ["--passphrase-file", passphraseFile] }
        if let keySecretService { words += ["--key-secret-service", keySecretService] }
        return words
    }
}
