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

/// The terminal a `TerminalSignIn` talks to: where its lines go, where a pasted address comes from,
/// and what the terminal can do. `standard` is this process's standard error and standard input; a
/// test, or an app with a terminal of its own (a TUI), gives its own.
public struct TerminalConsole: Sendable {
    /// Writes text as it is: lines end in a newline, a redrawn countdown starts with a carriage return.
    /// What the sign-in writes is already safe for a terminal — every part that came from outside (an
    /// authorization URL, a user code, a browser command) has its control characters shown as visible
    /// escapes — and the only escape sequences in it are its own (bold, clearing the countdown's line).
    public var write: @Sendable (String) -> Void
    /// Reads one line the person typed, without its newline; `nil` at the end of input. Blocking: a
    /// pasted address is waited for on a thread of its own.
    public var readLine: @Sendable () -> String?
    /// Whether a person can type into `readLine`: standard input is a terminal.
    public var acceptsInput: Bool
    /// Whether a line can be redrawn in place (a countdown, the device code in a box): standard error
    /// is a terminal whose `TERM` is set and is not `dumb`.
    public var redraws: Bool

    /// A console of the app's own.
    ///
    /// - Parameters:
    ///   - write: writes text as it is (see `write`).
    ///   - readLine: reads one typed line (see `readLine`).
    ///   - acceptsInput: whether a person can type into `readLine`.
    ///   - redraws: whether a line can be redrawn in place.
    public init(
        write: @escaping @Sendable (String) -> Void, readLine: @escaping @Sendable () -> String?,
        acceptsInput: Bool, redraws: Bool
    ) {
        self.write = write
        self.readLine = readLine
        self.acceptsInput = acceptsInput
        self.redraws = redraws
    }

    /// This process's standard error (written with retries of short writes, never buffered) and
    /// standard input, with what they are now: a terminal or not.
    public static var standard: TerminalConsole {
        TerminalConsole(
            write: { text in StandardStream.writeAll(2, Array(text.utf8)) },
            readLine: { Swift.readLine(strippingNewline: true) },
            acceptsInput: isatty(0) == 1, redraws: standardErrorRedraws)
    }

    /// Whether this process's standard error is a terminal that can redraw a line (`TERM` set, not `dumb`).
    public static var standardErrorRedraws: Bool {
        guard isatty(2) == 1, let term = getenv("TERM").map({ String(cString: $0) }) else { return false }
        return !term.isEmpty && term != "dumb"
    }

    /// Writes `line` and a newline, every character that could drive the terminal shown as a visible escape.
    func say(_ line: String) {
        let text = TerminalText.safe(line)
        write(text.hasSuffix("\n") ? text : text + "\n")
    }
}

/// The process's standard streams, written without buffering.
package enum StandardStream {
    /// Writes every byte to `descriptor`, retrying short writes and EINTR (a terminal, a pipe); gives
    /// up silently when the descriptor is closed. `moose`'s output goes through this too.
    package static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0, errno == EINTR { continue }
            if written <= 0 { return }
            offset += written
        }
    }
}

/// A one-line countdown for a long wait (a browser, a device approval), redrawn every 100 ms on a
/// console that can redraw, cleared when the wait ends; a console that cannot gets nothing from it.
/// Notes written meanwhile (`note`) clear its line first, so none lands on the countdown. It may be
/// stopped from any thread, once or many times, and never blocks for longer than one write; once
/// `close`d (a paste prompt took its place) it does not start again.
final class TerminalCountdown: Sendable {
    private let console: TerminalConsole
    /// The countdown drawn now (its label and deadline), and whether it may start again. Every write
    /// to the console of the countdown and of the notes happens under this lock, so a frame is never
    /// drawn after the line was cleared.
    private let state = Mutex<(drawing: (label: String, deadline: Date)?, closed: Bool, generation: Int)>(
        (nil, false, 0))

    init(_ console: TerminalConsole) { self.console = console }

    /// Starts redrawing `label` with the time left until `deadline` (on a console that redraws; not
    /// after `close`).
    func start(_ label: String, until deadline: Date) {
        guard console.redraws else { return }
        let text = TerminalText.safe(label, keepNewlines: false)
        // A new drawing thread only when none draws: each draws while the generation it started is current.
        let generation = state.withLock { state -> Int? in
            guard !state.closed else { return nil }
            defer { state.drawing = (text, deadline) }
            guard state.drawing == nil else { return nil }
            state.generation += 1
            return state.generation
        }
        guard let generation else { return }
        let frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
        DispatchQueue.global().async { [self] in
            var frame = 0
            while true {
                let going = state.withLock { state -> Bool in
                    guard state.generation == generation, let (text, deadline) = state.drawing else { return false }
                    let left = max(0, deadline.timeIntervalSinceNow).rounded(.down)
                    let glyph = frames[frame % frames.count]
                    console.write("\r\u{1B}[2K\(glyph) \(text) — \(DurationText.describe(left)) left")
                    return true
                }
                guard going else { return }
                frame += 1
                usleep(100_000)
            }
        }
    }

    /// Stops the countdown and clears its line, if one runs.
    func stop() {
        state.withLock { state in
            guard state.drawing != nil else { return }
            state.drawing = nil
            console.write("\r\u{1B}[2K")
        }
    }

    /// Stops the countdown for good: a later `start` draws nothing.
    func close() {
        stop()
        state.withLock { $0.closed = true }
    }

    /// Writes `line` as `TerminalConsole.say` does, on a line of its own: the countdown's line is
    /// cleared first, and the next frame is drawn below it.
    func note(_ line: String) {
        state.withLock { state in
            if state.drawing != nil { console.write("\r\u{1B}[2K") }
            console.say(line)
        }
    }
}
