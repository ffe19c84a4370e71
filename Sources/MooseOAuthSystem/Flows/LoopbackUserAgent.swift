#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth
import MooseHTTP
import MooseCrypto
import MooseJWT

/// A loopback user agent for native apps and CLIs (RFC 8252): listens on 127.0.0.1, hands the
/// authorization URL to `open` (a browser launcher, or a printer), and waits for the redirect.
public struct LoopbackUserAgent: ExternalUserAgent {
    /// Called with the URL the user must visit (open a browser, print it…).
    public let open: @Sendable (URL) async throws -> Void
    /// How long the user has.
    public let timeout: TimeInterval
    let receiver: LoopbackReceiver

    /// A user agent listening on `port` (0: random).
    public init(port: UInt16 = 0, timeout: TimeInterval = 300, open: @escaping @Sendable (URL) async throws -> Void)
        throws
    {
        receiver = try LoopbackReceiver(port: port)
        self.timeout = timeout
        self.open = open
    }

    /// The redirect URI to register and send: `http://127.0.0.1:<port>/callback`.
    public var redirectURI: URL { receiver.redirectURI }

    /// Waits for a redirect carrying the `state` of `url`'s query (if it has one).
    public func authorize(url: URL, redirectURI: URL) async throws -> URL {
        let state = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "state" }?
            .value
        return try await wait(url: url, expectedState: state)
    }

    /// Waits for the redirect carrying `expectedState`; any other request to the listener is
    /// answered with an error page and ignored, until the timeout.
    public func authorize(url: URL, redirectURI: URL, expectedState: String) async throws -> URL {
        try await wait(url: url, expectedState: expectedState)
    }

    /// Answers the browser's tab with how the login ended (see `LoopbackReceiver.finish`).
    public func loginFinished(_ failure: OAuthError?) async { receiver.finish(failure) }

    private func wait(url: URL, expectedState: String?) async throws -> URL {
        defer { receiver.close() }
        let receiver = self.receiver, timeout = self.timeout, open = self.open
        // The listener is bound before `open` runs: a browser that comes back before `open` returns
        // is queued. The browser that brings the code waits for `loginFinished` (the outcome of the
        // code exchange), so the callback is returned as soon as it arrives, and `open` is cancelled
        // then but never awaited: an `open` that returns only once its browser has the page (a
        // scripted browser run to the end) would otherwise hold the login until that page came from
        // `outcomeWait`'s fallback or the browser gave up — a task group awaits every child, even a
        // cancelled one, which is what this did before (15 s per login at Glewlwyd). An `open` that
        // fails before the callback arrives fails the login with its error.
        let failed = ThreadLocked<(any Error)?>(nil)
        let waiting = Task {
            try await receiver.waitForCallback(timeout: timeout, expectedState: expectedState, holdingForOutcome: true)
        }
        let opening = Task {
            do {
                try await open(url)
            } catch {
                failed.withLock { $0 = error }
                waiting.cancel()
            }
        }
        do {
            let callback = try await withTaskCancellationHandler {
                try await waiting.value
            } onCancel: {
                waiting.cancel()
                opening.cancel()
            }
            opening.cancel()
            return callback
        } catch {
            // `open`'s own failure, read before it is cancelled (a cancelled `open` may fail too).
            let failure = failed.withLock { $0 }
            opening.cancel()
            throw failure ?? error
        }
    }
}
