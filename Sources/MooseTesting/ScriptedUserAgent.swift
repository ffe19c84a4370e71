#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth
import Synchronization

/// An `ExternalUserAgent` for tests: instead of a browser, a closure decides what comes back to the
/// redirect URI — a code with the request's `state`, a provider error, or a forged redirect.
///
/// ```swift
/// let agent = ScriptedUserAgent.approving(code: "test-code")        // code + the request's state
/// let denied = ScriptedUserAgent { _, redirect, state in
///     URL(string: "\(redirect)?error=access_denied&state=\(state)")!
/// }
/// ```
public final class ScriptedUserAgent: ExternalUserAgent, Sendable {
    private let respond: @Sendable (_ authorizationURL: URL, _ redirectURI: URL, _ state: String) async throws -> URL
    private let seen = Mutex<[URL]>([])

    /// An agent whose redirect is whatever `respond` returns for the authorization URL, the
    /// redirect URI and the `state` the flow sent.
    public init(
        _ respond:
            @escaping @Sendable (_ authorizationURL: URL, _ redirectURI: URL, _ state: String) async throws -> URL
    ) {
        self.respond = respond
    }

    /// An agent that approves at once: `redirectURI?code=<code>&state=<state>`.
    public static func approving(code: String) -> ScriptedUserAgent {
        ScriptedUserAgent { _, redirect, state in
            var components = URLComponents(url: redirect, resolvingAgainstBaseURL: false) ?? URLComponents()
            components.queryItems = [URLQueryItem(name: "code", value: code), URLQueryItem(name: "state", value: state)]
            return components.url ?? redirect
        }
    }

    /// Every authorization URL shown so far.
    public var authorizationURLs: [URL] { seen.withLock { $0 } }

    public func authorize(url: URL, redirectURI: URL) async throws -> URL {
        let state =
            URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "state" }?.value
            ?? ""
        return try await authorize(url: url, redirectURI: redirectURI, expectedState: state)
    }

    public func authorize(url: URL, redirectURI: URL, expectedState: String) async throws -> URL {
        seen.withLock { $0.append(url) }
        return try await respond(url, redirectURI, expectedState)
    }
}
