import Dispatch
import MooseJWT
import Synchronization
import MooseOAuth
import MooseOAuthSystem
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

func expiryText(_ tokens: TokenSet) -> String {
    guard let expiresAt = tokens.expiresAt else { return "no expiry given" }
    let left = expiresAt.timeIntervalSinceNow
    return left > 0 ? "valid for \(DurationText.describe(left))" : "expired \(DurationText.describe(-left)) ago"
}

/// Opens `url` in the user's browser (the library's `SystemBrowser`: `$BROWSER`, else xdg-open), each
/// command that did not open it reported on standard error with the next step; `noneStarted` is called
/// once when every command of the list failed (no browser will come back), from any thread.
func openBrowser(_ url: URL, noneStarted: @escaping @Sendable () -> Void = {}) {
    let setting = getenv("BROWSER").map { String(cString: $0) }
    let listed = setting.map(SystemBrowser.commands) ?? []
    let commands = listed.isEmpty ? 1 : listed.count // none listed: xdg-open (open on macOS) alone
    let failures = FailureCount()
    SystemBrowser(setting: setting) { problem in
        switch problem {
        case .cannotIsolate:
            Terminal.error(
                "moose: not starting the browser (this C library cannot close moose's descriptors in it); open the URL above by hand"
            )
        case .cannotStart(let command):
            Terminal.error("moose: could not start the browser (\(Terminal.safe(command))); open the URL above by hand")
        case .failed(let command):
            Terminal.error("moose: the browser command (\(Terminal.safe(command))) failed; open the URL above by hand")
        }
        // SystemBrowser tries no further command after .cannotIsolate; after the others, the next one.
        let given = failures.count.withLock { count in
            count += 1
            return problem == .cannotIsolate || count == commands
        }
        if given { noneStarted() }
    }
    .open(url)
}

/// The browser commands that failed so far (`openBrowser`).
private final class FailureCount: Sendable {
    let count = Mutex(0)
}

/// Set once no browser command could start (`openBrowser`'s `noneStarted`): no browser will bring the
/// redirect. A terminal then offers the paste prompt (`wait`); a login without one ends at once (`ending`).
final class BrowserGone: Sendable {
    private let gone = DispatchSemaphore(value: 0)
    private let events: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (events, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// No browser could start (called once).
    func signal() {
        gone.signal()
        continuation.yield()
    }

    /// Blocks the calling thread until no browser could start (never, when one did).
    func wait() { gone.wait() }

    /// `body`, unless `ends` and no browser could start first: then a usage error at once, naming the
    /// way to log in without a browser here, rather than a wait for a redirect that cannot come.
    func ending<T: Sendable>(
        _ ends: Bool,
        way: String = "run the same moose login command with --paste (it prints a new URL to open in any browser, "
            + "and reads the address the browser ends on from standard input), or with --device, or set BROWSER to "
            + "a browser command",
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        guard ends else { return try await body() }
        let events = self.events
        return try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                for await _ in events {
                    throw CLIError.failed(
                        "no browser could be started (see above), and standard input is not a terminal to paste "
                            + "the address into: \(way)")
                }
                throw CancellationError()
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
    }
}
