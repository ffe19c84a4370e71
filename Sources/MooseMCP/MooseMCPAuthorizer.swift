#if MooseMCP
// MooseMCP: the MCP Swift SDK's `HTTPClientAuthorizer` on Moose — discovery, registration, login,
// one refresh however many connections ask, step-up — following the MCP authorization
// specification (2025-11-25).
public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import MCP
public import MooseOAuth
public import MooseHTTP
public import Logging
import MooseURLSession
import Synchronization

/// An `HTTPClientAuthorizer` for the MCP Swift SDK's `HTTPClientTransport`, built on Moose: give it
/// the server's URL, a storage and a way to show the login page, and it does the rest of the MCP
/// authorization specification (2025-11-25):
///
/// - on a 401 it reads `WWW-Authenticate` (`resource_metadata`, `scope`, `error`), discovers the
///   server's RFC 9728 metadata and its authorization server (RFC 8414 / OpenID Connect, path-aware),
///   refuses a server that does not advertise PKCE S256, registers the client (pre-registered, Client
///   ID Metadata Document, or RFC 7591 — kept sealed in the storage), and logs in with the
///   authorization code flow (PKCE, `state`, RFC 9207 `iss`, RFC 8707 `resource` on every request);
/// - a 401 on a token refreshes only if that token is still the current one (`refresh(rejecting:)`):
///   N concurrent 401s cost one refresh, across connections and — through the storage's lease —
///   processes; a failed refresh never wipes the stored tokens;
/// - a 403 `insufficient_scope` logs in again for the scopes it names plus those already granted, at
///   most `maxStepUpAttempts` times per resource, operation and scope set;
/// - tokens go only to the resource they were issued for.
///
/// ```swift
/// let authorizer = try MooseMCPAuthorizer(serverURL: url, storage: storage, login: .loopback { url in SystemBrowser().open(url) })
/// let transport = HTTPClientTransport(endpoint: url, streaming: false, authorizer: authorizer)
/// let client = Client(name: "my-app", version: "1.0")
/// _ = try await client.connect(transport: transport)
/// ```
///
/// One authorizer may serve any number of transports to the same server (it is `Sendable`; its state
/// is behind a lock and its discovery, logins and refreshes are single-flight). With a
/// `MooseMCPAuthorizer`, `HTTPClientTransport(endpoint:streaming:authorizer:)` is MooseMCP's
/// initializer: on Linux it makes the SDK's transport read servers' `text/event-stream` answers (the
/// answer only: notifications inside it are dropped). `MooseMCPTransport(endpoint:authorizer:)`
/// delivers every event, and can present DPoP-bound tokens (the SDK's transport sets only `Authorization`).
public final class MooseMCPAuthorizer: HTTPClientAuthorizer, Sendable {
    /// The OAuth side: discovery, registration, login, the session and its coordinator.
    public let manager: ResourceTokenManager
    /// How a login reaches the user: `.loopback` (a browser and a 127.0.0.1 listener, Linux and
    /// macOS) or `.userAgent` (the app's own, e.g. `ASWebAuthenticationSession`).
    public let loginMethod: TokenManager.LoginMethod
    /// The most step-ups (403 `insufficient_scope`) for one resource, operation and scope set.
    public let maxStepUpAttempts: Int
    private let state = Mutex(State())

    struct State {
        /// The token each in-flight request carried, by the task that sent it (the transport calls
        /// `authorizationHeader` and `handleChallenge` from the task of one `send`).
        var sent: [Int: AccessToken?] = [:]
        var sentOrder: [Int] = []
        var stepUps: [String: Int] = [:]
        var lastError: MCPAuthorizationError?
        var discoveryTried = false
        var endpoint: (text: String, matches: Bool)?
    }

    /// The most requests whose token is remembered at once (a request that succeeds leaves its entry).
    static let maximumTracked = 1024

    /// An authorizer for the MCP server at `serverURL` (its canonical URL is the RFC 8707 resource).
    ///
    /// - Parameters:
    ///   - storage: where the session and the client registration live (`EncryptedSessionStorage`
    ///     for a file several processes share, `InMemorySessionStorage` for one process).
    ///   - login: how the login page reaches the user.
    ///   - client: pre-registered, Client ID Metadata Document, or (the default) RFC 7591 registration.
    ///   - scopes: what a login asks for; `nil`: the 401's `scope`, else the server's `scopes_supported`.
    ///   - transport: the HTTP client for OAuth traffic (discovery, registration, token requests).
    /// - Throws: `OAuthError` when `serverURL` is not an `https` (or loopback `http`) URL.
    public convenience init(
        serverURL: URL, storage: any SessionStorage, login: TokenManager.LoginMethod,
        client: ResourceTokenManager.ClientIdentity = .dynamic(clientName: "Moose MCP client"),
        scopes: [String]? = nil, transport: (any HTTPTransport)? = nil, maxStepUpAttempts: Int = 2,
        logger: Logger? = nil,
        configuration: RefreshCoordinator.Configuration = RefreshCoordinator.Configuration()
    ) throws {
        let manager = try ResourceTokenManager(
            resource: serverURL.absoluteString, client: client, storage: storage,
            transport: transport ?? URLSessionTransport(), scopes: scopes, requireS256: true,
            logger: logger, configuration: configuration)
        self.init(manager: manager, login: login, maxStepUpAttempts: maxStepUpAttempts)
    }

    /// An authorizer on a manager made elsewhere (shared with other code of the app).
    public init(manager: ResourceTokenManager, login: TokenManager.LoginMethod, maxStepUpAttempts: Int = 2) {
        self.manager = manager
        self.loginMethod = login
        self.maxStepUpAttempts = max(0, maxStepUpAttempts)
    }

    /// The last failure of a login, refresh or discovery this authorizer ran (the SDK reports it only
    /// as text): an `MCPAuthorizationError` whose `oauthError` has the code.
    public var lastError: MCPAuthorizationError? { state.withLock { $0.lastError } }

    /// Three tries per request: the first, one after a refresh or login, one after a step-up.
    public var maxAuthorizationAttempts: Int { 3 }

    /// Refuses an endpoint that is not `https` (plain `http` only to this machine).
    public func validateEndpointSecurity(for endpoint: URL) throws {
        guard TransportSecurity.permits(endpoint) else {
            throw MCPAuthorizationError(
                OAuthError(
                    OAuthError.insecureEndpoint,
                    "\(endpoint.redactedForLogs) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)"
                ))
        }
    }

    /// `Bearer <token>` from the coordinator's synchronous snapshot (a lock read), for the server the
    /// token was issued for only; `nil` before a login, for an expired token, or another endpoint.
    public func authorizationHeader(for endpoint: URL) -> String? {
        guard matches(endpoint) else { return nil }
        let token = manager.cachedAccessToken(minimumValidity: 0)
        remember(token)
        guard let token, !token.isDPoPBound else { return nil }
        return try? token.checkedAuthorizationHeader()
    }

    /// Before each request: discovers once (from the well-known URLs, opening a stored session), and
    /// when the token is about to expire joins the coordinator's one refresh. Never logs in (a 401
    /// does); the SDK ignores what this throws, `lastError` keeps it.
    public func prepareAuthorization(for endpoint: URL, session: URLSession) async throws {
        guard matches(endpoint) else { return }
        // A new request of this task: what an earlier (successful) one carried no longer counts.
        _ = takeSent()
        try await prepare(for: endpoint)
    }

    /// A 401: refresh (only if the token that request carried is still current), else log in. A 403
    /// `insufficient_scope`: log in again for more scope (bounded). Anything else: `false`.
    public func handleChallenge(
        statusCode: Int, headers: [String: String], endpoint: URL, operationKey: String?,
        session: URLSession
    ) async throws -> Bool {
        guard matches(endpoint) else { return false }
        return try await respond(
            to: statusCode, challenge: ResourceChallenge.parse(headers: headers), sent: takeSent(),
            operation: operationKey)
    }

    // MARK: - The rules, for the SDK's transport above and for MooseMCPTransport

    /// `true` when `endpoint` is the server this authorizer's tokens are for.
    func serves(_ endpoint: URL) -> Bool { matches(endpoint) }

    /// The token for a request to `endpoint`: the coordinator's snapshot when it is valid now and
    /// `endpoint` is the server it was issued for, else `nil`.
    func token(for endpoint: URL) -> AccessToken? {
        guard matches(endpoint) else { return nil }
        return manager.cachedAccessToken(minimumValidity: 0)
    }

    /// Discovers once, and joins the coordinator's refresh when the token is about to expire. What it
    /// throws is also kept in `lastError` (as an `MCPAuthorizationError`).
    func prepare(for endpoint: URL) async throws {
        guard matches(endpoint) else { return }
        do {
            if manager.context == nil {
                let first = state.withLock { state in
                    defer { state.discoveryTried = true }
                    return !state.discoveryTried
                }
                guard first else { return }
                try await manager.discover()
            }
            // A session that needs a refresh soon (or now): join the one refresh.
            if manager.cachedAccessToken(minimumValidity: -.infinity) != nil, manager.cachedAccessToken() == nil {
                _ = try await manager.accessToken()
            }
        } catch {
            throw record(error)
        }
    }

    /// A 401 or 403 `status` with `challenge` for a request that carried `sent` (`.some(nil)`: no
    /// token; `nil`: not known). `true`: send the request again (a token was refreshed, a login or a
    /// step-up done).
    ///
    /// - Throws: `MCPAuthorizationError` (kept in `lastError`) when discovery, the refresh or the login failed.
    func respond(to status: Int, challenge: ResourceChallenge?, sent: AccessToken??, operation: String?) async throws
        -> Bool
    {
        do {
            switch status {
            case 401: return try await unauthorized(challenge, sent: sent)
            case 403: return try await forbidden(challenge, sent: sent, operation: operation)
            default: return false
            }
        } catch {
            throw record(error)
        }
    }

    private func unauthorized(_ challenge: ResourceChallenge?, sent: AccessToken??) async throws -> Bool {
        try await manager.discover(challenge: challenge)
        // The token the request carried; unknown (not tracked): the current one.
        let rejected: AccessToken? = sent ?? manager.cachedAccessToken(minimumValidity: -.infinity)
        do {
            if let rejected {
                _ = try await manager.refresh(rejecting: rejected)
            } else {
                // Nothing went out: a stored (perhaps refreshable) session first — another process
                // may have logged in.
                _ = try await manager.accessToken()
            }
            return true
        } catch let error as OAuthError
            where error.code == OAuthError.needsLogin || error.code == OAuthError.invalidGrant
        {
            // Only a new login helps; the stored tokens were not touched by the failed attempt.
        }
        try await manager.login(with: loginMethod, challenge: challenge)
        return true
    }

    private func forbidden(_ challenge: ResourceChallenge?, sent: AccessToken??, operation: String?) async throws
        -> Bool
    {
        guard let challenge, let error = challenge.error, error.utf8.elementsEqual("insufficient_scope".utf8),
            let needed = challenge.scopes
        else { return false }
        try await manager.discover(challenge: challenge)
        let current = manager.cachedAccessToken(minimumValidity: 0)
        // A step-up (or refresh) landed after this request went out: retry with the new token.
        if let carried = sent ?? nil, let current, !current.value.utf8.elementsEqual(carried.value.utf8) { return true }
        let granted = try await manager.session()?.tokens.scopes ?? []
        // The server refuses a token that already has these scopes: asking again would loop.
        if ScopeToken.covers(granted, needed), current != nil { return false }
        let wanted = ScopeToken.union(granted, needed)
        let key = ([manager.resource, operation ?? "-"] + wanted.sorted()).joined(separator: " ")
        let attempt = state.withLock { state -> Int in
            if state.stepUps.count >= Self.maximumTracked, state.stepUps[key] == nil { state.stepUps.removeAll() }
            state.stepUps[key, default: 0] += 1
            return state.stepUps[key] ?? 0
        }
        guard attempt <= maxStepUpAttempts else { return false }
        try await manager.login(with: loginMethod, scopes: wanted, challenge: challenge)
        return true
    }

    // MARK: - Bookkeeping

    /// `true` for the resource this authorizer's tokens are for (compared canonically, byte for byte).
    private func matches(_ endpoint: URL) -> Bool {
        let text = endpoint.absoluteString
        if let known = state.withLock({ $0.endpoint }), known.text.utf8.elementsEqual(text.utf8) {
            return known.matches
        }
        let canonical = (try? ResourceIdentifier.canonical(text)) ?? ""
        let matches =
            canonical.utf8.elementsEqual(manager.resource.utf8)
            || manager.context.map { canonical.utf8.elementsEqual($0.resource.utf8) } == true
        state.withLock { $0.endpoint = (text, matches) }
        return matches
    }

    private static func currentTaskKey() -> Int? { withUnsafeCurrentTask { $0?.hashValue } }

    private func remember(_ token: AccessToken?) {
        guard let key = Self.currentTaskKey() else { return }
        state.withLock { state in
            if state.sent.updateValue(token, forKey: key) == nil { state.sentOrder.append(key) }
            while state.sentOrder.count > Self.maximumTracked {
                state.sent[state.sentOrder.removeFirst()] = nil
            }
        }
    }

    /// The token the current task's request carried: `.some(nil)` when it carried none, `nil` when
    /// unknown.
    private func takeSent() -> AccessToken?? {
        guard let key = Self.currentTaskKey() else { return nil }
        return state.withLock { state in
            guard let value = state.sent.removeValue(forKey: key) else { return nil }
            state.sentOrder.removeAll { $0 == key }
            return .some(value)
        }
    }

    private func record(_ error: any Error) -> MCPAuthorizationError {
        let wrapped = error as? MCPAuthorizationError ?? MCPAuthorizationError(error)
        state.withLock { $0.lastError = wrapped }
        return wrapped
    }
}

/// A failure of MCP authorization, with Moose's error inside: the SDK shows
/// `localizedDescription` (this error's message) in its `MCPError`, and `MooseMCPAuthorizer.lastError`
/// keeps the whole error.
public struct MCPAuthorizationError: Error, LocalizedError, CustomStringConvertible {
    /// What failed: an `OAuthError` (most often), a storage error, a cancellation…
    public let underlying: any Error & Sendable

    /// Wraps `underlying`.
    public init(_ underlying: any Error & Sendable) { self.underlying = underlying }

    /// The `OAuthError`, when that is what failed (`code`, the server's `error`…).
    public var oauthError: OAuthError? { underlying as? OAuthError }

    /// The underlying error's description (never a token or secret: OAuthError messages carry none).
    public var description: String { (underlying as? OAuthError)?.description ?? String(describing: underlying) }

    /// The same as `description`, for `localizedDescription`.
    public var errorDescription: String? { description }
}
#endif
