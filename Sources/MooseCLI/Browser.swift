import MooseJWT
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

func expiryText(_ tokens: TokenSet) -> String {
    guard let expiresAt = tokens.expiresAt else { return "no expiry given" }
    let left = expiresAt.timeIntervalSinceNow
    return left > 0 ? "valid for \(DurationText.describe(left))" : "expired \(DurationText.describe(-left)) ago"
}

/// Opens `url` in the user's browser (the library's `SystemBrowser`: `$BROWSER`, else xdg-open), each
/// command that did not open it reported on standard error with the next step.
func openBrowser(_ url: URL) {
    SystemBrowser(setting: getenv("BROWSER").map { String(cString: $0) }) { problem in
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
    }
    .open(url)
}
