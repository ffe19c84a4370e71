#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseHTTP

/// The one error type of `MooseOAuth`.
///
/// When the authorization server sent an OAuth error (RFC 6749 §5.2), `oauthError`,
/// `errorDescription` and `errorURI` hold it; `code` says what it means for the caller. Messages never
/// contain tokens, codes or secrets.
///
/// ```swift
/// do { tokens = try await flow.refresh(tokens) }
/// catch OAuthError.invalidGrant { … the session needs a new login … }
/// ```
public struct OAuthError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The code's name.
        public var description: String { name }

        /// Lets a `catch` clause match on a code: `catch OAuthError.invalidGrant`.
        public static func ~= (code: Self, error: any Error) -> Bool { (error as? OAuthError)?.code == code }
    }

    /// What kind of failure this is.
    public let code: Code
    /// A human-readable explanation, free of secrets.
    public let message: String
    /// The `error` the server sent, if any (`invalid_grant`…).
    public let oauthError: String?
    /// The server's `error_description`, if any.
    public let errorDescription: String?
    /// The server's `error_uri`, if any.
    public let errorURI: String?
    /// The HTTP status of the response that carried the error, if any.
    public let status: Int?
    /// The underlying cause, if any (a transport error, a JWT validation error…).
    public let underlying: (any Error & Sendable)?
    /// The `scope` a resource server's challenge named (RFC 6750 §3): for `insufficientScope`, the
    /// scope the request needs, space-separated as sent (`requiredScopes` splits it).
    public let scope: String?

    /// The `WWW-Authenticate` challenges (RFC 9110 §11.6.1, parsed) of the response that caused the
    /// error — for `tokenRejected` (with `status`), what the resource server said about the token
    /// (`error="invalid_token"`, `resource_metadata`, a DPoP `algs`…); empty when there were none.
    public let challenges: [AuthenticationChallenge]

    /// The scopes in `scope`, split on spaces (empty when the server named none).
    public var requiredScopes: [String] { (scope ?? "").split(separator: " ").map(String.init) }

    /// An error; storages and user agents of an app's own throw these too (for example
    /// `OAuthError(OAuthError.storageConflict, "…")`, as the storage contract asks).
    public init(
        _ code: Code, _ message: String, oauthError: String? = nil, errorDescription: String? = nil,
        errorURI: String? = nil, status: Int? = nil, underlying: (any Error & Sendable)? = nil, scope: String? = nil,
        challenges: [AuthenticationChallenge] = []
    ) {
        self.code = code
        self.message = message
        self.oauthError = oauthError
        self.errorDescription = errorDescription
        self.errorURI = errorURI
        self.status = status
        self.underlying = underlying
        self.scope = scope
        self.challenges = challenges
    }

    /// `code: message (error: description)`
    public var description: String {
        var text = "\(code): \(message)"
        if let oauthError { text += " (\(oauthError)\(errorDescription.map { ": \($0)" } ?? ""))" }
        return text
    }

    /// Discovery failed, or the document is unusable.
    public static let discovery = Code(name: "discovery")
    /// The discovery document names another issuer than the one asked for (OIDC Discovery §4.3).
    public static let issuerMismatch = Code(name: "issuerMismatch")
    /// An endpoint the operation needs is neither discovered nor configured.
    public static let missingEndpoint = Code(name: "missingEndpoint")
    /// `invalid_grant`: the code, refresh token or device code is no longer valid. Final: log in again.
    public static let invalidGrant = Code(name: "invalidGrant")
    /// `invalid_client` / `unauthorized_client`: the client's credentials or registration are wrong. Final.
    public static let invalidClient = Code(name: "invalidClient")
    /// Another OAuth error answer (`invalid_request`, `invalid_scope`, `unsupported_grant_type`…).
    public static let server = Code(name: "server")
    /// The token endpoint answered with something that is not a token response (HTML, garbage…).
    public static let invalidResponse = Code(name: "invalidResponse")
    /// The server could not be reached, timed out, or answered 5xx/429: worth retrying later.
    public static let transient = Code(name: "transient")
    /// The TLS handshake with the server failed or its certificate is not trusted (a private CA, an
    /// expired certificate, another host's name). Not transient: retrying does not help; trusting the
    /// right CA (the transport's CA file, `SSL_CERT_FILE`) or fixing the certificate does.
    public static let tls = Code(name: "tls")
    /// The workload's own identity token could not be had from its platform (a CI system's token
    /// endpoint, a projected token file, a command): the platform's side, not the provider's. The
    /// message says which source and what to check (GitHub Actions: `permissions: id-token: write`).
    public static let workloadIdentity = Code(name: "workloadIdentity")
    /// The user (or the server) refused the authorization (`access_denied`).
    public static let accessDenied = Code(name: "accessDenied")
    /// The redirect's `state` does not match the request's: possible CSRF. Nothing was exchanged.
    public static let stateMismatch = Code(name: "stateMismatch")
    /// The ID token failed validation (OIDC Core 3.1.3.7); `underlying` has the specific `JWTError`.
    public static let invalidIDToken = Code(name: "invalidIDToken")
    /// The device code expired before the user approved (`expired_token`).
    public static let expiredToken = Code(name: "expiredToken")
    /// The user did not finish in time (loopback redirect, device flow).
    public static let timedOut = Code(name: "timedOut")
    /// The person pasted `PasteUserAgent.maximumTries` lines, none of them this login's redirect or code.
    public static let pasteRefused = Code(name: "pasteRefused")
    /// No browser could be started for a login and there is no terminal to paste the address into:
    /// nothing can bring the redirect, so the login ended at once (MooseOAuthSystem's `TerminalSignIn`).
    public static let noBrowser = Code(name: "noBrowser")
    /// A configuration or argument problem on the client side.
    public static let invalidConfiguration = Code(name: "invalidConfiguration")
    /// A local file of the app's own (a config file being written) cannot be written for a reason of
    /// the system, not of what it says: permissions, a missing or read-only folder, a full disk, a name
    /// too long. `message` names the file and the system's reason; the file is left as it was. Not a
    /// mistake in the configuration: mend the file system (or the path), not the settings.
    public static let fileSystem = Code(name: "fileSystem")
    /// The UserInfo `sub` is not the ID token's `sub` (OIDC Core 5.3.2).
    public static let subjectMismatch = Code(name: "subjectMismatch")
    /// The session needs a new login (no session, or its refresh token was refused). Final.
    public static let needsLogin = Code(name: "needsLogin")
    /// The secret store cannot be written: no refresh token was spent.
    public static let storeUnavailable = Code(name: "storeUnavailable")
    /// The provider refused the renewal of a session that needs no person (`OAuthSession.renewsWithoutAPerson`:
    /// a workload's fresh identity token or assertion, a client-credentials grant) with `invalid_grant`.
    /// An error of that attempt, not the end of the session: it stays active and the next call asks the
    /// token source again (within the coordinator's loop guard). `oauthError` and `errorDescription`
    /// carry the provider's words; `underlying` the original error.
    public static let renewalRefused = Code(name: "renewalRefused")
    /// The stored session under this key cannot be opened: its sealed bytes do not authenticate, or
    /// they do not decode as a session (bit rot, a torn copy, a row sealed under another key). The
    /// storage itself works and every other session is unaffected. Nothing was sent to the provider
    /// and nothing was changed. Not retryable: a new login replaces the row (`login` / `replace`), a
    /// logout removes it (`logout` / `delete` always can); the session's tokens are lost either way.
    public static let sessionDamaged = Code(name: "sessionDamaged")
    /// An endpoint or issuer is plain `http` to another machine: codes and tokens would travel in clear text.
    public static let insecureEndpoint = Code(name: "insecureEndpoint")
    /// Something from outside (a token, a token type, a header value) is not safe to use where it
    /// would go: characters outside RFC 6750's `b64token`, or control characters.
    public static let unsafeValue = Code(name: "unsafeValue")
    /// The authorization response's `iss` (RFC 9207) is missing where the server promised it, or
    /// names another issuer: possible mix-up attack. Nothing was exchanged.
    public static let issuerMismatchInResponse = Code(name: "authorizationResponseIssuerMismatch")
    /// A storage's compare-and-set lost: someone else wrote the session since it was read.
    public static let storageConflict = Code(name: "storageConflict")
    /// A storage lease lapsed or was taken over before the write that needed it.
    public static let leaseLost = Code(name: "leaseLost")
    /// A storage lease could not be taken in time: another holder kept it.
    public static let leaseBusy = Code(name: "leaseBusy")
    /// The authorization server's metadata does not list PKCE `S256` in `code_challenge_methods_supported`
    /// (or lacks the member) where the client requires it (MCP authorization). Nothing was sent to it.
    public static let pkceNotSupported = Code(name: "pkceNotSupported")
    /// The client cannot be registered at the authorization server (RFC 7591), or the server answered
    /// a registration with something unusable.
    public static let registration = Code(name: "registration")
    /// Too many refreshes in a short time (a refresh loop): refused until the window passes.
    public static let refreshLimit = Code(name: "refreshLimit")
    /// The network is unreachable (a `Reachability` says so): nothing was sent, no refresh token was
    /// spent, the session is intact; a coordinator runs the postponed refresh when the network is back.
    public static let offline = Code(name: "offline")
    /// A resource server answered 403 `insufficient_scope` (RFC 6750 §3.1): the token is valid but
    /// lacks a scope; `scope` names what the request needs. A refresh cannot add scope: log in again
    /// asking for it. Never retried.
    public static let insufficientScope = Code(name: "insufficientScope")
    /// A resource server refused the access token (401, or `error="invalid_token"`) and the request
    /// was not sent again with a fresh one: its body can be read only once (a stream; the token *was*
    /// refreshed, so sending the request again works), or the fresh tokens were refused too (an MCP
    /// transport's attempts are spent). `status` is the refusing response's status and `challenges`
    /// its `WWW-Authenticate` challenges, parsed.
    public static let tokenRejected = Code(name: "tokenRejected")
}

extension OAuthError.Code {
    /// The code named `name` (`description`): for a process of Moose's own handing an error to
    /// another (the CLI's detached refresher).
    package init(named name: String) { self.init(name: name) }
}
