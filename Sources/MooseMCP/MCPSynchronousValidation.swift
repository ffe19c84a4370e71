#if MooseMCP
// MooseMCP, server side: what the Swift SDK's synchronous validation pipeline can be given — checks that
// never wait, on keys and introspection answers fetched in the background.
public import Foundation
public import MCP
public import MooseJWT
public import MooseResourceServer
import Synchronization

/// The issuer's signing keys as a snapshot that can be read without waiting, refreshed in the background
/// from an `AccessTokenKeySource` (a `JWKSCache`): for `ResourceServerValidator`, whose checks are
/// synchronous because the MCP Swift SDK's `HTTPRequestValidator` is.
///
/// A token naming a `kid` the snapshot lacks is refused at once (its keys are not at hand), and a refresh is
/// started in the background — at most one at a time, at most once per `unknownKeyCooldown` — so that once
/// a rotated key is published, the next request with it passes. `run()` keeps the snapshot warm.
///
/// ```swift
/// let keys = WarmAccessTokenKeys(source: JWKSCache(url: jwksURL, transport: CurlTransport()))
/// try await keys.refresh()                       // before serving: the first snapshot
/// Task { await keys.run() }                      // then every `refreshInterval` (cancel the task to stop)
/// ```
public final class WarmAccessTokenKeys: Sendable {
    private struct State {
        var keys: [JWTKey] = []
        var refreshing = false
        var lastUnknownKeyRefresh = Date.distantPast
    }

    private let source: any AccessTokenKeySource
    /// How often `run()` refreshes the snapshot, in seconds.
    public let refreshInterval: TimeInterval
    /// The least time between two refreshes started by unknown `kid`s, in seconds (a flood of tokens with
    /// made-up `kid`s costs at most one fetch per period; `JWKSCache` has its own cooldown too).
    public let unknownKeyCooldown: TimeInterval
    private let clock: @Sendable () -> Date
    private let state = Mutex(State())

    /// Keys from `source`; none until the first `refresh()` (or `run()`) has fetched them.
    public init(
        source: any AccessTokenKeySource, refreshInterval: TimeInterval = 300, unknownKeyCooldown: TimeInterval = 10,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.source = source
        self.refreshInterval = max(1, refreshInterval)
        self.unknownKeyCooldown = max(0, unknownKeyCooldown)
        self.clock = clock
    }

    /// The keys at hand, without waiting. When `kid` names none of them, a background refresh is started
    /// (see the type) and the keys at hand are returned all the same — the token then fails its check.
    public func keys(for kid: String?) -> [JWTKey] {
        let now = clock()
        let (keys, start) = state.withLock { state -> ([JWTKey], Bool) in
            guard let kid, !state.keys.contains(where: { $0.keyID == kid }), !state.refreshing,
                now.timeIntervalSince(state.lastUnknownKeyRefresh) >= unknownKeyCooldown
            else { return (state.keys, false) }
            state.refreshing = true
            state.lastUnknownKeyRefresh = now
            return (state.keys, true)
        }
        if start {
            Task { [self] in
                try? await fetch(kid)
                state.withLock { $0.refreshing = false }
            }
        }
        return keys
    }

    /// Fetches the keys now and makes them the snapshot. Throws what the source throws (the snapshot is
    /// then unchanged).
    public func refresh() async throws { try await fetch(nil) }

    /// Refreshes every `refreshInterval` until the calling task is cancelled; a failed refresh keeps the
    /// snapshot and is tried again at the next period.
    public func run() async {
        while !Task.isCancelled {
            try? await refresh()
            try? await Task.sleep(for: .seconds(refreshInterval))
        }
    }

    private func fetch(_ kid: String?) async throws {
        let fresh = try await source.keys(for: kid)
        state.withLock { $0.keys = fresh }
    }
}

/// RFC 7662 answers that can be read without waiting, filled in the background: for
/// `ResourceServerValidator`. A token met for the first time has no answer yet — the request is refused
/// (`invalid_token`, so the client does not wait either) and its introspection starts; the next request
/// with it is answered from here. Active answers are kept until the token's `exp` and at most
/// `maximumActiveAge`, inactive ones `inactiveAge`; at most `capacity` answers and `maximumInFlight`
/// concurrent introspections, keyed by the token's SHA-256 (a token itself is never kept).
///
/// ```swift
/// let answers = WarmIntrospectionAnswers(introspector: TokenIntrospector(endpoint: introspectionURL, clientID: "mcp",
///                                                                         clientSecret: secret, transport: CurlTransport()))
/// ```
public final class WarmIntrospectionAnswers: Sendable {
    private struct State {
        var answers: [String: (answer: IntrospectionAnswer, until: Date)] = [:]
        var inFlight: Set<String> = []
    }

    private let introspector: any AccessTokenIntrospector
    private let maximumActiveAge: TimeInterval
    private let inactiveAge: TimeInterval
    private let capacity: Int
    private let maximumInFlight: Int
    private let clock: @Sendable () -> Date
    private let state = Mutex(State())

    /// Answers from `introspector` (a `TokenIntrospector`, whose own cache and single-flight still apply).
    public init(
        introspector: any AccessTokenIntrospector, maximumActiveAge: TimeInterval = 60, inactiveAge: TimeInterval = 5,
        capacity: Int = 10_000, maximumInFlight: Int = 64, clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.introspector = introspector
        self.maximumActiveAge = max(0, maximumActiveAge)
        self.inactiveAge = max(0, inactiveAge)
        self.capacity = max(1, capacity)
        self.maximumInFlight = max(1, maximumInFlight)
        self.clock = clock
    }

    /// The answer at hand for `token`, or `nil` — and then its introspection is started in the background
    /// (unless one is running, or `maximumInFlight` are).
    public func answer(for token: String) -> IntrospectionAnswer? {
        let key = DPoP.accessTokenHash(token)
        let now = clock()
        let (answer, start) = state.withLock { state -> (IntrospectionAnswer?, Bool) in
            if let hit = state.answers[key] {
                if hit.until > now { return (hit.answer, false) }
                state.answers[key] = nil
            }
            guard !state.inFlight.contains(key), state.inFlight.count < maximumInFlight else { return (nil, false) }
            state.inFlight.insert(key)
            return (nil, true)
        }
        if start {
            Task { [self] in
                let fresh = try? await introspector.introspect(token)
                remember(fresh, for: key)
            }
        }
        return answer
    }

    /// Introspects `token` now and keeps the answer (for a caller that can wait, before the first request).
    public func prefetch(_ token: String) async throws {
        let answer = try await introspector.introspect(token)
        remember(answer, for: DPoP.accessTokenHash(token))
    }

    private func remember(_ answer: IntrospectionAnswer?, for key: String) {
        let now = clock()
        state.withLock { state in
            state.inFlight.remove(key)
            // No answer (the endpoint failed): nothing kept, the next request tries again.
            guard let answer else { return }
            var until = now.addingTimeInterval(answer.active ? maximumActiveAge : inactiveAge)
            if answer.active, let exp = answer.claims.expiresAt, exp < until { until = exp }
            guard until > now else { return }
            if state.answers.count >= capacity {
                state.answers = state.answers.filter { $0.value.until > now }
                if state.answers.count >= capacity,
                    let soonest = state.answers.min(by: { $0.value.until < $1.value.until })?.key
                {
                    state.answers[soonest] = nil
                }
            }
            state.answers[key] = (answer, until)
        }
    }
}

/// An `HTTPRequestValidator` for the MCP Swift SDK's validation pipeline, verifying Bearer access tokens
/// with `ResourceServer.verifyBearer` — the checks of `ResourceServer.verify`, synchronously: JWTs
/// against `WarmAccessTokenKeys`, opaque tokens against `WarmIntrospectionAnswers`. Refusals are the
/// verifier's (401 with `resource_metadata`, 403 `insufficient_scope`), answered like `MCPResourceGate`'s.
///
/// What synchronous checking costs, honestly: a JWT signed with a key not yet fetched, and an opaque token
/// not yet introspected, are refused (`invalid_token`) while the fetch runs in the background — a client
/// then usually authorizes again. DPoP is not available here (a proof's `jti` needs the asynchronous
/// replay cache): configure `dpop: .disabled`, or use `MCPResourceGate`, which has none of these limits
/// and is the one to prefer. The SDK's pipeline passes the request on with its `Authorization` header.
///
/// ```swift
/// let validator = ResourceServerValidator(server: resourceServer, keys: keys, requiredScopes: ["mcp"])
/// let transport = StatelessHTTPServerTransport(validationPipeline: StandardValidationPipeline(validators: [
///     ProtectedResourceMetadataValidator(metadata: metadata), validator,
///     OriginValidator.disabled, AcceptHeaderValidator(mode: .jsonOnly), ContentTypeValidator(), ProtocolVersionValidator(),
/// ]))
/// ```
public struct ResourceServerValidator: HTTPRequestValidator {
    /// The verifier.
    public let server: ResourceServer
    /// The issuer's keys, for JWT access tokens.
    public let keys: WarmAccessTokenKeys?
    /// Introspection answers, for opaque tokens (used when `server` has an introspector).
    public let introspection: WarmIntrospectionAnswers?
    /// Scopes every request needs.
    public let requiredScopes: [String]

    /// A validator verifying with `server`, JWTs against `keys`, opaque tokens against `introspection`.
    public init(
        server: ResourceServer, keys: WarmAccessTokenKeys?, introspection: WarmIntrospectionAnswers? = nil,
        requiredScopes: [String] = []
    ) {
        self.server = server
        self.keys = keys
        self.introspection = introspection
        self.requiredScopes = requiredScopes
    }

    /// `nil` when the request's Bearer token passes every check; otherwise the refusal to answer with.
    public func validate(_ request: HTTPRequest, context: HTTPValidationContext) -> HTTPResponse? {
        do {
            _ = try server.verifyBearer(
                authorizationHeader: MCPResourceGate.headerValue(request, "Authorization"),
                requiredScopes: requiredScopes, keys: { kid in keys?.keys(for: kid) ?? [] },
                introspection: { token in introspection?.answer(for: token) })
            return nil
        } catch {
            return MCPResourceGate.response(for: error)
        }
    }
}
#endif
