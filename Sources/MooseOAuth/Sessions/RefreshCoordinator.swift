#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
        public var maximumMarginFraction: Double = TokenSet.defaultMaximumMarginFraction
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
        /// How the coordinator waits — the retry backoff, the background retry of a failed store
        /// write, `persistPendingWrite`'s retries, the lease renewals: suspends for that many
        /// seconds, throwing `CancellationError` when its task is cancelled. `nil` (the default) is
        /// `Task.sleep`. Tests pair it with `clock`, so that a wait ends only when the test moves the
        /// clock (MooseTesting's `TestClock`: `clock.read` and `clock.sleep(for:)`).
        public var sleep: (@Sendable (TimeInterval) async throws -> Void)? = nil
        /// The network path (e.g. `SystemReachability()`, started): when it says offline, a refresh
        /// fails at once with `OAuthError.offline` — nothing sent, no refresh token spent, no
        /// retries burned, never "needs login" — and runs by itself as soon as it says online again.
        public var reachability: (any Reachability)? = nil

        /// Defaults.
        public init() {}
    }

    /// The current token as the hot path reads it. (`@usableFromInline`, with `accessToken` and
    /// `cachedAccessToken` `@inlinable`: a valid token is returned in the caller's own code — one
    /// clock read, one lock, two comparisons — with no call into this module and no async frame.)
    @usableFromInline
    struct Snapshot: Sendable {
        @usableFromInline var token: AccessToken?
        var tokens: TokenSet?
        /// The largest margin `token` can be asked for (a share of its lifetime).
        @usableFromInline var marginCap: TimeInterval = .infinity
        /// `token`'s expiry in seconds since 1970 (`+infinity` when unknown).
        @usableFromInline var expiry: TimeInterval = .infinity

        init() {}

        init(token: AccessToken, tokens: TokenSet, fraction: Double) {
            self.token = token
            self.tokens = tokens
            marginCap = tokens.margin(.infinity, cappedAt: fraction)
            expiry = token.expiresAt?.timeIntervalSince1970 ?? .infinity
        }
    }

    /// The storage key of the session this coordinates (a profile name, an account id…).
    public nonisolated let key: String
    // The state below is internal, not private, for the extensions in the other
    // `RefreshCoordinator+….swift` files; nothing outside them touches it.
    let storage: any SessionStorage
    let refresher: @Sendable (OAuthSession) async throws -> TokenSet
    /// Checks every session read from the storage before it is used (a manager for another client
    /// must not adopt, nor renew, a session it did not make): throws to refuse it.
    let admits: (@Sendable (OAuthSession) throws -> Void)?
    let configuration: Configuration
    /// What the hot path reads: the current token, under a lock.
    @usableFromInline nonisolated let snapshot = Mutex(Snapshot())
    @usableFromInline nonisolated let defaultMinimumValidity: TimeInterval
    nonisolated let customClock: (@Sendable () -> Date)?
    /// Every wait: `Configuration.sleep`, or `Task.sleep`.
    nonisolated let sleeper: @Sendable (TimeInterval) async throws -> Void
    var generation: Int64 = 0
    /// Raised by every login and logout: a refresh that started before one publishes nothing after it.
    var epoch: Int64 = 0
    /// The shared refresh, set before its first `await` (`join`).
    var inFlight: Task<AccessToken, any Error>?
    /// When the futile refreshes the loop guard counts happened.
    var recentRefreshes: [Date] = []
    /// Rotated tokens a failed store write left in memory (RefreshCoordinator+PendingWrite.swift).
    var pendingWrite: (session: OAuthSession, expectedGeneration: Int64?)?
    var writeRetry: Task<Void, Never>?
    /// A refresh refused while offline, run when the network is back (RefreshCoordinator+Offline.swift).
    var postponedRefresh = false
    var reachabilityWatch: Task<Void, Never>?

    deinit { reachabilityWatch?.cancel() }
    nonisolated let eventListeners = EventListeners<RefreshEvent>()
    nonisolated let activityListeners = EventListeners<CoordinatorActivity>(buffering: .unbounded)

    /// A coordinator for the session under `key` in `storage`; `refresher` runs the refresh grant
    /// for the stored session it is handed (read inside the refresh lease: never read it again)
    /// and validates what comes back (an `Authorizable`'s `refresh` does both).
    ///
    /// `current`, when the caller already read the session, seeds the cache so the first call
    /// needs no storage read.
    /// (Internal: `SessionEngine.coordinator` is the public way to refresh with the whole session.)
    init(
        key: String, storage: any SessionStorage, configuration: Configuration = Configuration(),
        current: OAuthSession? = nil, admitting admits: (@Sendable (OAuthSession) throws -> Void)? = nil,
        refreshingSession refresher: @escaping @Sendable (OAuthSession) async throws -> TokenSet
    ) {
        self.key = key
        self.storage = storage
        self.refresher = refresher
        self.admits = admits
        self.configuration = configuration
        self.defaultMinimumValidity = configuration.minimumValidity
        self.customClock = configuration.clock
        self.sleeper = configuration.sleep ?? Self.taskSleep
        if let current, current.state == .active {
            let fraction = configuration.maximumMarginFraction
            snapshot.withLock {
                $0 = Snapshot(
                    token: AccessToken(current.tokens, generation: 0), tokens: current.tokens, fraction: fraction)
            }
        }
    }

    /// A coordinator whose `refresher` needs only the stored session's tokens (the package's tests and
    /// workers script a refresh with it; an app passes an `Authorizable`).
    ///
    /// - Parameters:
    ///   - key: the session's name in `storage`; the refresh lease is named after it (`refresh:<key>`).
    ///   - storage: where the session lives; it must be writable for a refresh to run.
    ///   - configuration: margins, lease, retries, loop guard, clock, reachability; defaults otherwise.
    ///   - current: the session when the caller already read it: seeds the cache (an active one only),
    ///     so the first call needs no storage read; `nil` (the default): read on first use.
    ///   - refresher: runs the refresh grant for the stored tokens (read inside the lease) and returns
    ///     the new ones; called once per shared refresh, and again (up to `transientAttempts`) for an
    ///     `OAuthError.transient` failure that cannot have reached the server.
    package init(
        key: String, storage: any SessionStorage, configuration: Configuration = Configuration(),
        current: OAuthSession? = nil, refresher: @escaping @Sendable (TokenSet) async throws -> TokenSet
    ) {
        self.init(
            key: key, storage: storage, configuration: configuration, current: current,
            refreshingSession: { session in
                try await refresher(session.tokens)
            })
    }

    /// A coordinator that refreshes with `authorizer` (its `refresh` validates a new ID token the
    /// way its login did): the one way to build a coordinator for every flow. (`TokenManager` builds
    /// its own from the session's plan through `SessionEngine.coordinator`, on the same single flight.)
    ///
    /// - Parameters:
    ///   - key: the session's name in `storage`; the refresh lease is named after it (`refresh:<key>`).
    ///   - storage: where the session lives; it must be writable for a refresh to run.
    ///   - authorizer: the flow whose `refresh` renews the stored tokens (a refresh grant, or a new
    ///     grant for a flow without a person); a custom token source conforms to `Authorizable`.
    ///   - configuration: margins, lease, retries, loop guard, clock, reachability; defaults otherwise.
    ///   - current: the session when the caller already read it: seeds the cache (an active one only);
    ///     `nil` (the default): read on first use.
    public init(
        key: String, storage: any SessionStorage, authorizer: any Authorizable,
        configuration: Configuration = Configuration(), current: OAuthSession? = nil
    ) {
        self.init(key: key, storage: storage, configuration: configuration, current: current) { (tokens: TokenSet) in
            try await authorizer.refresh(tokens)
        }
    }

    /// Events for UIs: every access makes a new stream that gets every event from then on (each
    /// listener its own copy, up to 32 buffered), ending when the listener stops iterating.
    public nonisolated var events: AsyncStream<RefreshEvent> { eventListeners.listen() }

    /// What the single flight does on the slow path — a caller joining a refresh already running
    /// here, a token read from the storage (another process's or machine's refresh), a grant made
    /// here — for metrics (`CoordinatorMetrics` in MooseObservability) and logs. The hot path (a
    /// valid cached token) announces nothing. Unbounded per listener: every step counts.
    public nonisolated var activity: AsyncStream<CoordinatorActivity> { activityListeners.listen() }

    /// The cached token if valid for `minimumValidity` seconds (at most the configured share of
    /// its lifetime: see `Configuration.maximumMarginFraction`) — a lock read, callable from any
    /// context (the main actor included) without an actor hop.
    ///
    /// - Parameter minimumValidity: seconds the token must still be valid; `nil` (the default): the
    ///   configuration's `minimumValidity`.
    /// - Returns: the cached token, or `nil` when there is none or it expires too soon (never refreshes,
    ///   never reads the storage).
    @inlinable
    public nonisolated func cachedAccessToken(minimumValidity: TimeInterval? = nil) -> AccessToken? {
        let requested = minimumValidity ?? defaultMinimumValidity
        let now = nowSince1970()
        return snapshot.withLock { snapshot in
            snapshot.expiry - now < min(requested, snapshot.marginCap) ? nil : snapshot.token
        }
    }

    /// Seconds since 1970 on the configured clock.
    @usableFromInline
    nonisolated func nowSince1970() -> TimeInterval {
        if let customClock { return customClock().timeIntervalSince1970 }
        #if os(Linux) || os(Android)
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &spec)
        return TimeInterval(spec.tv_sec) + TimeInterval(spec.tv_nsec) / 1e9
        #else
        return Date().timeIntervalSince1970
        #endif
    }

    /// Now, on the configured clock.
    nonisolated func now() -> Date { Date(timeIntervalSince1970: nowSince1970()) }

    /// The default `sleeper`: `Task.sleep` for `seconds` (none for a negative or NaN interval, at
    /// most a billion seconds).
    static func taskSleep(_ seconds: TimeInterval) async throws {
        try await Task.sleep(nanoseconds: seconds > 0 ? UInt64(min(seconds, 1e9) * 1e9) : 0)
    }

    /// A token valid for at least `minimumValidity` seconds (default: the configuration's), refreshing
    /// once for all concurrent callers when needed.
    ///
    /// `nonisolated(nonsending)`: it runs on the caller's executor, so with a valid cached token it is
    /// a lock read — no hop to this actor, none off the main actor. Only a refresh enters the actor.
    ///
    /// - Parameter minimumValidity: seconds the token must still be valid, capped at
    ///   `Configuration.maximumMarginFraction` of its lifetime; `nil` (the default): the configuration's.
    /// - Throws: `OAuthError`: `needsLogin` when there is no session or it needs a new login (its
    ///   refresh token was refused before, or a login or logout happened while the refresh ran);
    ///   `invalidGrant` when the provider refuses the refresh token now (the session is then marked as
    ///   needing a login); `renewalRefused` for a refused renewal of a session without a person (it
    ///   stays active); `sessionDamaged` for a stored row that cannot be opened; `storeUnavailable`
    ///   when the storage cannot be read or written (no refresh token spent); `offline` (the
    ///   configured reachability says so); `refreshLimit` (a refresh loop); `transient` after the
    ///   configured attempts, or when another process holds the lease past `leaseWait`; whatever the
    ///   refresher or the storage's admission check throws otherwise. `CancellationError` when the
    ///   caller's task is cancelled (the shared refresh goes on for the others).
    @inlinable
    public nonisolated(nonsending) func accessToken(minimumValidity: TimeInterval? = nil) async throws -> AccessToken {
        if let cached = cachedAccessToken(minimumValidity: minimumValidity) { return cached }
        return try await joinRefresh(minimumValidity: minimumValidity ?? defaultMinimumValidity)
    }

    /// The slow path of `accessToken`: the shared refresh (`join`), entered on this actor.
    @usableFromInline
    func joinRefresh(minimumValidity: TimeInterval) async throws -> AccessToken {
        try await join(minimumValidity: minimumValidity, rejecting: nil)
    }

    /// For a 401: refreshes only if `rejected` is still the current token; otherwise returns the newer one.
    ///
    /// - Parameter rejected: the token the resource server refused (as this coordinator handed it out).
    /// - Returns: the newer token already current, one another process stored, or a fresh one.
    /// - Throws: `OAuthError`, as `accessToken(minimumValidity:)`; a refresh for a 401 counts toward
    ///   the loop guard (`refreshLimit`).
    public func refresh(rejecting rejected: AccessToken) async throws -> AccessToken {
        if let current = snapshot.withLock({ $0.token }), !current.value.utf8.elementsEqual(rejected.value.utf8) {
            return current
        }
        return try await join(minimumValidity: .infinity, rejecting: rejected.value)
    }

    /// Refreshes now, whatever the cached token's expiry, through the same shared, leased path as
    /// every other refresh (`moose refresh`, a "refresh now" button). Concurrent callers share it.
    ///
    /// - Returns: the new token (or one another process stored while this waited for the lease).
    /// - Throws: `OAuthError`, as `accessToken(minimumValidity:)`.
    @discardableResult
    public func refreshNow() async throws -> AccessToken {
        try await join(minimumValidity: .infinity, rejecting: nil)
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

    // MARK: - Publishing

    /// Makes `tokens` the current token, as the next generation, for the hot path.
    func publish(_ tokens: TokenSet) -> AccessToken {
        generation += 1
        let token = AccessToken(tokens, generation: generation)
        let fraction = configuration.maximumMarginFraction
        snapshot.withLock { $0 = Snapshot(token: token, tokens: tokens, fraction: fraction) }
        return token
    }

    /// Publishes `tokens` and announces them, unless a login or logout happened since `started`.
    func adopt(_ tokens: TokenSet, epoch started: Int64, activity: CoordinatorActivity? = nil) throws -> AccessToken {
        // A login or logout happened while this refresh ran: its tokens belong to a session that is gone.
        guard started == epoch else {
            throw OAuthError(OAuthError.needsLogin, "\(key) was logged out or logged in again while a refresh ran")
        }
        let token = publish(tokens)
        if let activity { activityListeners.yield(activity) }
        eventListeners.yield(.refreshed(generation: token.generation, expiresAt: token.expiresAt))
        return token
    }

    /// Whether stored tokens answer the request without a refresh: valid for `minimumValidity` (a
    /// finite one, capped at the configured share of the tokens' lifetime), or — for a 401 —
    /// different from the rejected token and valid for the default margin.
    func answers(_ tokens: TokenSet, minimumValidity: TimeInterval, rejecting: String?) -> Bool {
        let fraction = configuration.maximumMarginFraction
        if let rejecting {
            return !tokens.accessToken.utf8.elementsEqual(rejecting.utf8)
                && tokens.isValidLongEnough(configuration.minimumValidity, maximumMarginFraction: fraction, at: now())
        }
        return minimumValidity.isFinite
            && tokens.isValidLongEnough(minimumValidity, maximumMarginFraction: fraction, at: now())
    }
}
