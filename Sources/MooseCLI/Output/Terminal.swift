import ArgumentParser
import MooseJWT
import MooseOAuthSystem
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ends the process with `status`.
func terminate(_ status: Int32) -> Never {
    #if canImport(Glibc)
    Glibc.exit(status)
    #else
    Darwin.exit(status)
    #endif
}

/// Standard streams without pulling in all of Foundation (start-up time matters for a CLI).
enum Terminal {
    /// Writes a line to standard error, made safe for a terminal (`safe`).
    static func error(_ message: String) {
        let text = safe(message)
        let line = text.hasSuffix("\n") ? text : text + "\n"
        writeAll(2, Array(line.utf8))
    }

    /// Writes a line to standard output, made safe for a terminal (`safe`). Every line the CLI
    /// prints goes through here or `error`, so no provider, token or browser text reaches the
    /// terminal raw.
    static func out(_ message: String) {
        writeAll(1, Array((safe(message) + "\n").utf8))
    }

    /// Writes a line to standard output as it is: only for text whose outside parts were already
    /// passed through `safe` (the colored `moose inspect` report).
    static func outPreSanitized(_ message: String) {
        writeAll(1, Array((message + "\n").utf8))
    }

    /// `text` with every character that could drive a terminal or disguise output shown as a
    /// visible escape instead (`TerminalText.safe`, MooseJWT): C0 controls (but newline and tab), DEL,
    /// C1 controls (U+0080–U+009F, CSI included), line separators and bidirectional controls — `ESC`
    /// becomes `\u{1b}`. Total over any string.
    static func safe(_ text: String, keepNewlines: Bool = true) -> String {
        TerminalText.safe(text, keepNewlines: keepNewlines) // the library's rule, which its reports follow too
    }

    /// `true` when standard input is a terminal (nothing piped in).
    static var stdinIsTerminal: Bool { isatty(0) == 1 }

    /// `true` when standard output is a terminal.
    static var stdoutIsTerminal: Bool { isatty(1) == 1 }

    /// Writes bytes to standard output as they are.
    static func writeStandardOutput(_ bytes: [UInt8]) { writeAll(1, bytes) }

    /// Writes every byte to `descriptor`, retrying short writes and EINTR (the library's writer).
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) { StandardStream.writeAll(descriptor, bytes) }

    /// Prompts on standard error and reads one line from the terminal without echoing it.
    static func readSecretLine(prompt: String) throws -> String {
        error(prompt)
        var saved = termios()
        let haveTerminal = tcgetattr(0, &saved) == 0
        if haveTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(0, TCSAFLUSH, &quiet)
        }
        defer { if haveTerminal { tcsetattr(0, TCSAFLUSH, &saved); error("") } }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(0, &byte, 1) == 1, byte != 0x0A { line.append(byte) }
        return String(decoding: line, as: UTF8.self)
    }

    /// Reads standard input up to `limit` bytes; `nil` if there is more than that. A read that fails
    /// (not the end of input) is an error: never a value cut short taken for the whole.
    static func readStandardInput(limit: Int) throws -> [UInt8]? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw CLIError.failed("cannot read standard input (\(String(cString: strerror(errno))))")
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: buffer[0..<count])
            if bytes.count > limit { return nil }
        }
    }
}

/// An error the CLI reports and exits with.
public struct CLIError: Error, CustomStringConvertible {
    /// What `moose` prints after "moose: error: " (never a secret).
    public let message: String
    /// The exit status.
    public let status: Int32

    /// Usage or input error (exit 2).
    public static func usage(_ message: String) -> CLIError { CLIError(message: message, status: 2) }
    /// The operation failed (exit 1).
    public static func failed(_ message: String) -> CLIError { CLIError(message: message, status: 1) }

    /// The message.
    public var description: String { message }

    /// A browser login that ended at once (`OAuthError.noBrowser`), in the CLI's words; each command
    /// adds its way out.
    static let noBrowserHere =
        "no browser could be started (see above), and standard input is not a terminal to paste the address into"
}

/// The next step's command line for a profile: `moose login`, with `--profile NAME` unless it is the
/// default profile (so a hint pasted as is logs in the profile it is about).
func loginHint(_ profile: String) -> String {
    profile == "default" ? "moose login" : "moose login --profile \(Terminal.safe(profile))"
}

/// Moose's exit statuses.
enum Status {
    /// The token or the operation failed.
    static let failed = ExitCode(1)
    /// Usage or input error.
    static let usage = ExitCode(2)
}

extension JSONValue {
    /// A string member of the CLI's JSON output: JSON `null` when there is none (every `--json` object
    /// names its members whether or not they have a value).
    static func string(_ text: String?) -> JSONValue {
        guard let text else { return .null }
        return .string(text)
    }
}
