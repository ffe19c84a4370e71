import MooseHTTP
import MooseJWT
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseOAuth

extension TerminalSignIn {
    /// Logs `manager` in with the device authorization grant (RFC 8628): the user code and how long it
    /// lives on the console, the verification page in the browser (only an https page, or plain http on
    /// this machine), a countdown to the code's expiry.
    ///
    /// - Parameters:
    ///   - manager: the session's owner.
    ///   - parameters: the request's scopes and extra parameters; `nil`: the manager's.
    /// - Returns: who signed in.
    /// - Throws: `OAuthError`: what `TokenManager.login` throws (`expiredToken` when the code expired,
    ///   `missingEndpoint` when the provider lists no device authorization endpoint), and `timedOut`
    ///   when `timeout` passed first, `invalidConfiguration` for a `timeout` that is not a number of
    ///   seconds from 0 to a year.
    @discardableResult
    public func logInWithDevice(_ manager: TokenManager, parameters: AuthorizationParameters? = nil) async throws
        -> SessionSummary
    {
        let countdown = TerminalCountdown(console)
        let console = self.console, opens = opensBrowser, name = self.name, retry = self.retry, browser = self.browser
        let method = TokenManager.LoginMethod.device { device in
            for line in Self.deviceCodeLines(device, boxed: console.redraws, retry: retry) {
                console.write(line + "\n")
            }
            let page = device.verificationURIComplete ?? device.verificationURI
            if opens, TransportSecurity.permits(page) {
                Self.openBrowser(page, with: browser, name: name, note: countdown.note)
            }
            if console.redraws {
                countdown.start("Waiting for approval", until: device.expiresAt)
            } else {
                console.say("Waiting for approval…")
            }
        }
        defer { countdown.stop() }
        return try await Self.within(try checkedTimeout()) {
            try await manager.login(with: method, parameters: parameters)
        }
    }

    /// `body`, given up after `seconds` (`nil`: no limit of ours) with `OAuthError.timedOut`.
    static func within<T: Sendable>(_ seconds: TimeInterval?, _ body: @escaping @Sendable () async throws -> T)
        async throws -> T
    {
        guard let seconds else { return try await body() }
        return try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(min(max(seconds, 0), 366 * 86_400) * 1e9))
                throw OAuthError(OAuthError.timedOut, "no approval within \(DurationText.describe(seconds))")
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
    }

    /// The device code's lines, escaped for a terminal: the page and the code — spaced letters in a box
    /// when `boxed` (easy to read across a room, with a plain copy), else the plain code on its own line
    /// — the page that carries the code, if any, and how long the code lives (the provider's
    /// `expires_in`, RFC 8628 §3.2), ending with `retry`.
    static func deviceCodeLines(_ device: DeviceAuthorization, boxed: Bool, retry: String?) -> [String] {
        let code = TerminalText.safe(device.userCode, keepNewlines: false)
        let page = TerminalText.safe(device.verificationURI.absoluteString, keepNewlines: false)
        var lines = ["To sign in, open \(page) and enter the code:"]
        if boxed {
            let spaced = code.map(String.init).joined(separator: " ")
            let bar = String(repeating: "─", count: spaced.count + 4)
            lines += ["", "  ┌\(bar)┐", "  │  \u{1B}[1m\(spaced)\u{1B}[0m  │", "  └\(bar)┘", "", "  (copy: \(code))"]
        } else {
            lines.append(code)
        }
        if let complete = device.verificationURIComplete {
            lines.append(
                "(or open \(TerminalText.safe(complete.absoluteString, keepNewlines: false)), which carries the code)")
        }
        let lifetime = DurationText.describe(max(0, device.expiresAt.timeIntervalSinceNow).rounded())
        let again = retry.map { ", or \(TerminalText.safe($0, keepNewlines: false))" } ?? ""
        lines.append("The code expires in \(lifetime): approve before then\(again).")
        return lines
    }
}
