/// What an app does about an error: every `OAuthError.Code` belongs to one class, so a UI or a job
/// switches on four cases instead of thirty codes (docs/library.md, "Errors", lists each code).
///
/// ```swift
/// do { token = try await moose.accessToken() }
/// catch let error as OAuthError {
///     switch error.errorClass {
///     case .retryable: scheduleRetry()             // the network, the provider, the store: try later
///     case .needsLogin: showSignIn()                // only a person logging in again helps
///     case .misconfigured: report(error)            // the client, the issuer, a key, a secret: fix it
///     case .protocolViolation: report(error)        // the other side answered something unsafe or wrong
///     }
/// }
/// ```
extension OAuthError {
    /// The four things an app can do about an error.
    public enum Class: String, Sendable, CaseIterable {
        /// Try the same call again later (with backoff): the network, a provider's 5xx or 429, a
        /// busy or unavailable store, a refused renewal of a session that needs no person.
        case retryable
        /// Only a new login helps (a person must act): the refresh token was refused, there is no
        /// session, the session's row is damaged, consent was denied, more scope is needed.
        case needsLogin
        /// The configuration is wrong and retrying will not help: the client's credentials, its id,
        /// the issuer, an endpoint, a CA or pin, a plan's reference, an unsupported feature.
        case misconfigured
        /// The other side answered something Moose refuses (malformed, unsafe, or failing a security
        /// check: a state or issuer mismatch, a bad ID token). Not retried; worth reporting.
        case protocolViolation
    }

    /// Every code this version of Moose defines, for docs and exhaustive checks.
    public static let allCodes: [Code] = [
        discovery, issuerMismatch, missingEndpoint, invalidGrant, invalidClient, server, invalidResponse, transient,
        tls,
        workloadIdentity, accessDenied, stateMismatch, invalidIDToken, expiredToken, timedOut, invalidConfiguration,
        subjectMismatch, needsLogin, storeUnavailable, renewalRefused, sessionDamaged, insecureEndpoint, unsafeValue,
        issuerMismatchInResponse, storageConflict, leaseLost, leaseBusy, pkceNotSupported, registration, refreshLimit,
        offline, insufficientScope, tokenRejected, pasteRefused, noBrowser, fileSystem
    ]

    /// The class of `code` (an unknown code — an app's own — is `misconfigured`).
    public static func errorClass(of code: Code) -> Class {
        switch code {
        case transient, offline, storeUnavailable, storageConflict, leaseLost, leaseBusy, renewalRefused,
            refreshLimit,
            tokenRejected:
            .retryable
        // A login nobody finished (`timedOut`): the person acts again — or the provider refused the redirect
        // URI in the browser, which no retry mends.
        case invalidGrant, needsLogin, sessionDamaged, accessDenied, expiredToken, insufficientScope, pasteRefused,
            timedOut, noBrowser:
            .needsLogin
        case invalidResponse, unsafeValue, stateMismatch, invalidIDToken, subjectMismatch, issuerMismatchInResponse:
            .protocolViolation
        default:
            .misconfigured
        }
    }

    /// What an app does about this error (`OAuthError.Class`).
    public var errorClass: Class { Self.errorClass(of: code) }
}
