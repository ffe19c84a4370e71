#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A browser login's user agent that is made anew for each login, and knows its redirect URI only
/// once it is made: a loopback listener binds its port first (RFC 8252 §7.3), and only then can the
/// login name `http://127.0.0.1:PORT/callback` — to the provider, and to a dynamic registration.
///
/// `TokenManager.LoginMethod.prepared(_:)` carries one; the login calls `prepare()` when it is about
/// to send the user to the provider (after discovery, before any registration). MooseOAuth itself
/// opens no socket: the loopback preparation is MooseOAuthSystem's (`LoginMethod.loopback(port:timeout:open:)`).
///
/// ```swift
/// struct InAppLogin: UserAgentPreparation {
///     func prepare() async throws -> PreparedUserAgent {
///         let redirect = URL(string: "com.example.app:/oauth")!
///         return PreparedUserAgent(agent: MyBrowserSheet(), redirectURI: redirect)
///     }
/// }
/// try await manager.login(with: .prepared(InAppLogin()))
/// ```
public protocol UserAgentPreparation: Sendable {
    /// Makes the user agent for one login (binding what it listens on, if anything).
    ///
    /// - Returns: the agent, the redirect URI the login sends, and the URIs a registration registers.
    /// - Throws: what makes the agent impossible (a port that cannot be bound: `OAuthError.invalidConfiguration`).
    func prepare() async throws -> PreparedUserAgent
}

/// One login's user agent, ready: what `UserAgentPreparation.prepare()` made.
public struct PreparedUserAgent: Sendable {
    /// The agent that shows the authorization URL and brings the redirect back.
    public var agent: any ExternalUserAgent
    /// The redirect URI this login sends (and the agent listens on).
    public var redirectURI: URL
    /// The redirect URIs a dynamic client registration registers for this agent (RFC 7591
    /// `redirect_uris`), in order: a loopback listener on a random port also registers the port-less
    /// URI (RFC 8252 §7.3) first.
    public var registrationURIs: [String]

    /// An agent ready for one login.
    ///
    /// - Parameters:
    ///   - agent: the user agent.
    ///   - redirectURI: the redirect URI the login sends.
    ///   - registrationURIs: what a registration registers; `nil` (the default): `redirectURI` alone.
    public init(agent: any ExternalUserAgent, redirectURI: URL, registrationURIs: [String]? = nil) {
        self.agent = agent
        self.redirectURI = redirectURI
        self.registrationURIs = registrationURIs ?? [redirectURI.absoluteString]
    }
}
