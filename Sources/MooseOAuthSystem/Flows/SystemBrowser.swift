#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseOAuth
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The user's browser, started for a login page as desktop tools start it — what a `.loopback` login's
/// `open` needs: `TokenManager.login(with: .loopback { url in SystemBrowser().open(url) })`.
///
/// The commands are `$BROWSER`'s (a colon-separated list, the freedesktop convention; in each, `%s` is
/// replaced by the URL in its own argument and `%%` is a `%`, else the URL is the last argument), or
/// `xdg-open` (`open` on macOS). The first that starts is used; one that cannot start, or whose
/// launcher exits with a failure (xdg-open's "no method available"), is reported to `onProblem` and the
/// next is tried. Never a shell.
///
/// The browser may outlive the app by days, so it inherits nothing of the app's but standard input
/// and error: standard output goes to `/dev/null`, and no other descriptor — not the loopback
/// listener (a browser holding it would keep the port bound and could take the redirect itself), not
/// a store, not a connection. It starts with the default signal mask and dispositions, not those of
/// the thread that started it (a concurrency thread blocks every signal): TERM and INT end it.
///
/// Opening is best effort: always show the URL too, for a person to open by hand.
public struct SystemBrowser: Sendable {
    /// Why a command did not open the page.
    public enum Problem: Sendable, Hashable {
        /// The command could not be started (not installed, not executable); the next one is tried.
        case cannotStart(command: String)
        /// The command started and exited with a failure or a signal; the next one is tried.
        case failed(command: String)
        /// This C library cannot keep the app's descriptors from a child: nothing was started.
        case cannotIsolate
    }

    /// The commands tried in order (each a program and its arguments, split on spaces).
    public let commands: [String]
    /// Told of each command that did not open the page (its program name as given — escape it before
    /// it reaches a terminal), perhaps later, from another thread: a launcher's failure is seen when it exits.
    public let onProblem: @Sendable (Problem) -> Void

    /// The browser `setting` names — `$BROWSER`'s value — else the platform's opener.
    ///
    /// - Parameters:
    ///   - setting: a colon-separated list of commands; `nil` or blank: `xdg-open` (`open` on macOS).
    ///     Default: the process's `BROWSER` variable.
    ///   - onProblem: told of each command that did not open the page; default: nothing.
    public init(
        setting: String? = ProcessInfo.processInfo.environment["BROWSER"],
        onProblem: @escaping @Sendable (Problem) -> Void = { _ in }
    ) {
        var commands = Self.commands(setting ?? "")
        if commands.isEmpty {
            #if canImport(Darwin)
            commands = ["open"]
            #else
            commands = ["xdg-open"]
            #endif
        }
        self.commands = commands
        self.onProblem = onProblem
    }

    /// Starts the first command that starts, with `url`; returns at once (a launcher is watched in
    /// the background, and the next command tried if it fails).
    ///
    /// - Parameter url: the page to open.
    public func open(_ url: URL) {
        Self.start(commands[...], url: url.absoluteString, onProblem: onProblem)
    }

    /// The commands of a `$BROWSER` value: split at `:`, blank entries dropped.
    ///
    /// - Parameter setting: the value.
    /// - Returns: the commands, in order.
    public static func commands(_ setting: String) -> [String] {
        setting.split(separator: ":").map(String.init).filter { $0.contains { $0 != " " } }
    }

    /// The argument vector for one command: its words, each `%s` replaced by the URL inside its own
    /// argument (`%%` is a `%`), and the URL appended as the last argument when no word had `%s`.
    ///
    /// - Parameters:
    ///   - command: one command of a `$BROWSER` list.
    ///   - url: the page.
    /// - Returns: the program (first) and its arguments.
    public static func argv(_ command: String, url: String) -> [String] {
        var substituted = false
        var words: [String] = command.split(separator: " ").map { word in
            var out = ""
            var rest = Substring(word)
            while let percent = rest.firstIndex(of: "%") {
                out += rest[..<percent]
                let next = rest.index(after: percent)
                if next < rest.endIndex, rest[next] == "s" {
                    out += url
                    substituted = true
                    rest = rest[rest.index(after: next)...]
                } else if next < rest.endIndex, rest[next] == "%" {
                    out += "%"
                    rest = rest[rest.index(after: next)...]
                } else {
                    out += "%"
                    rest = rest[next...]
                }
            }
            return out + rest
        }
        if !substituted { words.append(url) }
        return words
    }

    private static func start(
        _ commands: ArraySlice<String>, url: String, onProblem: @escaping @Sendable (Problem) -> Void
    ) {
        guard let command = commands.first else { return }
        let rest = commands.dropFirst()
        let words = argv(command, url: url)
        guard !words.isEmpty else { return start(rest, url: url, onProblem: onProblem) }
        var pid = pid_t()
        if let problem = spawn(words, pid: &pid) {
            onProblem(problem)
            if problem != .cannotIsolate { start(rest, url: url, onProblem: onProblem) }
            return
        }
        let started = pid
        // A launcher that gives up (a non-zero exit, a signal) is reported and the next command tried;
        // one that keeps running is a browser, and its exit, whenever it comes, is only reaped here.
        let remaining = Array(rest)
        DispatchQueue(label: "moose.browser.watch").async {
            var status: Int32 = 0
            while waitpid(started, &status, 0) == -1, errno == EINTR {}
            guard (status & 0x7f) != 0 || ((status >> 8) & 0xff) != 0 else { return }
            onProblem(.failed(command: words[0]))
            start(remaining[...], url: url, onProblem: onProblem)
        }
    }

    /// Starts `words` with standard output on `/dev/null`, no other inherited descriptor but 0 and 2,
    /// and the default signals; `nil` when it started (its process id in `pid`).
    private static func spawn(_ words: [String], pid: inout pid_t) -> Problem? {
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        guard ChildProcess.closeInheritedDescriptors(&actions, &attributes), ChildProcess.defaultSignals(&attributes)
        else { return .cannotIsolate }
        guard posix_spawnp(&pid, words[0], &actions, &attributes, argv, environ) == 0 else {
            return .cannotStart(command: words[0])
        }
        return nil
    }
}
