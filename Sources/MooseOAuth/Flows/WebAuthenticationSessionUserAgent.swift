#if canImport(AuthenticationServices) && (os(macOS) || os(iOS) || os(visionOS))
// Apple platforms with a web authentication session only (not tvOS or watchOS, where there is no
// presentation anchor); Linux has no AuthenticationServices, so this file compiles to nothing there.
// Written against Apple's documentation, never compiled (no Apple machine where it was written): see docs/apple.md.
public import AuthenticationServices
public import Foundation

/// An `ExternalUserAgent` for Apple apps: the authorization URL is shown in
/// `ASWebAuthenticationSession` (the system browser's sign-in sheet, sharing its cookies unless
/// `prefersEphemeralWebBrowserSession`), and the session hands back the redirect to `redirectURI`.
///
/// ```swift
/// let agent = WebAuthenticationSessionUserAgent(prefersEphemeralWebBrowserSession: true) { view.window ?? ASPresentationAnchor() }
/// let flow = AuthorizationCodeFlow(client: client, redirectURI: URL(string: "com.example.app:/oauth")!,
///                                  userAgent: agent, idTokens: validator)
/// ```
///
/// The redirect URI is either a private-use scheme (RFC 8252 §7.1, `com.example.app:/oauth`),
/// matched with `ASWebAuthenticationSession.Callback.customScheme(_:)`, or an `https` URL of a
/// domain the app claims (associated domains, `webcredentials:`), matched with
/// `.https(host:path:)` (RFC 8252 §7.2). A loopback `http` redirect is refused here: use
/// `LoopbackUserAgent` for that.
///
/// The user closing the sheet is `OAuthError.accessDenied`; cancelling the calling task cancels the
/// session and throws `CancellationError`.
///
/// API reference:
/// - https://developer.apple.com/documentation/authenticationservices/aswebauthenticationsession
/// - https://developer.apple.com/documentation/authenticationservices/aswebauthenticationsession/init(url:callback:completionhandler:)
/// - https://developer.apple.com/documentation/authenticationservices/aswebauthenticationsession/callback
/// - https://developer.apple.com/documentation/authenticationservices/aswebauthenticationsession/prefersephemeralwebbrowsersession
/// - https://developer.apple.com/documentation/authenticationservices/aswebauthenticationpresentationcontextproviding
/// - https://developer.apple.com/documentation/authenticationservices/aswebauthenticationsessionerror/code/canceledlogin
@available(macOS 14.4, iOS 17.4, macCatalyst 17.4, visionOS 1.1, *)
public struct WebAuthenticationSessionUserAgent: ExternalUserAgent {
    /// Asks the browser not to share cookies or other browsing data with the user's normal browser
    /// session (no single sign-on with it, nothing left behind): `prefersEphemeralWebBrowserSession`.
    public let prefersEphemeralWebBrowserSession: Bool
    /// The window the sheet is presented over, asked for on the main actor when the session starts
    /// (the session's `presentationContextProvider` answers with it).
    public let presentationAnchor: @MainActor @Sendable () -> ASPresentationAnchor

    /// A user agent presenting over the window `presentationAnchor` returns.
    public init(
        prefersEphemeralWebBrowserSession: Bool = false,
        presentationAnchor: @escaping @MainActor @Sendable () -> ASPresentationAnchor
    ) {
        self.prefersEphemeralWebBrowserSession = prefersEphemeralWebBrowserSession
        self.presentationAnchor = presentationAnchor
    }

    /// Shows `url` in a web authentication session and returns the URL it was redirected to
    /// (`redirectURI` with `code` and `state`, or `error`); the flow checks it.
    public func authorize(url: URL, redirectURI: URL) async throws -> URL {
        try await Self.run(
            url: url, redirectURI: redirectURI, ephemeral: prefersEphemeralWebBrowserSession, anchor: presentationAnchor
        )
    }

    @MainActor
    private static func run(
        url: URL, redirectURI: URL, ephemeral: Bool,
        anchor: @MainActor @Sendable () -> ASPresentationAnchor
    ) async throws -> URL {
        let callback = try callback(for: redirectURI)
        let login = Login(provider: AnchorProvider(anchor: anchor()))
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<URL, any Error>) in
                login.continuation = continuation
                // Called when the redirect arrives or the user closes the sheet; on which thread the
                // documentation does not say, so the outcome goes through the main actor.
                let session = ASWebAuthenticationSession(url: url, callback: callback) { @Sendable callbackURL, error in
                    let result = Self.outcome(callbackURL, error)
                    Task { @MainActor in login.finish(result) }
                }
                session.prefersEphemeralWebBrowserSession = ephemeral
                session.presentationContextProvider = login.provider // held weakly by the session: `login` keeps it
                login.session = session
                guard !login.cancelled, !Task.isCancelled else {
                    login.finish(.failure(CancellationError()))
                    return
                }
                guard session.start() else {
                    login.finish(
                        .failure(
                            OAuthError(
                                OAuthError.invalidConfiguration,
                                "ASWebAuthenticationSession did not start (no presentation anchor, or another session is showing)"
                            )))
                    return
                }
            }
        } onCancel: {
            Task { @MainActor in login.cancel() }
        }
    }

    /// What the session matches the redirect with.
    @MainActor
    private static func callback(for redirectURI: URL) throws -> ASWebAuthenticationSession.Callback {
        guard let scheme = redirectURI.scheme?.lowercased(), !scheme.isEmpty else {
            throw OAuthError(
                OAuthError.invalidConfiguration, "the redirect URI \(redirectURI.absoluteString) has no scheme")
        }
        switch scheme {
        case "https":
            guard let host = redirectURI.host, !host.isEmpty else {
                throw OAuthError(
                    OAuthError.invalidConfiguration, "the redirect URI \(redirectURI.absoluteString) has no host")
            }
            return .https(host: host, path: redirectURI.path.isEmpty ? "/" : redirectURI.path)
        case "http":
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "ASWebAuthenticationSession cannot receive the http redirect \(redirectURI.absoluteString): "
                    + "use a private-use scheme or a claimed https URL, or LoopbackUserAgent")
        default:
            return .customScheme(scheme)
        }
    }

    /// The completion handler's arguments as a result.
    private static func outcome(_ callbackURL: URL?, _ error: (any Error)?) -> Result<URL, any Error> {
        if let error {
            if let sessionError = error as? ASWebAuthenticationSessionError, sessionError.code == .canceledLogin {
                return .failure(
                    OAuthError(
                        OAuthError.accessDenied, "the sign-in was cancelled in the browser sheet",
                        underlying: sessionError))
            }
            return .failure(
                OAuthError(
                    OAuthError.invalidConfiguration, "ASWebAuthenticationSession failed: \(error.localizedDescription)",
                    underlying: error))
        }
        guard let callbackURL else {
            return .failure(
                OAuthError(
                    OAuthError.invalidResponse, "ASWebAuthenticationSession ended with neither a redirect nor an error")
            )
        }
        return .success(callbackURL)
    }
}

/// One login's session, its presentation provider and continuation, on the main actor: resumed once,
/// by the completion handler, a failed start, or cancellation, whichever comes first.
@available(macOS 14.4, iOS 17.4, macCatalyst 17.4, visionOS 1.1, *)
@MainActor
private final class Login {
    let provider: AnchorProvider
    var session: ASWebAuthenticationSession?
    var continuation: CheckedContinuation<URL, any Error>?
    private(set) var cancelled = false

    init(provider: AnchorProvider) { self.provider = provider }

    func finish(_ outcome: Result<URL, any Error>) {
        session = nil
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(with: outcome)
    }

    /// Dismisses the sheet (if it is showing) and ends the login with `CancellationError`.
    func cancel() {
        cancelled = true
        session?.cancel()
        finish(.failure(CancellationError()))
    }
}

/// Answers the session's request for a window with the one the caller gave.
@available(macOS 14.4, iOS 17.4, macCatalyst 17.4, visionOS 1.1, *)
@MainActor
private final class AnchorProvider: NSObject, ASWebAuthenticationPresentationContextProviding {
    let anchor: ASPresentationAnchor

    init(anchor: ASPresentationAnchor) { self.anchor = anchor }

    /// The session asks on the main thread; `assumeIsolated` checks that it does.
    nonisolated func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor {
        MainActor.assumeIsolated { anchor }
    }
}
#endif
