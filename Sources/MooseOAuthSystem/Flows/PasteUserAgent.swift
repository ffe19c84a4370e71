#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth
import Dispatch
import MooseHTTP
import Synchronization

/// A code-flow login for a shell on another machine than the browser (ssh, a container, a cloud
/// shell): `moose login --paste`, and any app's. The URL is shown; the person signs in wherever their
/// browser is, and pastes back the address the browser ends on (it does not load there:
/// `http://127.0.0.1:PORT/callback?code=…&state=…`), or only the code. The loopback listener keeps
/// waiting as well: a browser on this machine still comes back by itself, whichever is first wins.
///
/// A pasted address must be this login's redirect URI (scheme, host, port and path, byte for byte)
/// and carry this login's `state`; the flow then checks the rest as for any redirect (RFC 9207 `iss`,
/// the code exchange with PKCE). A bare code gets this login's `state` attached — the person pasted
/// it into this login — and nothing else. At a provider that promises `iss` in every authorization
/// response (`authorization_response_iss_parameter_supported`, RFC 9207 §3) only the whole address
/// will do: a code alone cannot prove which provider sent it, so it is refused (and so is an address
/// with a code but no `iss`: a copy cut short). Anything refused is told (`tell`) with the reason, and
/// the person may paste again, `maximumTries` times in all; then the login fails with
/// `OAuthError.pasteRefused`. An empty line (a bare Enter) is not a try: the person is asked again.
///
/// ```swift
/// let loopback = try LoopbackUserAgent(open: { url in print("Open: \(url)") })
/// let agent = PasteUserAgent(loopback: loopback) { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
/// let tokens = try await AuthorizationCodeFlow(
///     client: client, redirectURI: loopback.redirectURI, userAgent: agent, idTokens: validator
/// ).authorize(AuthorizationParameters(scopes: ["openid"]))
/// ```
public struct PasteUserAgent: ExternalUserAgent {
    /// The listener that still takes a redirect from a browser on this machine.
    public let loopback: LoopbackUserAgent
    /// Whether the provider promises RFC 9207 `iss` (then only the whole address is taken).
    public let requiresAddress: Bool
    /// Reads one line the person typed (`nil` at end of input). Blocking: called on a thread of its
    /// own, which stays in it when the login ends first (the loopback redirect won, or the task was
    /// cancelled) — the next line typed then goes to this closure, not to the app: give a `readLine`
    /// of the app's own where it reads the same input later.
    public let readLine: @Sendable () -> String?
    /// Told what to say to the person: why a line was refused and what to paste again (plain text,
    /// pasted text never echoed in full).
    public let tell: @Sendable (String) -> Void
    /// How many pasted lines are read before the login gives up.
    public static let maximumTries = 5
    /// How many empty lines are asked again without using up a try.
    public static let maximumBlankLines = 20

    /// An agent that takes a pasted redirect as well as `loopback`'s.
    ///
    /// - Parameters:
    ///   - loopback: the login's loopback listener (its `redirectURI` is the one pasted addresses must match).
    ///   - requiresAddress: `true` when the provider metadata has `authorization_response_iss_parameter_supported`.
    ///   - readLine: reads one typed line; default: standard input.
    ///   - tell: shows one line to the person (a terminal's standard error).
    public init(
        loopback: LoopbackUserAgent, requiresAddress: Bool = false,
        readLine: @escaping @Sendable () -> String? = { Swift.readLine(strippingNewline: true) },
        tell: @escaping @Sendable (String) -> Void
    ) {
        self.loopback = loopback
        self.requiresAddress = requiresAddress
        self.readLine = readLine
        self.tell = tell
    }

    /// Waits for the pasted redirect or the loopback one, whichever comes first.
    public func authorize(url: URL, redirectURI: URL) async throws -> URL {
        let state = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "state" }?
            .value
        return try await authorize(url: url, redirectURI: redirectURI, expectedState: state ?? "")
    }

    /// Waits for a pasted line carrying `expectedState` (or the loopback's redirect), whichever comes first.
    public func authorize(url: URL, redirectURI: URL, expectedState: String) async throws -> URL {
        let loopback = self.loopback, readLine = self.readLine, requiresAddress = self.requiresAddress, tell = tell
        return try await withThrowingTaskGroup(of: URL.self) { group in
            group.addTask {
                try await loopback.authorize(url: url, redirectURI: redirectURI, expectedState: expectedState)
            }
            group.addTask {
                try await Self.pasted(
                    redirectURI: redirectURI, expectedState: expectedState, requiresAddress: requiresAddress,
                    readLine: readLine, tell: tell)
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
    }

    /// Tells the loopback listener (its page, if a browser here came back).
    public func loginFinished(_ failure: OAuthError?) async { await loopback.loginFinished(failure) }

    /// Reads lines until one is a usable redirect, at most `maximumTries`; then `pasteRefused`. At end
    /// of input (nothing more will be typed) it waits for cancellation: the loopback listener may still
    /// bring the redirect.
    static func pasted(
        redirectURI: URL, expectedState: String, requiresAddress: Bool = false,
        readLine: @escaping @Sendable () -> String?, tell: @escaping @Sendable (String) -> Void
    ) async throws -> URL {
        var refused = 0
        var blank = 0
        let what = requiresAddress ? "the whole address" : "the whole address (or only the code)"
        while true {
            guard let line = try await nextLine(readLine) else {
                try await Task.sleep(nanoseconds: UInt64(86_400) * 1_000_000_000)
                throw CancellationError()
            }
            // A bare Enter uses up no try: the person is asked again (bounded, so that a stream of
            // empty lines cannot keep the prompt going forever).
            if line.trimmingASCIIWhitespace().isEmpty, blank < maximumBlankLines {
                blank += 1
                tell("nothing was pasted; paste \(what) and press Enter")
                continue
            }
            switch PastedRedirect.parse(
                line, redirectURI: redirectURI, expectedState: expectedState, requiresAddress: requiresAddress)
            {
            case .success(let url):
                return url
            case .failure(let refusal):
                refused += 1
                let left = maximumTries - refused
                guard left > 0 else {
                    throw OAuthError(
                        OAuthError.pasteRefused,
                        "\(refusal.message); \(maximumTries) pasted lines were refused, so the login stopped")
                }
                tell("\(refusal.message); paste \(what) again (\(left) \(left == 1 ? "try" : "tries") left)")
            }
        }
    }

    /// One line from `readLine`, read on a Dispatch thread; cancellation returns at once (the thread
    /// stays in `read` until the process ends: a CLI's last moments).
    static func nextLine(_ readLine: @escaping @Sendable () -> String?) async throws -> String? {
        let slot = Mutex<CheckedContinuation<String?, any Error>?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                slot.withLock { $0 = continuation }
                if Task.isCancelled, let pending = slot.withLock({ $0.take() }) {
                    pending.resume(throwing: CancellationError())
                }
                DispatchQueue.global().async {
                    let line = readLine()
                    slot.withLock { $0.take() }?.resume(returning: line)
                }
            }
        } onCancel: {
            slot.withLock { $0.take() }?.resume(throwing: CancellationError())
        }
    }
}

/// A line pasted into a `PasteUserAgent` login (`moose login --paste`), checked. Total over any text
/// (fuzzed: `tools/fuzz`'s `paste`).
public enum PastedRedirect {
    /// Why a pasted line was refused.
    public struct Refusal: Error, Equatable {
        /// The reason, for the person (never the pasted text in full).
        public let message: String
    }

    /// The redirect URL a pasted line stands for, or why it is refused. With `requiresAddress` (the
    /// provider promises RFC 9207 `iss`), a bare code and an address with a code but no `iss` are
    /// refused: the flow could not use them.
    ///
    /// - Parameters:
    ///   - line: what was pasted (surrounding ASCII whitespace ignored).
    ///   - redirectURI: this login's redirect URI.
    ///   - expectedState: this login's `state`.
    ///   - requiresAddress: the provider promises RFC 9207 `iss`.
    /// - Returns: the redirect URL to hand the flow, or the refusal.
    public static func parse(_ line: String, redirectURI: URL, expectedState: String, requiresAddress: Bool = false)
        -> Result<URL, Refusal>
    {
        let text = line.trimmingASCIIWhitespace()
        guard !text.isEmpty else { return .failure(Refusal(message: "nothing was pasted")) }
        guard text.utf8.count <= 8192, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return .failure(
                Refusal(
                    message: "that is not an address or a code (spaces, control or non-ASCII characters, or over 8 KiB)"
                ))
        }
        let lowered = text.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else {
            guard !requiresAddress else {
                return .failure(
                    Refusal(
                        message:
                            "that is not an address (only a code?): this provider names itself in the address (RFC 9207 iss) "
                            + "and a code alone cannot prove which provider sent it; copy the whole address from the address bar"
                    ))
            }
            // A bare code: this login's redirect with this login's state.
            var components = URLComponents(url: redirectURI, resolvingAgainstBaseURL: false)
            components?.queryItems = [
                URLQueryItem(name: "code", value: text), URLQueryItem(name: "state", value: expectedState)
            ]
            guard let url = components?.url else { return .failure(Refusal(message: "that code cannot be used")) }
            return .success(url)
        }
        guard let pasted = URLComponents(string: text),
            let expected = URLComponents(url: redirectURI, resolvingAgainstBaseURL: false)
        else {
            return .failure(Refusal(message: "that is not a valid address"))
        }
        func same(_ a: String?, _ b: String?) -> Bool { (a ?? "").utf8.elementsEqual((b ?? "").utf8) }
        guard same(pasted.scheme?.lowercased(), expected.scheme), same(pasted.host?.lowercased(), expected.host),
            pasted.port == expected.port, same(pasted.percentEncodedPath, expected.percentEncodedPath)
        else {
            return .failure(
                Refusal(message: "that address is not this login's redirect (\(redirectURI.absoluteString)…)"))
        }
        let items = pasted.queryItems ?? []
        guard items.contains(where: { $0.name == "code" || $0.name == "error" }) else {
            return .failure(
                Refusal(message: "that address has no code (copy it from the address bar after signing in)"))
        }
        guard let state = items.first(where: { $0.name == "state" })?.value,
            state.utf8.elementsEqual(expectedState.utf8)
        else {
            return .failure(Refusal(message: "that address belongs to another login (its state is not this one's)"))
        }
        if requiresAddress, items.contains(where: { $0.name == "code" }), !items.contains(where: { $0.name == "iss" }) {
            return .failure(
                Refusal(
                    message:
                        "that address has no iss (the provider's name, RFC 9207), which this provider always sends: "
                        + "was it cut short? Copy the whole address from the address bar"))
        }
        guard let url = pasted.url else { return .failure(Refusal(message: "that is not a valid address")) }
        return .success(url)
    }
}
