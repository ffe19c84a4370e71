#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth

extension TokenManager.LoginMethod {
    /// Authorization code + PKCE with a loopback redirect on 127.0.0.1 (RFC 8252): `open` shows
    /// the URL (opens a browser); the redirect comes back to a listener on `port` (0: a random
    /// one; providers that register the exact port need it fixed). The listener is bound when the
    /// login starts, one for each login.
    ///
    /// ```swift
    /// try await manager.login(with: .loopback { url in SystemBrowser().open(url) })
    /// ```
    ///
    /// - Parameters:
    ///   - port: the port to listen on; 0 (the default): a random free one.
    ///   - timeout: how long the user has, in seconds (default 300).
    ///   - open: shows the authorization URL to the user.
    /// - Returns: `.prepared(LoopbackPreparation(port:timeout:open:))`.
    public static func loopback(
        port: UInt16 = 0, timeout: TimeInterval = 300, open: @escaping @Sendable (URL) async throws -> Void
    ) -> Self {
        .prepared(LoopbackPreparation(port: port, timeout: timeout, open: open))
    }
}

/// A loopback login's user agent, made for each login (`TokenManager.LoginMethod.loopback(port:timeout:open:)`):
/// a `LoopbackUserAgent` listening on `port`, its redirect URI, and — on a random port — the port-less
/// URI registered first (RFC 8252 §7.3: a loopback redirect matches with any port; the exact one is
/// registered too, for servers that compare exactly, so a later login on another port registers again).
public struct LoopbackPreparation: UserAgentPreparation {
    /// The port listened on (0: a random free one).
    public let port: UInt16
    /// How long the user has, in seconds.
    public let timeout: TimeInterval
    /// Shows the authorization URL to the user.
    public let open: @Sendable (URL) async throws -> Void

    /// A preparation listening on `port` (0: a random one) for `timeout` seconds, showing the URL with `open`.
    public init(port: UInt16 = 0, timeout: TimeInterval = 300, open: @escaping @Sendable (URL) async throws -> Void) {
        self.port = port
        self.timeout = timeout
        self.open = open
    }

    /// Binds the listener.
    ///
    /// - Throws: `OAuthError.invalidConfiguration` when the port cannot be bound.
    public func prepare() async throws -> PreparedUserAgent { try prepareLoopback().prepared }

    /// Binds the listener: the agent itself (for an agent around it) and what `prepare()` returns.
    func prepareLoopback() throws -> (agent: LoopbackUserAgent, prepared: PreparedUserAgent) {
        let loopback = try LoopbackUserAgent(port: port, timeout: timeout, open: open)
        let redirectURI = loopback.redirectURI
        var registrationURIs = [redirectURI.absoluteString]
        if port == 0, var portless = URLComponents(url: redirectURI, resolvingAgainstBaseURL: false) {
            portless.port = nil
            if let text = portless.string { registrationURIs.insert(text, at: 0) }
        }
        return (
            loopback, PreparedUserAgent(agent: loopback, redirectURI: redirectURI, registrationURIs: registrationURIs)
        )
    }
}
