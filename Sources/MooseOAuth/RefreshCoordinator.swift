#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import HTTPTypes
import MooseCrypto
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An access token as handed out by a `RefreshCoordinator`: its value and the generation it belongs
/// to (so a 401 can say which token failed). `description` shows a fingerprint, never the token.
public struct AccessToken: Sendable, Hashable, CustomStringConvertible {
    /// The token.
    public let value: String
    /// `Bearer`, `DPoP`…
    public let tokenType: String
    /// When it expires, if known.
    public let expiresAt: Date?
    /// Increases every time the coordinator publishes a new token.
    public let generation: Int64
    /// The key a DPoP-bound token must be presented with (RFC 9449 §7), `nil` for bearer tokens.
    public let dpopKey: DPoPKey?

    /// A token (coordinators make these; tests and adapters may too).
    public init(value: String, tokenType: String = "Bearer", expiresAt: Date? = nil, generation: Int64 = 0, dpopKey: DPoPKey? = nil) {
        self.value = value
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.generation = generation
        self.dpopKey = dpopKey
    }

    /// A coordinator's token for `tokens`.
    init(_ tokens: TokenSet, generation: Int64) {
        self.init(value: tokens.accessToken, tokenType: tokens.tokenType, expiresAt: tokens.expiresAt, generation: generation,
                  dpopKey: tokens.dpopKey)
    }

    /// `true` for a token the server bound to a DPoP key: it is sent as `Authorization: DPoP …`
    /// with a proof, never as a bearer token.
    public var isDPoPBound: Bool { tokenType.utf8.count == 4 && tokenType.lowercased() == "dpop" }

    /// The header fields that present this token with one request: `Authorization` (checked, see
    /// `checkedAuthorizationHeader()`), and for a DPoP-bound token a fresh `DPoP` proof for this
    /// method and URL (with `ath`, and the nonce the URL's origin gave last).
    ///
    /// - Throws: `OAuthError.unsafeValue` for a token that cannot be a header; `OAuthError.needsLogin`
    ///   for a DPoP-bound token without its key.
    public func authorizationFields(method: HTTPRequest.Method, url: URL) throws -> HTTPFields {
        var fields = HTTPFields()
        fields[.authorization] = try checkedAuthorizationHeader()
        if isDPoPBound {
            guard let dpopKey else {
                throw OAuthError(OAuthError.needsLogin, "the access token is bound to a DPoP key that is not here (RFC 9449): log in again")
            }
            fields[.dpop] = try dpopKey.proof(method: method, url: url, accessToken: value, nonce: DPoPNonces.nonce(for: url))
        }
        return fields
    }

    /// Sends `request` presenting this token (`authorizationFields`); for a DPoP-bound token, a
    /// resource server's `use_dpop_nonce` challenge (RFC 9449 §9) is answered once with a new proof
    /// carrying the nonce it sent, and every `DPoP-Nonce` it sends is remembered for its origin.
    public func send(_ request: APIRequest, with send: (APIRequest) async throws -> APIResponse) async throws -> APIResponse {
        var request = request
        guard request.url != nil else { throw OAuthError(OAuthError.invalidConfiguration, "the request has no absolute URL") }
        request.headerFields[.authorization] = try checkedAuthorizationHeader()
        guard isDPoPBound else { return try await send(request) }
        guard let dpopKey else {
            throw OAuthError(OAuthError.needsLogin, "the access token is bound to a DPoP key that is not here (RFC 9449): log in again")
        }
        // The one nonce rule (DPoPKey.send): a proof per attempt, one resend when the server asks for a nonce.
        return try await dpopKey.send(request, accessToken: value, send)
    }

    /// `Bearer <token>` for an `Authorization` header (RFC 6750 §2.1), unchecked: prefer
    /// `checkedAuthorizationHeader()` for tokens that came from a server.
    public var authorizationHeader: String { "\(tokenType) \(value)" }

    /// `Bearer <token>`, after checking that the token is an RFC 6750 `b64token` and the type an
    /// RFC 9110 token — so nothing a provider sent can break out of the header.
    ///
    /// - Throws: `OAuthError.unsafeValue`.
    public func checkedAuthorizationHeader() throws -> String {
        guard TokenCharacters.isB64Token(value), TokenCharacters.isHTTPToken(tokenType) else {
            throw OAuthError(OAuthError.unsafeValue,
                             "the access token (or its type) has characters outside RFC 6750's b64token set; it is not sent as a header")
        }
        return authorizationHeader
    }

    /// Fingerprint and generation only.
    public var description: String { "AccessToken(#\(TokenSet.fingerprint(value)), generation \(generation))" }
}

/// What a coordinator tells the app (for a UI that shows "signed in" / "please sign in again").
public enum RefreshEvent: Sendable {
    /// A refresh succeeded (or tokens refreshed by another process were adopted).
    case refreshed(generation: Int64, expiresAt: Date?)
    /// A refresh failed; tokens are kept (transient) unless the next event says otherwise.
    case refreshFailed(OAuthError)
    /// The refresh token was refused: only a new login helps. Persisted; never retried.
    case needsReauthentication
    /// The session was logged out.
    case loggedOut
}

/// Hands every caller a valid access token, with one refresh however many callers, tasks, threads,
/// processes and — with a shared storage — machines ask at once. The only code in Moose that
/// refreshes.
///
/// - `accessToken(minimumValidity:)` returns the cached token when it is valid for that long —
///   read from a lock-protected snapshot, no actor hop (`cachedAccessToken`) — and otherwise joins
///   the one shared refresh. The in-flight task is set before the first `await`.
/// - The shared refresh first re-reads the storage (another process may have refreshed: its tokens
///   are adopted), then takes the storage's lease (renewed while the refresh runs), re-reads inside
///   it, refreshes only if still needed, commits with a compare-and-set fenced by the lease, and
///   releases it. Waiters in other processes re-read inside the lease: a refresh token read before
///   it is never reused.
/// - `refresh(rejecting:)` (for a 401) refreshes only if the rejected token is still the current one.
/// - Cancelling a waiter never cancels the shared refresh. `invalid_grant` is final unless the
///   storage shows another process already rotated the token; transient failures retry with bounded,
///   jittered backoff; a storage that cannot be written fails before any refresh token is spent.
///   A refresh window stops refresh loops.
///
/// ```swift
/// let coordinator = RefreshCoordinator(key: "default", storage: storage, authorizer: flow)
/// let token = try await coordinator.accessToken()
/// request.headerFields[.authorization] = try token.checkedAuthorizationHeader()
/// ```
public actor RefreshCoordinator {
    /// Tuning.
    public struct Configuration: Sendable {
        /// The validity a cached token must still have (default 30 s) — capped, for each token, at
        /// `maximumMarginFraction` of that token's own lifetime.
        public var minimumValidity: TimeInterval = 30
        /// The largest share of a token's lifetime that any margin (`minimumValidity`, or the one a
        /// caller passes) may ask for (default ¼). A provider issuing 5 s tokens against a 30 s margin
        /// then gets one refresh per token — in its last 1.25 s — instead of a refresh on every call.
        /// `refreshNow()` and a 401 (`refresh(rejecting:)`) are not margins and always refresh.
        public var maximumMarginFraction: Double = 0.25
        /// The cross-process lease's lifetime: a crashed refresher's lease lapses after it. The
        /// lease is renewed every third of it while a refresh runs.
        public var leaseTTL: TimeInterval = 30
        /// How long a waiter waits for another process's lease.
        public var leaseWait: TimeInterval = 45
        /// Attempts for transient failures (network, 5xx, 429), the first included.
        public var transientAttempts = 3
        /// The first backoff delay (doubled each time, jittered 50–100%).
        public var backoff: TimeInterval = 0.5
        /// At most this many futile refreshes — ones that failed, brought a token already too close
        /// to its expiry to use, or whose token a server then rejected with a 401 —…
        public var refreshLimit = 5
        /// …within this many seconds (a refresh loop). Refreshes that produced a usable token are
        /// not counted: short-lived tokens refreshed once per lifetime never trip it.
        public var refreshWindow: TimeInterval = 30
        /// The wall clock; `nil` (the default) reads the system's, cheaply enough for the hot path
        /// (on Linux the coarse real-time clock: a few milliseconds of resolution, which no expiry
        /// decision with seconds of margin can notice). Tests set their own.
        public var clock: (@Sendable () -> Date)? = nil
        /// The network path (e.g. `SystemReachability()`, started): when it says offline, a refresh
        /// fails at once with `OAuthError.offline` — nothing sent, no refresh token spent, no
        /// retries burned, never "needs login" — and runs by itself as soon as it says online again.
        public var reachability: (any Reachability)? = nil

        /// Defaults.
        public init() {}
    }

    struct Snapshot {
        var token: AccessToken?
        var tokens: TokenSet?
        /// The largest margin `token` can be asked for (a share of its lifetime).
        var marginCap: TimeInterval = .infinity

        init() {}

        init(token: AccessToken, tokens: TokenSet, fraction: Double) {
            self.token = token
            self.tokens = tokens
            marginCap = tokens.margin(.infinity, cappedAt: fraction)
        }
    }

    /// The storage key of the session this coordinates (a profile name, an account id…).
    public nonisolated let key: String
    private let storage: any SessionStorage
    private let refresher: @Sendable (OAuthSession) async throws -> TokenSet
    private let configuration: Configuration
    private nonisolated let snapshot = Mutex(Snapshot())
    private nonisolated let defaultMinimumValidity: TimeInterval
    private nonisolated let customClock: (@Sendable () -> Date)?
    private var generation: Int64 = 0
    /// Raised by every login and logout: a refresh that started before one publishes nothing after it.
    private var epoch: Int64 = 0
    private var inFlight: Task<AccessToken, any Error>?
    private var recentRefreshes: [Date] = []
    private var pendingWrite: (session: OAuthSession, expectedGeneration: Int64?)?
    private var writeRetry: Task<Void, Never>?
    private var postponedRefresh = false
    private var reachabilityWatch: Task<Void, Never>?

    deinit { reachabilityWatch?.cancel() }
    private nonisolated let eventListeners = EventListeners()

    /// A coordinator for the session under `key` in `storage`; `refresher` runs the refresh grant
    /// for the stored session it is handed (read inside the refresh lease: never read it again)
    /// and validates what comes back (an `Authorizable`'s `refresh` does both).
    ///
    /// `current`, when the caller already read the session, seeds the cache so the first call
    /// needs no storage read.
    /// (Internal: `SessionEngine.coordinator` is the public way to refresh with the whole session.)
    init(key: String, storage: any SessionStorage, configuration: Configuration = Configuration(),
         current: OAuthSession? = nil, refreshingSession refresher: @escaping @Sendable (OAuthSession) async throws -> TokenSet) {
        self.key = key
        self.storage = storage
        self.refresher = refresher
        self.configuration = configuration
        self.defaultMinimumValidity = configuration.minimumValidity
        self.customClock = configuration.clock
        if let current, current.state == .active {
            let fraction = configuration.maximumMarginFraction
            snapshot.withLock { $0 = Snapshot(token: AccessToken(current.tokens, generation: 0), tokens: current.tokens, fraction: fraction) }
        }
    }

    /// A coordinator whose `refresher` needs only the stored session's tokens.
    public init(key: String, storage: any SessionStorage, configuration: Configuration = Configuration(),
                current: OAuthSession? = nil, refresher: @escaping @Sendable (TokenSet) async throws -> TokenSet) {
        self.init(key: key, storage: storage, configuration: configuration, current: current, refreshingSession: { session in
            try await refresher(session.tokens)
        })
    }

    /// A coordinator that refreshes with `authorizer` (its `refresh` validates a new ID token the
    /// way its login did): the one refresh path for every flow.
    public init(key: String, storage: any SessionStorage, authorizer: any Authorizable,
                configuration: Configuration = Configuration(), current: OAuthSession? = nil) {
        self.init(key: key, storage: storage, configuration: configuration, current: current) { (tokens: TokenSet) in
            try await authorizer.refresh(tokens)
        }
    }

    /// Events for UIs: every access makes a new stream that gets every event from then on (each
    /// listener its own copy, up to 32 buffered), ending when the listener stops iterating.
    public nonisolated var events: AsyncStream<RefreshEvent> { eventListeners.listen() }

    /// The cached token if valid for `minimumValidity` seconds (at most the configured share of
    /// its lifetime: see `Configuration.maximumMarginFraction`) — a lock read, callable from any
    /// context (the main actor included) without an actor hop.
    public nonisolated func cachedAccessToken(minimumValidity: TimeInterval? = nil) -> AccessToken? {
        let requested = minimumValidity ?? defaultMinimumValidity
        let now = nowSince1970()
        return snapshot.withLock { snapshot in
            guard let token = snapshot.token else { return nil }
            if let expiresAt = token.expiresAt, expiresAt.timeIntervalSince1970 - now < min(requested, snapshot.marginCap) { return nil }
            return token
        }
    }

    /// The lifetime the provider gave the current token, when known (`moose token` warns when a
    /// requested validity is longer than the provider's tokens live).
    public nonisolated var currentTokenLifetime: TimeInterval? { snapshot.withLock { $0.tokens?.lifetime } }

    /// Seconds since 1970 on the configured clock.
    private nonisolated func nowSince1970() -> TimeInterval {
        if let customClock { return customClock().timeIntervalSince1970 }
        #if os(Linux) || os(Android)
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &spec)
        return TimeInterval(spec.tv_sec) + TimeInterval(spec.tv_nsec) / 1e9
        #else
        return Date().timeIntervalSince1970
        #endif
    }

    private nonisolated func now() -> Date { Date(timeIntervalSince1970: nowSince1970()) }

    /// A token valid for at least `minimumValidity` seconds (default: the configuration's), refreshing
    /// once for all concurrent callers when needed.
    ///
    /// `nonisolated(nonsending)`: it runs on the caller's executor, so with a valid cached token it is
    /// a lock read — no hop to this actor, none off the main actor. Only a refresh enters the actor.
    public nonisolated(nonsending) func accessToken(minimumValidity: TimeInterval? = nil) async throws -> AccessToken {
        if let cached = cachedAccessToken(minimumValidity: minimumValidity) { return cached }
        return try await join(minimumValidity: minimumValidity ?? configuration.minimumValidity, rejecting: nil)
    }

    /// For a 401: refreshes only if `rejected` is still the current token; otherwise returns the newer one.
    public func refresh(rejecting rejected: AccessToken) async throws -> AccessToken {
        if let current = snapshot.withLock({ $0.token }), !current.value.utf8.elementsEqual(rejected.value.utf8) { return current }
        return try await join(minimumValidity: .infinity, rejecting: rejected.value)
    }

    /// For a 401 seen on a request that carried `authorizationHeader`.
    public func refresh(rejectingHeader authorizationHeader: String) async throws -> AccessToken {
        if let current = snapshot.withLock({ $0.token }), !current.authorizationHeader.utf8.elementsEqual(authorizationHeader.utf8) {
            return current
        }
        let rejected = authorizationHeader.split(separator: " ", maxSplits: 1).last.map(String.init)
        return try await join(minimumValidity: .infinity, rejecting: rejected)
    }

    /// Refreshes now, whatever the cached token's expiry, through the same shared, leased path as
    /// every other refresh (`moose refresh`, a "refresh now" button). Concurrent callers share it.
    @discardableResult
    public func refreshNow() async throws -> AccessToken {
        try await join(minimumValidity: .infinity, rejecting: nil)
    }

    /// Refreshes now if the token is valid for less than `minimumValidity` (for apps that schedule it).
    public func refreshIfNeeded(minimumValidity: TimeInterval? = nil) async throws {
        _ = try await accessToken(minimumValidity: minimumValidity)
    }

    /// Forgets the in-memory tokens after a new login was stored, so the next call reads it.
    public func didLogIn() {
        epoch += 1
        pendingWrite = nil
        writeRetry?.cancel()
        writeRetry = nil
        recentRefreshes.removeAll()
        snapshot.withLock { $0 = Snapshot() }
    }

    /// Forgets the in-memory tokens and announces `loggedOut` (the caller wipes the storage).
    public func didLogOut() {
        epoch += 1
        pendingWrite = nil
        writeRetry?.cancel()
        writeRetry = nil
        snapshot.withLock { $0 = Snapshot() }
        eventListeners.yield(.loggedOut)
    }

    // MARK: - The shared refresh

    private func join(minimumValidity: TimeInterval, rejecting: String?) async throws -> AccessToken {
        let task: Task<AccessToken, any Error>
        if let running = inFlight {
            task = running
        } else {
            // Set before the first await: re-entrant callers join this task.
            task = Task { try await self.performRefresh(minimumValidity: minimumValidity, rejecting: rejecting) }
            inFlight = task
        }
        return try await Self.wait(for: task)
    }

    /// Waits for the shared task; a cancelled waiter leaves at once with `CancellationError` and the
    /// shared refresh goes on for the others.
    private static func wait(for task: Task<AccessToken, any Error>) async throws -> AccessToken {
        let box = ContinuationBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<AccessToken, any Error>) in
                box.install(continuation)
                Task { box.resume(with: await task.result) }
            }
        } onCancel: {
            box.resume(with: .failure(CancellationError()))
        }
    }

    /// Refuses a refresh after `refreshLimit` futile ones within `refreshWindow` (a refresh loop).
    private func checkRefreshWindow() throws {
        let now = now()
        recentRefreshes.removeAll { now.timeIntervalSince($0) > configuration.refreshWindow }
        guard recentRefreshes.count < configuration.refreshLimit else {
            throw OAuthError(OAuthError.refreshLimit,
                             "\(recentRefreshes.count) futile refreshes of \(key) in \(Int64(saturating: configuration.refreshWindow)) s: refusing another (a refresh loop?)")
        }
    }

    /// Counts a refresh that gave no usable token toward the loop guard.
    private func recordFutileRefresh() { recentRefreshes.append(now()) }

    /// Throws `offline` (and arranges the postponed refresh) when the reachability says offline.
    private func checkOnline() throws {
        guard let reachability = configuration.reachability, reachability.status == .offline else { return }
        postponedRefresh = true
        watchReachability(reachability)
        throw OAuthError(OAuthError.offline, "the network is unreachable: the refresh of \(key) waits for it (no refresh token was spent)")
    }

    /// Runs a postponed refresh each time the network comes back (one watcher per coordinator).
    private func watchReachability(_ reachability: any Reachability) {
        guard reachabilityWatch == nil else { return }
        let updates = reachability.updates()
        reachabilityWatch = Task { [weak self] in
            for await status in updates where status == .online {
                await self?.runPostponedRefresh()
            }
        }
    }

    private func runPostponedRefresh() async {
        guard postponedRefresh else { return }
        postponedRefresh = false
        _ = try? await join(minimumValidity: defaultMinimumValidity, rejecting: nil)
    }

    private func publish(_ tokens: TokenSet) -> AccessToken {
        generation += 1
        let token = AccessToken(tokens, generation: generation)
        let fraction = configuration.maximumMarginFraction
        snapshot.withLock { $0 = Snapshot(token: token, tokens: tokens, fraction: fraction) }
        return token
    }

    private func adopt(_ tokens: TokenSet, epoch started: Int64) throws -> AccessToken {
        // A login or logout happened while this refresh ran: its tokens belong to a session that is gone.
        guard started == epoch else {
            throw OAuthError(OAuthError.needsLogin, "\(key) was logged out or logged in again while a refresh ran")
        }
        let token = publish(tokens)
        eventListeners.yield(.refreshed(generation: token.generation, expiresAt: token.expiresAt))
        return token
    }

    /// Whether stored tokens answer the request without a refresh: valid for `minimumValidity` (a
    /// finite one, capped at the configured share of the tokens' lifetime), or — for a 401 —
    /// different from the rejected token and valid for the default margin.
    private func answers(_ tokens: TokenSet, minimumValidity: TimeInterval, rejecting: String?) -> Bool {
        let fraction = configuration.maximumMarginFraction
        if let rejecting {
            return !tokens.accessToken.utf8.elementsEqual(rejecting.utf8)
                && tokens.isValid(for: tokens.margin(configuration.minimumValidity, cappedAt: fraction), at: now())
        }
        return minimumValidity.isFinite && tokens.isValid(for: tokens.margin(minimumValidity, cappedAt: fraction), at: now())
    }

    private func performRefresh(minimumValidity: TimeInterval, rejecting: String?) async throws -> AccessToken {
        defer { inFlight = nil }
        let started = epoch
        // A rotated refresh token that could not be written yet: write it before anything else.
        if pendingWrite != nil, await !flushPendingWrite() {
            if let token = cachedAccessToken(minimumValidity: 0) { return token }
            throw OAuthError(OAuthError.storeUnavailable, "the storage is still not writable; holding the new tokens in memory")
        }
        // Another process may have refreshed already: a plain read, no lease needed to adopt it.
        if let stored = try await loadSession(), stored.session.state == .active,
           answers(stored.session.tokens, minimumValidity: minimumValidity, rejecting: rejecting) {
            return try adopt(stored.session.tokens, epoch: started)
        }
        // Offline: its own outcome, before the lease and the provider — the refresh waits for the network.
        try checkOnline()
        try checkRefreshWindow()
        // A 401 means the token a refresh produced was not usable after all (a server that rejects
        // every new token would otherwise loop).
        if rejecting != nil { recordFutileRefresh() }
        // Taking the lease is a write: a storage that cannot be written fails here, before any
        // refresh token is spent.
        let lease: SessionLease
        do {
            switch try await takeLease(minimumValidity: minimumValidity, rejecting: rejecting) {
            case .lease(let taken): lease = taken
            case .adopt(let tokens): return try adopt(tokens, epoch: started)
            }
        } catch let error as OAuthError where error.code == OAuthError.leaseBusy {
            throw OAuthError(OAuthError.transient, "another process holds the refresh lease of \(key) for too long", underlying: error)
        } catch {
            throw OAuthError(OAuthError.storeUnavailable, "the storage is unavailable; no refresh token was spent", underlying: error)
        }
        let renewal = LeaseRenewal(storage: storage, lease: lease, ttl: configuration.leaseTTL)
        let result: Result<AccessToken, any Error>
        do {
            result = .success(try await refreshHolding(lease, minimumValidity: minimumValidity, rejecting: rejecting, epoch: started))
        } catch {
            result = .failure(error)
        }
        await renewal.stop()
        try? await storage.releaseLease(lease)
        return try result.get()
    }

    private enum LeaseOutcome {
        case lease(SessionLease)
        case adopt(TokenSet)
    }

    /// Takes the refresh lease, waiting for another holder. A storage that announces releases
    /// (`LeaseReleaseNotifying`) lets a waiter re-read the moment the holder is done and adopt its
    /// tokens without the lease (a plain read spends nothing); the lease is taken only when they do
    /// not answer.
    private func takeLease(minimumValidity: TimeInterval, rejecting: String?) async throws -> LeaseOutcome {
        let name = "refresh:\(key)"
        guard let notifying = storage as? any LeaseReleaseNotifying else {
            return .lease(try await storage.acquireLease(name, ttl: configuration.leaseTTL, timeout: configuration.leaseWait))
        }
        let deadline = now().addingTimeInterval(configuration.leaseWait)
        while true {
            let wait = max(0, deadline.timeIntervalSince(now()))
            if let lease = try await notifying.acquireLeaseOrAwaitRelease(name, ttl: configuration.leaseTTL, wait: wait) {
                return .lease(lease)
            }
            if let stored = try await storage.load(key), stored.session.state == .active,
               answers(stored.session.tokens, minimumValidity: minimumValidity, rejecting: rejecting) {
                return .adopt(stored.session.tokens)
            }
            guard now() < deadline else { throw OAuthError(OAuthError.leaseBusy, "lease \(name) is held by another holder") }
        }
    }

    /// The part of a refresh done while holding the lease.
    private func refreshHolding(_ lease: SessionLease, minimumValidity: TimeInterval, rejecting: String?,
                                epoch started: Int64) async throws -> AccessToken {
        // Inside the lease: re-read; never reuse a refresh token read before it.
        guard let stored = try await loadSession() else {
            throw OAuthError(OAuthError.needsLogin, "there is no session for \(key): log in")
        }
        var session = stored.session
        guard session.state == .active else {
            throw OAuthError(OAuthError.needsLogin, "\(key) needs a new login (its refresh token was refused)")
        }
        let known = snapshot.withLock { $0.tokens?.accessToken }
        if known.map({ !session.tokens.accessToken.utf8.elementsEqual($0.utf8) }) ?? true,
           answers(session.tokens, minimumValidity: minimumValidity, rejecting: rejecting) {
            return try adopt(session.tokens, epoch: started)
        }
        let spent = session.tokens
        let fresh: TokenSet
        do {
            fresh = try await refreshWithRetries(session)
        } catch let error as OAuthError where error.code == OAuthError.invalidGrant {
            recordFutileRefresh()
            // Maybe another process rotated the token a moment ago: then its tokens are the answer.
            if let again = try await loadSession(), again.session.state == .active,
               !Self.same(again.session.tokens.refreshToken, spent.refreshToken) {
                return try adopt(again.session.tokens, epoch: started)
            }
            session.state = .needsReauthentication
            _ = try? await storage.save(session, key: key, expectedGeneration: stored.generation, lease: lease)
            snapshot.withLock { $0 = Snapshot() }
            eventListeners.yield(.needsReauthentication)
            throw error
        } catch let error as OAuthError {
            recordFutileRefresh()
            eventListeners.yield(.refreshFailed(error))
            throw error
        }
        // A token already too close to its expiry to use counts toward the loop guard.
        if !fresh.isValid(for: fresh.margin(min(configuration.minimumValidity, 1), cappedAt: configuration.maximumMarginFraction), at: now()) {
            recordFutileRefresh()
        }
        session.tokens = fresh
        // No lost tokens: the rotated refresh token is committed before any caller sees the new
        // access token — with a compare-and-set on the generation read inside the lease, fenced by it.
        do {
            try await storage.save(session, key: key, expectedGeneration: stored.generation, lease: lease)
        } catch {
            // Someone else's tokens landed first (our lease lapsed and another holder committed):
            // theirs win, ours are dropped.
            var reread: StoredSession?? = nil   // nil: the storage could not be read
            do { reread = .some(try await storage.load(key)) } catch {}
            switch reread {
            case .some(.some(let winner)) where winner.generation != stored.generation:
                if winner.session.state == .active { return try adopt(winner.session.tokens, epoch: started) }
                throw OAuthError(OAuthError.needsLogin, "\(key) needs a new login")
            case .some(.none):
                // Logged out meanwhile: the session stays wiped and its tokens are not handed out.
                throw OAuthError(OAuthError.needsLogin, "\(key) was logged out while a refresh ran")
            default:
                // Otherwise keep them, hand them out, and keep trying to write them (in the background,
                // and before any further refresh): never drop a rotated refresh token.
                pendingWrite = (session, stored.generation)
                scheduleWriteRetry()
            }
        }
        return try adopt(fresh, epoch: started)
    }

    /// Writes the tokens a failed write left in memory; `true` once nothing is pending. A
    /// compare-and-set on the generation they were refreshed from: a newer session in the storage
    /// wins, and a session wiped meanwhile (a logout) stays wiped.
    private func flushPendingWrite() async -> Bool {
        guard let pending = pendingWrite else { return true }
        do {
            guard let expected = pending.expectedGeneration else { pendingWrite = nil; return true }
            try await storage.save(pending.session, key: key, expectedGeneration: expected, lease: nil)
        } catch let error as OAuthError where error.code == OAuthError.storageConflict {
            // Superseded (a newer session, or none): nothing of ours to write any more.
        } catch {
            return false
        }
        pendingWrite = nil
        writeRetry = nil
        return true
    }

    /// `true` when rotated tokens are waiting in memory for the storage to take them.
    public var hasPendingWrite: Bool { pendingWrite != nil }

    /// Tries to write tokens a failed write left in memory, for up to `timeout` seconds; `true` once
    /// nothing is pending. A process about to exit (a CLI) calls this: its background retry dies with it.
    public func persistPendingWrite(timeout: TimeInterval = 5) async -> Bool {
        let deadline = now().addingTimeInterval(min(max(timeout, 0), 3600))
        var delay: UInt64 = 50_000_000
        while true {
            if await flushPendingWrite() { return true }
            guard now() < deadline else { return false }
            try? await Task.sleep(nanoseconds: delay)
            delay = min(delay * 2, 1_000_000_000)
        }
    }

    private static func same(_ a: String?, _ b: String?) -> Bool {
        switch (a, b) {
        case (nil, nil): true
        case (let x?, let y?): x.utf8.elementsEqual(y.utf8)
        default: false
        }
    }

    private func scheduleWriteRetry() {
        guard writeRetry == nil else { return }
        writeRetry = Task { [weak self] in
            var delay = 0.25
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
                guard let self else { return }
                if await self.flushPendingWrite() { return }
                delay = min(delay * 2, 30)
            }
        }
    }

    private func loadSession() async throws -> StoredSession? {
        do { return try await storage.load(key) } catch {
            throw OAuthError(OAuthError.storeUnavailable, "cannot read the session of \(key)", underlying: error)
        }
    }

    /// A timed-out grant may have been processed (the refresh token spent, its successor lost in
    /// transit): sending the spent token again could trip reuse detection and revoke the whole token
    /// family. Only failures known to precede processing (no connection, a 5xx or 429 answer) are retried.
    private static func mayHaveReachedTheServer(_ error: OAuthError) -> Bool {
        (error.underlying as? HTTPRequestError)?.code == HTTPRequestError.timedOut
    }

    private func refreshWithRetries(_ session: OAuthSession) async throws -> TokenSet {
        var attempt = 1
        while true {
            do {
                return try await refresher(session)
            } catch let error as OAuthError where error.code == OAuthError.transient && configuration.reachability?.status == .offline {
                // The network went away: no retries burned; the refresh waits for it.
                _ = error
                try checkOnline()
                throw error
            } catch let error as OAuthError where error.code == OAuthError.transient && attempt < configuration.transientAttempts
                        && !Self.mayHaveReachedTheServer(error) {
                let delay = min(max(configuration.backoff, 0) * Double(1 << min(attempt - 1, 16)), 60) * Double.random(in: 0.5...1.0)
                try await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
                attempt += 1
            }
        }
    }
}

/// Keeps a lease alive while a refresh runs: renews it every third of its ttl until stopped. A
/// lease found lost stops the renewals (the fenced commit then fails safely); a storage that could
/// not be reached (a database restarting) is tried again at the next turn — the lease may still be ours.
actor LeaseRenewal {
    private var task: Task<Void, Never>?

    init(storage: any SessionStorage, lease: SessionLease, ttl: TimeInterval) {
        let interval = UInt64(max(ttl / 3, 0.05) * 1_000_000_000)
        task = Task {
            var current = lease
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: interval)
                if Task.isCancelled { return }
                do {
                    current = try await storage.renewLease(current, ttl: ttl)
                } catch let error as OAuthError where error.code == OAuthError.leaseLost {
                    return
                } catch {
                    continue
                }
            }
        }
    }

    func stop() {
        task?.cancel()
        task = nil
    }
}

/// One waiter's continuation, resumed exactly once (by the result or by cancellation).
final class ContinuationBox: @unchecked Sendable {
    private let lock = NSLockLite()
    private var continuation: CheckedContinuation<AccessToken, any Error>?
    private var early: Result<AccessToken, any Error>?

    func install(_ continuation: CheckedContinuation<AccessToken, any Error>) {
        let resumeNow: Result<AccessToken, any Error>? = lock.withLock {
            if let early { return early }
            self.continuation = continuation
            return nil
        }
        if let resumeNow { continuation.resume(with: resumeNow) }
    }

    func resume(with result: Result<AccessToken, any Error>) {
        let continuation: CheckedContinuation<AccessToken, any Error>? = lock.withLock {
            guard let current = self.continuation else {
                if early == nil { early = result }
                return nil
            }
            self.continuation = nil
            return current
        }
        continuation?.resume(with: result)
    }
}

/// The coordinator's event listeners: each `events` stream gets every event.
final class EventListeners: Sendable {
    private let listeners = Mutex<(next: Int, continuations: [Int: AsyncStream<RefreshEvent>.Continuation])>((0, [:]))

    func listen() -> AsyncStream<RefreshEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: RefreshEvent.self, bufferingPolicy: .bufferingNewest(32))
        let id = listeners.withLock { state in
            state.next += 1
            state.continuations[state.next] = continuation
            return state.next
        }
        continuation.onTermination = { [weak self] _ in _ = self?.listeners.withLock { $0.continuations.removeValue(forKey: id) } }
        return stream
    }

    func yield(_ event: RefreshEvent) {
        for continuation in listeners.withLock({ Array($0.continuations.values) }) { continuation.yield(event) }
    }

    deinit { for continuation in listeners.withLock({ Array($0.continuations.values) }) { continuation.finish() } }
}
