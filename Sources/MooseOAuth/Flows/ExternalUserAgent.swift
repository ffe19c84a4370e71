#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP

/// How the authorization URL reaches the user and the redirect comes back.
///
/// The CLI opens a browser (or prints the URL) and receives the redirect on a loopback port; an
/// Apple app would wrap `ASWebAuthenticationSession`; tests drive the provider's login form headlessly.
public protocol ExternalUserAgent: Sendable {
    /// Shows `url` to the user and returns the redirect URL (with `code`/`state` or `error`) that
    /// came back to `redirectURI`.
    func authorize(url: URL, redirectURI: URL) async throws -> URL

    /// Like `authorize(url:redirectURI:)`, knowing the `state` the flow sent: an agent that can see
    /// several redirects (a loopback listener any local process can reach) ignores every one whose
    /// `state` differs and keeps waiting. The default calls `authorize(url:redirectURI:)`.
    func authorize(url: URL, redirectURI: URL, expectedState: String) async throws -> URL

    /// Told by the flow how the login ended after the redirect came back: `nil` when it is signed
    /// in, else why not (the provider refused the code exchange, the ID token did not validate). An
    /// agent that still shows the user a page (the loopback listener) says so there. The default
    /// does nothing.
    func loginFinished(_ failure: OAuthError?) async
}

extension ExternalUserAgent {
    /// Does nothing.
    public func loginFinished(_ failure: OAuthError?) async {}

    /// Calls `authorize(url:redirectURI:)`; the flow checks the `state` of what comes back.
    public func authorize(url: URL, redirectURI: URL, expectedState: String) async throws -> URL {
        try await authorize(url: url, redirectURI: redirectURI)
    }
}
