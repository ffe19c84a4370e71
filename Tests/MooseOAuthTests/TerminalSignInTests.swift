import Dispatch
import Foundation
import MooseHTTP
import MooseOAuth
@testable import MooseOAuthSystem
import MooseTestSupport
import Synchronization
import Testing

/// A command-line app's sign-in (`TerminalSignIn`) against the real test provider, with a console of
/// the test's own: what a person at the terminal would see, and what they paste.
struct TerminalSignInTests {
    /// What the sign-in wrote, and a line the test types once it is ready.
    final class Screen: Sendable {
        let text = Mutex("")
        let typed = Mutex<String?>(nil)
        let ready = DispatchSemaphore(value: 0)

        func console(acceptsInput: Bool) -> TerminalConsole {
            TerminalConsole(
                write: { chunk in self.text.withLock { $0 += chunk } },
                readLine: {
                    self.ready.wait()
                    return self.typed.withLock { $0 }
                }, acceptsInput: acceptsInput, redraws: false)
        }

        /// Types `line` (or the end of input).
        func type(_ line: String?) {
            typed.withLock { $0 = line }
            ready.signal()
        }

        /// The authorization URL shown, once it is.
        func shownURL() async throws -> URL {
            for _ in 0..<200 {
                let shown = text.withLock { $0 }.components(separatedBy: "\n").first { $0.hasPrefix("  http") }
                if let shown, let url = URL(string: String(shown.dropFirst(2))) { return url }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            throw OAuthError(OAuthError.timedOut, "no URL was shown")
        }
    }

    static func manager(clientID: String = "moose-cli", device: Bool = false) -> TokenManager {
        TokenManager(
            issuer: TestIdP.issuer, clientID: clientID, storage: InMemorySessionStorage(), transport: TestIdP.transport,
            endpoints: EndpointOverrides(
                deviceAuthorizationEndpoint: device ? URL(string: TestIdP.issuer + "/device-authorization/") : nil))
    }

    /// A browser on another machine: the person signs in there and pastes the address it ends on.
    @Test func aPastedAddressLogsIn() async throws {
        let screen = Screen()
        var signIn = TerminalSignIn(name: "acme", opensBrowser: false, paste: .always, timeout: 30)
        signIn.console = screen.console(acceptsInput: true)
        let person = Task {
            let url = try await screen.shownURL()
            let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: TestIdP.transport)
            // The redirect goes to 127.0.0.1, "a page that does not load there": the person copies its address.
            let redirect = try #require(
                URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first {
                    $0.name == "redirect_uri"
                }?
                .value)
            let landed = try await browser.visit(url, stopAt: redirect)
            screen.type(landed.absoluteString)
        }
        let user = try await signIn.logIn(Self.manager())
        try await person.value
        #expect(user.displayName == "alice" && user.state == .active)
        let shown = screen.text.withLock { $0 }
        #expect(shown.hasPrefix("Open this URL to sign in:\n  " + TestIdP.issuer), "\(shown)")
        #expect(shown.contains("If the browser is on another machine, sign in there, then paste"), "\(shown)")
        #expect(!shown.contains("Waiting for the redirect"), "a paste prompt is not followed by a wait line: \(shown)")
    }

    /// No browser could start and nobody can type: the login ends at once with `noBrowser`, each failed
    /// command noted with the app's name — not after the 300 s a redirect is waited for.
    @Test func noBrowserAndNoTerminalEndsAtOnce() async throws {
        let screen = Screen()
        // The redirect would be waited for 300 s: ending well within that is "at once", however loaded
        // the machine running the tests is.
        var signIn = TerminalSignIn(name: "acme", timeout: 300)
        signIn.browser = "/nonexistent/browser"
        signIn.console = screen.console(acceptsInput: false)
        let started = Date()
        let error = await #expect(throws: OAuthError.self) { try await signIn.logIn(Self.manager()) }
        #expect(error?.code == OAuthError.noBrowser, "\(String(describing: error))")
        #expect(Date().timeIntervalSince(started) < 100)
        let shown = screen.text.withLock { $0 }
        #expect(
            shown.contains("acme: could not start the browser (/nonexistent/browser); open the URL above by hand"),
            "\(shown)")
    }

    /// At a terminal, a browser that could not start turns the wait into the paste prompt.
    @Test func noBrowserAtATerminalAsksForThePaste() async throws {
        let screen = Screen()
        var signIn = TerminalSignIn(name: "acme", timeout: 30)
        signIn.browser = "/nonexistent/browser"
        signIn.console = screen.console(acceptsInput: true)
        let person = Task {
            let url = try await screen.shownURL()
            for _ in 0..<200 where !screen.text.withLock({ $0.contains("No browser could be started. ") }) {
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: TestIdP.transport)
            let redirect = try #require(
                URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first {
                    $0.name == "redirect_uri"
                }?
                .value)
            screen.type(try await browser.visit(url, stopAt: redirect).absoluteString)
        }
        let user = try await signIn.logIn(Self.manager())
        try await person.value
        #expect(user.displayName == "alice")
        #expect(
            screen.text.withLock { $0 }.contains("No browser could be started. If the browser is on another machine"))
    }

    /// The device code on the console (plain, escaped, ending with the app's words), approved by the
    /// person elsewhere; and a code nobody approves ends at the sign-in's timeout with `timedOut`.
    @Test func aDeviceLoginShowsTheCodeAndEndsAtItsTimeout() async throws {
        let screen = Screen()
        var signIn = TerminalSignIn(name: "acme", opensBrowser: false, timeout: 6)
        signIn.retry = "run acme login --device again"
        signIn.console = screen.console(acceptsInput: false)
        // Discovery first, so the timeout is spent on the code (a loaded machine is slow to discover).
        let manager = Self.manager(clientID: "moose-device", device: true)
        _ = try await manager.metadata()
        let error = await #expect(throws: OAuthError.self) { try await signIn.logInWithDevice(manager) }
        #expect(error?.code == OAuthError.timedOut && error?.message == "no approval within 6s")
        let lines = screen.text.withLock { $0 }.components(separatedBy: "\n")
        #expect(lines.first == "To sign in, open \(TestIdP.issuer)/device/ and enter the code:", "\(lines)")
        #expect(lines.count > 2 && lines[1].count >= 6 && !lines[1].contains(" "), "the plain code: \(lines)")
        #expect(
            lines.contains {
                $0.hasPrefix("The code expires in ")
                    && $0.hasSuffix(": approve before then, or run acme login --device again.")
            },
            "\(lines)")
        #expect(lines.contains("Waiting for approval…"))
    }

    /// A device login the person approves: the sign-in hands back who signed in.
    @Test func anApprovedDeviceLoginSignsIn() async throws {
        let screen = Screen()
        var signIn = TerminalSignIn(name: "acme", opensBrowser: false, timeout: 60)
        signIn.console = screen.console(acceptsInput: false)
        let person = Task {
            var lines: [String] = []
            for _ in 0..<600 {
                lines = screen.text.withLock { $0 }.components(separatedBy: "\n")
                if lines.count > 2 { break }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            let code = try #require(lines.count > 2 ? lines[1] : nil, "no code shown: \(lines)")
            let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: TestIdP.transport)
            let (page, _) = try await browser.page(try #require(URL(string: TestIdP.issuer + "/device/")))
            let answer = try await browser.submitForm(at: page, values: ["user_code": code])
            // The consent page is accepted; the provider's status page after it has no form (not a failure).
            if let location = answer.headerFields[.location], let confirm = URL(string: location, relativeTo: page) {
                _ = try? await browser.visit(confirm.absoluteURL, stopAt: "http://never/")
            }
        }
        let user = try await signIn.logInWithDevice(Self.manager(clientID: "moose-device", device: true))
        try await person.value
        #expect(user.state == .active && user.issuer == TestIdP.issuer)
    }

    /// A timeout from an app's settings may be anything: one that is not a number of seconds is a
    /// configuration error, not a crash (NaN once trapped converting to nanoseconds) and not a wait.
    @Test(arguments: [Double.nan, -1, .infinity, 1e300])
    func aTimeoutThatIsNotSecondsIsRefused(_ timeout: Double) async throws {
        let screen = Screen()
        var signIn = TerminalSignIn(name: "acme", opensBrowser: false, timeout: timeout)
        signIn.console = screen.console(acceptsInput: false)
        let device = await #expect(throws: OAuthError.self) {
            try await signIn.logInWithDevice(Self.manager(clientID: "moose-device", device: true))
        }
        #expect(device?.code == OAuthError.invalidConfiguration, "\(String(describing: device))")
        let browser = await #expect(throws: OAuthError.self) { try await signIn.logIn(Self.manager()) }
        #expect(browser?.code == OAuthError.invalidConfiguration, "\(String(describing: browser))")
    }

    /// After the login, a browser that fails late prompts for nothing, and a thread waiting to offer
    /// the paste prompt is let go.
    @Test func aBrowserThatFailsAfterTheLoginChangesNothing() async throws {
        let gone = BrowserGone()
        let waited = Task.detached { gone.wait() }
        gone.finish()
        #expect(await waited.value == false, "the waiting prompt thread was let go, with nothing to prompt")
        gone.signal()
        #expect(gone.wait() == false, "a browser failing after the login is not 'no browser'")
        let gone2 = BrowserGone()
        gone2.signal()
        #expect(gone2.wait() == true)
    }

    /// The countdown never draws after its line was cleared, nor after a paste prompt closed it.
    @Test func aClosedCountdownDrawsNothing() async throws {
        let screen = Screen()
        var console = screen.console(acceptsInput: true)
        console.redraws = true
        let countdown = TerminalCountdown(console)
        countdown.start("Waiting", until: Date().addingTimeInterval(60))
        try await Task.sleep(nanoseconds: 250_000_000)
        countdown.close()
        let closed = screen.text.withLock { $0 }
        #expect(closed.contains("Waiting — ") && closed.hasSuffix("\r\u{1B}[2K"), "\(closed.debugDescription)")
        countdown.start("Again", until: Date().addingTimeInterval(60))
        countdown.note("acme: a note")
        try await Task.sleep(nanoseconds: 250_000_000)
        #expect(screen.text.withLock { $0 } == closed + "acme: a note\n", "nothing drawn after close")
    }
}
