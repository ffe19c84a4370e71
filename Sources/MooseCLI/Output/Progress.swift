import Dispatch
import MooseJWT
import Synchronization
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

/// A one-line spinner with a countdown on standard error, for the long waits of `moose login`
/// (a browser, a device approval). Only on a terminal (`isatty(2)`, `TERM` not `dumb`); piped or
/// redirected output gets the plain lines alone. The line is cleared when the wait ends.
final class Progress: Sendable {
    private let running = Atomic<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)
    private let active: Bool

    /// Whether standard error is a terminal that can redraw a line.
    static var isInteractive: Bool {
        guard isatty(2) == 1 else { return false }
        let term = getenv("TERM").map { String(cString: $0) } ?? ""
        return !term.isEmpty && term != "dumb"
    }

    /// Starts redrawing `label` with the time left until `deadline` every 100 ms.
    init(_ label: String, until deadline: Date) {
        active = Self.isInteractive
        guard active else { return }
        let frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
        let text = Terminal.safe(label, keepNewlines: false)
        DispatchQueue.global().async { [self] in
            var frame = 0
            while running.load(ordering: .acquiring) {
                let left = max(0, deadline.timeIntervalSinceNow).rounded(.down)
                let line = "\r\u{1B}[2K\(frames[frame % frames.count]) \(text) — \(DurationText.describe(left)) left"
                Terminal.writeAll(2, Array(line.utf8))
                frame += 1
                usleep(100_000)
            }
            Terminal.writeAll(2, Array("\r\u{1B}[2K".utf8))
            finished.signal()
        }
    }

    /// Stops and clears the line.
    func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing), active else { return }
        finished.wait()
    }
}

/// The spinner of a wait that may be stopped from another thread (a paste prompt replacing it).
final class ProgressSlot: Sendable {
    private let current = Mutex<Progress?>(nil)

    /// Starts the spinner (see `Progress`).
    func start(_ label: String, until deadline: Date) {
        current.withLock { $0 = Progress(label, until: deadline) }
    }

    /// Stops and clears it, if it runs.
    func stop() {
        let running = current.withLock { progress in
            defer { progress = nil }
            return progress
        }
        running?.stop()
    }
}

/// The device flow's user code, large enough to read across a room and easy to copy: spaced
/// letters in a box on a terminal, the plain code on its own line otherwise; and, on a terminal or
/// not, how long the code lives (`expiresIn` seconds, the provider's `expires_in`, RFC 8628 §3.2).
enum DeviceCodeBanner {
    static func lines(userCode: String, verificationURI: String, complete: String?, expiresIn: TimeInterval) -> [String]
    {
        let code = Terminal.safe(userCode, keepNewlines: false)
        var lines = ["To sign in, open \(Terminal.safe(verificationURI, keepNewlines: false)) and enter the code:"]
        if Progress.isInteractive {
            let spaced = code.map(String.init).joined(separator: " ")
            let bar = String(repeating: "─", count: spaced.count + 4)
            lines += ["", "  ┌\(bar)┐", "  │  \u{1B}[1m\(spaced)\u{1B}[0m  │", "  └\(bar)┘", "", "  (copy: \(code))"]
        } else {
            lines.append(code)
        }
        if let complete {
            lines.append("(or open \(Terminal.safe(complete, keepNewlines: false)), which carries the code)")
        }
        lines.append(
            "The code expires in \(DurationText.describe(max(0, expiresIn).rounded())): approve before then, or run the same moose login --device command again."
        )
        return lines
    }
}
