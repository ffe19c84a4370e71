import Dispatch
import MooseHTTP
import MooseJWT
import Synchronization
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth

/// Signs a person in at a terminal, the way command-line tools do (`gh auth login`, `az login`,
/// kubelogin) — for a command-line app built on Moose, and for `moose login` itself.
///
/// A browser login (`logIn(_:)`) shows the authorization URL, opens the system browser on it
/// (`SystemBrowser`: `$BROWSER`, else xdg-open), and waits for the redirect on 127.0.0.1 with a
/// countdown. It never waits silently for a redirect that cannot come:
/// - with no browser opened, or none that could start, a person at a terminal is asked to paste the
///   address the browser ends on (a browser on another machine: ssh, a container; `PasteUserAgent`);
/// - with no terminal to paste into and no browser that could start, the login ends at once with
///   `OAuthError.noBrowser`.
///
/// A device login (`logInWithDevice(_:)`) shows the user code (in a box, at a terminal that can show
/// one), how long it lives, opens the verification page when it is https (or plain http on this
/// machine), and counts down to the code's expiry.
///
/// Every line goes to `console`, escaped for a terminal; the words are the library's, and `retry` is
/// the app's own (how to start again: its command line).
///
/// ```swift
/// var signIn = TerminalSignIn(name: "acme")
/// signIn.retry = "run acme login again"
/// let user = try await signIn.logIn(manager)
/// ```
public struct TerminalSignIn: Sendable {
    /// When the address the browser ends on may be pasted at the terminal, beside the loopback redirect.
    public enum Paste: Sendable, Hashable {
        /// Never: only the loopback redirect ends a browser login.
        case never
        /// At a terminal, when no browser is opened or none could start (the default).
        case whenNoBrowser
        /// From the start, whether input is a terminal or not (a browser on another machine, the
        /// address piped in).
        case always
    }

    /// The app's name, which starts its notes (`acme: could not start the browser (…)`).
    public var name: String
    /// Whether the system browser is opened on the page (default `true`); without it the URL is shown only.
    public var opensBrowser: Bool
    /// When a pasted address is taken (default `.whenNoBrowser`).
    public var paste: Paste
    /// The loopback port of the redirect; `nil` (the default): a random free one.
    public var port: UInt16?
    /// Seconds the person has; `nil` (the default): 300 for a browser login, the device code's own
    /// lifetime for a device login.
    public var timeout: TimeInterval?
    /// The app's words for starting again (`run acme login --device again`), ending the device code's
    /// lines; `nil`: none.
    public var retry: String?
    /// Where lines go and a pasted address comes from (default: standard error and standard input).
    public var console: TerminalConsole
    /// The browser commands, in `$BROWSER`'s form (`SystemBrowser`); default: the process's `BROWSER`
    /// variable (`nil` or blank: xdg-open, open on macOS).
    public var browser: String? = ProcessInfo.processInfo.environment["BROWSER"]

    /// A sign-in for the app called `name`, with the defaults above.
    ///
    /// - Parameters:
    ///   - name: the app's name, which starts its notes.
    ///   - opensBrowser: whether the system browser is opened.
    ///   - paste: when a pasted address is taken.
    ///   - port: the loopback port (`nil`: a random free one).
    ///   - timeout: seconds the person has (`nil`: see `timeout`).
    ///   - console: the terminal.
    public init(
        name: String, opensBrowser: Bool = true, paste: Paste = .whenNoBrowser, port: UInt16? = nil,
        timeout: TimeInterval? = nil, console: TerminalConsole = .standard
    ) {
        self.name = name
        self.opensBrowser = opensBrowser
        self.paste = paste
        self.port = port
        self.timeout = timeout
        self.console = console
    }

    /// Logs `manager` in through the browser (authorization code + PKCE, RFC 8252 loopback redirect).
    ///
    /// - Parameters:
    ///   - manager: the session's owner.
    ///   - parameters: the request's scopes and extra parameters; `nil`: the manager's.
    ///   - pushedAuthorization: whether the request is pushed first (RFC 9126).
    /// - Returns: who signed in.
    /// - Throws: `OAuthError`: what `TokenManager.login` throws — `timedOut` when the person did not
    ///   finish in time, `pasteRefused` after too many pasted lines that were not this login's — and
    ///   `noBrowser` when no browser could start and there is no terminal to paste into.
    @discardableResult
    public func logIn(
        _ manager: TokenManager, parameters: AuthorizationParameters? = nil,
        pushedAuthorization: PushedAuthorizationPolicy = .whenAdvertised
    ) async throws -> SessionSummary {
        let metadata = try await manager.metadata()
        // RFC 9207: a provider that promises `iss` needs the whole address pasted, not the code alone.
        return try await run(
            provider: metadata.issuer, requiresAddress: metadata.authorizationResponseIssParameterSupported == true
        ) { method in
            try await manager.login(with: method, parameters: parameters, pushedAuthorization: pushedAuthorization)
        }
    }

    /// Logs a resource's session in through the browser (its provider discovered first, a client
    /// registered when it must be; `ResourceTokenManager.login`).
    ///
    /// - Parameters:
    ///   - manager: the resource's session owner.
    ///   - scopes: the scopes to ask for; `nil`: the manager's.
    /// - Returns: who signed in.
    /// - Throws: as `logIn(_:parameters:pushedAuthorization:)`, and the manager's discovery and registration errors.
    @discardableResult
    public func logIn(_ manager: ResourceTokenManager, scopes: [String]? = nil) async throws -> SessionSummary {
        // The provider is not known before the login discovers it: a pasted code alone is taken, and
        // the flow refuses its redirect if the provider promised `iss` (RFC 9207).
        try await run(provider: nil, requiresAddress: false) { method in
            try await manager.login(with: method, scopes: scopes)
        }
    }

    /// Runs `login` with a browser login method that shows the URL, opens the browser and takes the
    /// redirect (or a pasted address) as this sign-in is set — for an owner of the app's own.
    ///
    /// - Parameters:
    ///   - provider: the provider's issuer, named in the paste prompt; `nil`: not known yet.
    ///   - requiresAddress: only the whole address may be pasted (the provider promises RFC 9207 `iss`).
    ///   - login: the login, run with the method.
    /// - Returns: what `login` returns.
    /// - Throws: what `login` throws, `OAuthError.noBrowser` (see `logIn(_:parameters:pushedAuthorization:)`),
    ///   and `invalidConfiguration` for a `timeout` that is not a number of seconds from 0 to a year.
    public func run<T: Sendable>(
        provider: String?, requiresAddress: Bool,
        _ login: @escaping @Sendable (TokenManager.LoginMethod) async throws -> T
    ) async throws -> T {
        let pasting = paste == .always || (paste == .whenNoBrowser && !opensBrowser && console.acceptsInput)
        let countdown = TerminalCountdown(console)
        let gone = BrowserGone()
        let console = self.console, opens = opensBrowser, name = self.name, timeout = try checkedTimeout() ?? 300
        let browser = self.browser
        let prompt = Self.pastePrompt(requiresAddress: requiresAddress, provider: provider)
        var preparation = TerminalPreparation(port: port ?? 0, timeout: timeout, requiresAddress: requiresAddress) {
            url in
            console.say("Open this URL to sign in:\n  \(url.absoluteString)")
            if opens { Self.openBrowser(url, with: browser, name: name, note: countdown.note) { gone.signal() } }
            if pasting {
                console.say(prompt) // no countdown: it would write over what the person types
            } else if console.redraws {
                countdown.start(
                    "Waiting for the browser to come back to 127.0.0.1 (Ctrl-C to cancel)",
                    until: Date().addingTimeInterval(timeout))
            } else {
                console.say("Waiting for the redirect on 127.0.0.1… (Ctrl-C to cancel)")
            }
        }
        let tell: @Sendable (String) -> Void = { countdown.note("\(name): \($0)") }
        if pasting {
            preparation.paste = (console.readLine, tell)
        } else if opens, paste == .whenNoBrowser, console.acceptsInput {
            // The paste prompt, offered only once no browser could start.
            preparation.paste = (
                {
                    // Nothing to read once the login is over (a browser started, or the redirect came).
                    guard gone.wait() else { return nil }
                    countdown.close() // for good: a countdown would write over what the person types
                    console.say("No browser could be started. " + prompt)
                    return console.readLine()
                }, tell
            )
        }
        defer {
            countdown.stop()
            gone.finish()
        }
        let method = TokenManager.LoginMethod.prepared(preparation)
        return try await gone.ending(opens && !pasting && !console.acceptsInput) { try await login(method) }
    }

    /// `timeout`, checked: a finite number of seconds from 0 to a year (a value read from an app's
    /// settings may be anything).
    ///
    /// - Throws: `OAuthError.invalidConfiguration` for any other value.
    func checkedTimeout() throws -> TimeInterval? {
        guard let timeout else { return nil }
        guard timeout.isFinite, timeout >= 0, timeout <= 366 * 86_400 else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "a sign-in's timeout is a number of seconds from 0 to a year, not \(timeout)")
        }
        return timeout
    }

    /// What a person pasting is asked for: the whole address when the provider names itself in it
    /// (RFC 9207 `iss`), else the address or only the code.
    static func pastePrompt(requiresAddress: Bool, provider: String?) -> String {
        guard requiresAddress else {
            return "If the browser is on another machine, sign in there, then paste the address it ends on "
                + "(http://127.0.0.1:…/callback?code=…; that page does not load there) or only the code, and press Enter:"
        }
        return "If the browser is on another machine, sign in there, then paste the whole address it ends on "
            + "(http://127.0.0.1:…/callback?code=…&iss=…; that page does not load there), and press Enter. "
            + "The whole address, not only the code: \(TerminalText.safe(provider ?? "the provider")) names itself "
            + "in it (RFC 9207 iss), and a code alone cannot prove which provider sent it:"
    }

    /// Opens `url` in the system browser, each command that did not open it noted on the console with
    /// the next step; `noneStarted` is called once every command failed (no browser will come back).
    static func openBrowser(
        _ url: URL, with setting: String?, name: String, note: @escaping @Sendable (String) -> Void,
        noneStarted: @escaping @Sendable () -> Void = {}
    ) {
        let failures = Mutex(0)
        let commands = Mutex(1)
        let browser = SystemBrowser(setting: setting) { problem in
            switch problem {
            case .cannotIsolate:
                note(
                    "\(name): not starting the browser (this C library cannot close \(name)'s descriptors in it); "
                        + "open the URL above by hand")
            case .cannotStart(let command):
                note("\(name): could not start the browser (\(command)); open the URL above by hand")
            case .failed(let command):
                note("\(name): the browser command (\(command)) failed; open the URL above by hand")
            }
            // SystemBrowser tries no further command after .cannotIsolate; after the others, the next one.
            let total = commands.withLock { $0 }
            let given = failures.withLock { count in
                count += 1
                return problem == .cannotIsolate || count == total
            }
            if given { noneStarted() }
        }
        commands.withLock { $0 = browser.commands.count }
        browser.open(url)
    }
}

/// The user agent of one `TerminalSignIn` browser login: the loopback listener, and the paste agent
/// around it when a pasted address is taken.
struct TerminalPreparation: UserAgentPreparation {
    let port: UInt16
    let timeout: TimeInterval
    let requiresAddress: Bool
    let open: @Sendable (URL) async throws -> Void
    /// How a pasted line is read and a refusal told, when one is taken.
    var paste: (readLine: @Sendable () -> String?, tell: @Sendable (String) -> Void)?

    init(
        port: UInt16, timeout: TimeInterval, requiresAddress: Bool, open: @escaping @Sendable (URL) async throws -> Void
    ) {
        self.port = port
        self.timeout = timeout
        self.requiresAddress = requiresAddress
        self.open = open
    }

    func prepare() async throws -> PreparedUserAgent {
        let (loopback, prepared) = try LoopbackPreparation(port: port, timeout: timeout, open: open).prepareLoopback()
        guard let paste else { return prepared }
        var wrapped = prepared
        wrapped.agent = PasteUserAgent(
            loopback: loopback, requiresAddress: requiresAddress, readLine: paste.readLine, tell: paste.tell)
        return wrapped
    }
}

/// Set once no browser command could start: no browser will bring the redirect. A terminal then
/// offers the paste prompt (`wait`); a login without one ends at once (`ending`). Once the login is over
/// (`finish`), a browser that fails late changes nothing, and a waiting prompt thread ends.
final class BrowserGone: Sendable {
    private enum State { case waiting, gone, finished }
    private let state = Mutex(State.waiting)
    private let settled = DispatchSemaphore(value: 0)
    private let events: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (events, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// No browser could start (called once); nothing after `finish`.
    func signal() {
        guard
            state.withLock({ state in
                guard state == .waiting else { return false }
                state = .gone
                return true
            })
        else { return }
        settled.signal()
        continuation.yield()
    }

    /// The login is over: `wait` returns `false` from now on.
    func finish() {
        guard
            state.withLock({ state in
                guard state == .waiting else { return false }
                state = .finished
                return true
            })
        else { return }
        settled.signal()
        continuation.finish()
    }

    /// Blocks the calling thread until no browser could start (`true`) or the login is over (`false`).
    func wait() -> Bool {
        settled.wait()
        settled.signal() // for any other waiter
        return state.withLock { $0 == .gone }
    }

    /// `body`, unless `ends` and no browser could start first: then `OAuthError.noBrowser` at once,
    /// rather than a wait for a redirect that cannot come.
    func ending<T: Sendable>(_ ends: Bool, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard ends else { return try await body() }
        let events = self.events
        return try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                for await _ in events {
                    throw OAuthError(
                        OAuthError.noBrowser,
                        "no browser could be started (see above), and no address can be pasted here")
                }
                throw CancellationError()
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
    }
}
