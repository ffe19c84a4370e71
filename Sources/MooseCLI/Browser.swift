import ArgumentParser
import Dispatch
import Synchronization
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseSecretStore
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

/// Opens `url` in the user's browser: `$BROWSER` (a command; the URL is its last argument) or xdg-open.
func openBrowser(_ url: URL) {
    let setting = getenv("BROWSER").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "xdg-open"
    // $BROWSER is a colon-separated list (the freedesktop convention): the first that starts is used.
    let commands = BrowserCommand.list(setting)
    startBrowser(commands, url: url.absoluteString)
}

/// `$BROWSER` read as the freedesktop convention has it.
enum BrowserCommand {
    /// The commands in `setting` (colon-separated), empty entries dropped.
    static func list(_ setting: String) -> [String] {
        setting.split(separator: ":").map(String.init).filter { $0.contains { $0 != " " } }
    }

    /// The argv for one command: its words, each `%s` replaced by the URL inside its own argument (`%%`
    /// is a `%`), and the URL appended as a last argument when no word had `%s`. Never a shell.
    static func argv(_ command: String, url: String) -> [String] {
        var substituted = false
        var words: [String] = command.split(separator: " ").map { word in
            var out = ""
            var rest = Substring(word)
            while let percent = rest.firstIndex(of: "%") {
                out += rest[..<percent]
                let next = rest.index(after: percent)
                if next < rest.endIndex, rest[next] == "s" {
                    out += url; substituted = true; rest = rest[rest.index(after: next)...]
                } else if next < rest.endIndex, rest[next] == "%" {
                    out += "%"; rest = rest[rest.index(after: next)...]
                } else {
                    out += "%"; rest = rest[next...]
                }
            }
            return out + rest
        }
        if !substituted { words.append(url) }
        return words
    }
}

/// Starts the first of `commands` that starts; one that exits with a failure (xdg-open with "no method
/// available") is reported at once, with the URL to open by hand, and the next one is tried.
private func startBrowser(_ commands: [String], url: String) {
    guard let command = commands.first else { return }
    let words = BrowserCommand.argv(command, url: url)
    guard !words.isEmpty else { return startBrowser(Array(commands.dropFirst()), url: url) }
    var pid = pid_t()
    let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    defer { posix_spawn_file_actions_destroy(&actions) }
    // The browser may outlive moose by days: it gets stdin, /dev/null and stderr, nothing else — not
    // the loopback listener (it would keep the port bound and could take the redirect itself), not
    // the store, not a connection to the provider.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    // The default signal mask and dispositions, not those of the thread that starts it (a concurrency
    // pool thread blocks every signal): a browser or wrapper that kept them would ignore TERM and INT.
    guard ChildProcess.closeInheritedDescriptors(&actions, &attributes), ChildProcess.defaultSignals(&attributes) else {
        Terminal.error(
            "moose: not starting the browser (this C library cannot close moose's descriptors in it); open the URL above by hand"
        )
        return
    }
    let name = Terminal.safe(words[0])
    if posix_spawnp(&pid, words[0], &actions, &attributes, argv, environ) != 0 {
        Terminal.error("moose: could not start the browser (\(name)); open the URL above by hand")
        startBrowser(Array(commands.dropFirst()), url: url)
        return
    }
    // Watch it: a launcher that gives up (a non-zero exit, a signal) is reported while moose still
    // waits for the redirect, and the next command in $BROWSER is tried. One that keeps running is a
    // browser; its exit whenever it comes is only reaped here.
    let started = pid
    let rest = Array(commands.dropFirst())
    DispatchQueue(label: "moose.browser.watch").async {
        var status: Int32 = 0
        while waitpid(started, &status, 0) == -1, errno == EINTR {}
        let exitedCleanly = (status & 0x7f) == 0 && ((status >> 8) & 0xff) == 0
        guard !exitedCleanly else { return }
        Terminal.error("moose: the browser command (\(name)) failed; open the URL above by hand")
        startBrowser(rest, url: url)
    }
}
