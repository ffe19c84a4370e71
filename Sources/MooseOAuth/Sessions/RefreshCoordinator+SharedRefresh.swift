#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
import MooseJWT

/// The shared refresh: one task for every caller, the lease, the refresh grant with its retries,
/// and the fenced commit.
extension RefreshCoordinator {
    /// The lease lifetime: the configured `leaseTTL`, or the storage's shorter `leaseLifetime`.
    var leaseTTL: TimeInterval {
        guard let preferred = storage.leaseLifetime, preferred.isFinite, preferred > 0 else {
            return configuration.leaseTTL
        }
        return min(configuration.leaseTTL, max(preferred, 0.1))
    }

    /// Joins the one shared refresh, starting it when none runs.
    func join(minimumValidity: TimeInterval, rejecting: String?) async throws -> AccessToken {
        let task: Task<AccessToken, any Error>
        if let running = inFlight {
            task = running
            activityListeners.yield(.joined)
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
            throw OAuthError(
                OAuthError.refreshLimit,
                "\(recentRefreshes.count) futile refreshes of \(key) in \(Int64(saturating: configuration.refreshWindow)) s: refusing another (a refresh loop?)"
            )
        }
    }

    /// Counts a refresh that gave no usable token toward the loop guard.
    private func recordFutileRefresh() { recentRefreshes.append(now()) }

    private func performRefresh(minimumValidity: TimeInterval, rejecting: String?) async throws -> AccessToken {
        defer { inFlight = nil }
        let started = epoch
        // A rotated refresh token that could not be written yet: write it before anything else.
        if pendingWrite != nil, await !flushPendingWrite() {
            if let token = cachedAccessToken(minimumValidity: 0) { return token }
            throw OAuthError(
                OAuthError.storeUnavailable, "the storage is still not writable; holding the new tokens in memory")
        }
        // Another process may have refreshed already: a plain read, no lease needed to adopt it.
        if let stored = try await loadSession(), stored.session.state == .active,
            answers(stored.session.tokens, minimumValidity: minimumValidity, rejecting: rejecting)
        {
            return try adopt(stored.session.tokens, epoch: started, activity: .read)
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
            case .adopt(let tokens): return try adopt(tokens, epoch: started, activity: .read)
            }
        } catch let error as OAuthError where error.code == OAuthError.leaseBusy {
            throw OAuthError(
                OAuthError.transient, "another process holds the refresh lease of \(key) for too long",
                underlying: error)
        } catch let error as OAuthError
            where error.code == OAuthError.sessionDamaged || error.code == OAuthError.needsLogin
        {
            throw error
        } catch {
            throw OAuthError(
                OAuthError.storeUnavailable, "the storage is unavailable; no refresh token was spent", underlying: error
            )
        }
        let renewal = LeaseRenewal(storage: storage, lease: lease, ttl: leaseTTL, sleep: sleeper)
        let result: Result<AccessToken, any Error>
        do {
            result = .success(
                try await refreshHolding(lease, minimumValidity: minimumValidity, rejecting: rejecting, epoch: started))
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
            return .lease(try await storage.acquireLease(name, ttl: leaseTTL, timeout: configuration.leaseWait))
        }
        let deadline = now().addingTimeInterval(configuration.leaseWait)
        while true {
            let wait = max(0, deadline.timeIntervalSince(now()))
            if let lease = try await notifying.acquireLeaseOrAwaitRelease(name, ttl: leaseTTL, wait: wait) {
                return .lease(lease)
            }
            if let stored = try await loadSession(), stored.session.state == .active,
                answers(stored.session.tokens, minimumValidity: minimumValidity, rejecting: rejecting)
            {
                return .adopt(stored.session.tokens)
            }
            guard now() < deadline else {
                throw OAuthError(OAuthError.leaseBusy, "lease \(name) is held by another holder")
            }
        }
    }

    /// The part of a refresh done while holding the lease.
    private func refreshHolding(
        _ lease: SessionLease, minimumValidity: TimeInterval, rejecting: String?,
        epoch started: Int64
    ) async throws -> AccessToken {
        // Inside the lease: re-read; never reuse a refresh token read before it.
        guard let stored = try await loadSession() else {
            throw OAuthError(OAuthError.needsLogin, "there is no session for \(key): log in")
        }
        var session = stored.session
        guard session.canRenew else {
            throw OAuthError(OAuthError.needsLogin, "\(key) needs a new login (its refresh token was refused)")
        }
        let known = snapshot.withLock { $0.tokens?.accessToken }
        if known.map({ !session.tokens.accessToken.utf8.elementsEqual($0.utf8) }) ?? true,
            answers(session.tokens, minimumValidity: minimumValidity, rejecting: rejecting)
        {
            return try adopt(session.tokens, epoch: started, activity: .read)
        }
        let spent = session.tokens
        // An earlier refresh of this very refresh token that never committed (its process was killed
        // after sending it); then record this one before sending it (RefreshCoordinator+Rotation.swift).
        let interrupted = Self.interruptedRotation(of: session)
        var generation = stored.generation
        (session, generation) = try await recordRotation(of: session, generation: generation, lease: lease)
        let fresh: TokenSet
        do {
            fresh = try await refreshWithRetries(session)
        } catch let error as OAuthError where error.code == OAuthError.invalidGrant && !session.renewsWithoutAPerson {
            recordFutileRefresh()
            // Maybe another process rotated the token a moment ago: then its tokens are the answer. A
            // refresher whose lease lapsed while its refresh of this very token was on its way (its
            // record was here before ours) may have been answered first: its commit is awaited.
            if let tokens = try await successor(of: spent, otherSentAt: interrupted) {
                return try adopt(tokens, epoch: started, activity: .read)
            }
            session.state = .needsReauthentication
            session.attributes[Self.rotationAttribute] = nil
            _ = try? await storage.save(session, key: key, expectedGeneration: generation, lease: lease)
            snapshot.withLock { $0 = Snapshot() }
            eventListeners.yield(.needsReauthentication)
            throw interrupted != nil ? Self.refusedAfterInterruption(error, key: key) : error
        } catch let error as OAuthError {
            // Only a refused refresh token ends a session. A session renewed without a person keeps
            // going: this attempt failed, the next call asks its token source again.
            recordFutileRefresh()
            await clearRotationRecord(of: session, generation: generation, lease: lease, after: error)
            let reported = error.code == OAuthError.invalidGrant ? Self.renewalRefused(error, key: key) : error
            eventListeners.yield(.refreshFailed(reported))
            throw reported
        }
        // A token already too close to its expiry to use counts toward the loop guard.
        if !fresh.isValid(
            for: fresh.margin(min(configuration.minimumValidity, 1), cappedAt: configuration.maximumMarginFraction),
            at: now())
        {
            recordFutileRefresh()
        }
        session.tokens = fresh
        session.state = .active // a renewal without a person that an earlier version had marked
        session.attributes[Self.rotationAttribute] = nil // committed with the tokens it recorded
        // A refresh that brings an ID token names the user afresh (display names only): a device login
        // without one was named from UserInfo, or not at all, until now.
        if let idToken = fresh.idToken, let claims = try? JWT(compact: idToken).claims {
            session.attributes.merge(SessionSummary.attributes(from: claims)) { $1 }
        }
        // No lost tokens: the rotated refresh token is committed before any caller sees the new
        // access token — with a compare-and-set on the generation read inside the lease, fenced by it.
        do {
            try await storage.save(session, key: key, expectedGeneration: generation, lease: lease)
        } catch {
            let leaseLapsed = (error as? OAuthError)?.code == OAuthError.leaseLost
            if let theirs = try await commitRefused(
                session, spent: spent, generation: generation, leaseLapsed: leaseLapsed, epoch: started)
            {
                return theirs
            }
        }
        return try adopt(fresh, epoch: started, activity: .granted)
    }

    /// The commit of `session` (the refresh of `spent`, read at `generation`) was refused: the tokens
    /// to hand out instead, or `nil` when ours stand (committed over a lapsed lease, or kept in memory
    /// and written in the background — never a rotated refresh token dropped). `leaseLapsed`: the
    /// storage refused the write because our lease had lapsed, not because it could not write.
    private func commitRefused(
        _ session: OAuthSession, spent: TokenSet, generation: Int64, leaseLapsed: Bool,
        epoch started: Int64
    ) async throws -> AccessToken? {
        // Someone else's tokens landed first (our lease lapsed and another holder committed):
        // theirs win, ours are dropped.
        var reread: StoredSession?? = nil // nil: the storage could not be read
        do { reread = .some(try await storage.load(key)) } catch {}
        switch reread {
        case .some(.some(let other))
        where Self.same(other.session.tokens.refreshToken, spent.refreshToken)
            && (other.generation != generation || leaseLapsed):
            // Our lease lapsed (and maybe another holder took it), but nobody committed a successor
            // of the refresh token we spent: the provider answered us first, so ours are the live
            // tokens (any other refresh is refused, or its answer waits for ours). Written at once,
            // over any other holder's record, by compare-and-set alone — before they are handed out.
            switch await commitOverLapsedLease(session, spent: spent.refreshToken, over: other) {
            case .committed: break
            case .superseded(let winner) where winner.session.state == .active:
                return try adopt(winner.session.tokens, epoch: started, activity: .granted)
            case .superseded: throw OAuthError(OAuthError.needsLogin, "\(key) needs a new login")
            case .loggedOut: throw OAuthError(OAuthError.needsLogin, "\(key) was logged out while a refresh ran")
            case .unwritable(let written, let replacing):
                pendingWrite = (written, replacing)
                scheduleWriteRetry()
            }
        case .some(.some(let winner)) where winner.generation != generation:
            // A grant was made here (its tokens lost the compare-and-set): counted as one.
            if winner.session.state == .active {
                return try adopt(winner.session.tokens, epoch: started, activity: .granted)
            }
            throw OAuthError(OAuthError.needsLogin, "\(key) needs a new login")
        case .some(.none):
            // Logged out meanwhile: the session stays wiped and its tokens are not handed out.
            throw OAuthError(OAuthError.needsLogin, "\(key) was logged out while a refresh ran")
        default:
            // Otherwise keep them, hand them out, and keep trying to write them (in the background,
            // and before any further refresh): never drop a rotated refresh token.
            pendingWrite = (session, generation)
            scheduleWriteRetry()
        }
        return nil
    }

    /// What became of tokens written over a lapsed lease.
    private enum LapsedCommit {
        case committed
        case superseded(StoredSession)
        case loggedOut
        /// Not written: the session to write and the generation it replaces.
        case unwritable(OAuthSession, Int64)
    }

    /// Writes `session` (whose tokens are the provider's answer to `spent`, the refresh token still
    /// stored) over `other` without a lease, by compare-and-set alone, retrying a few conflicts while
    /// the stored refresh token stays `spent`.
    private func commitOverLapsedLease(_ session: OAuthSession, spent: String?, over other: StoredSession) async
        -> LapsedCommit
    {
        var current = other
        var written = session
        written.state = .active // over a refusal caused by our own rotation
        written.attributes[Self.rotationAttribute] = nil
        for _ in 0..<5 {
            guard Self.same(current.session.tokens.refreshToken, spent) else { return .superseded(current) }
            do {
                _ = try await storage.save(written, key: key, expectedGeneration: current.generation, lease: nil)
                return .committed
            } catch {
                let reread: StoredSession?
                do { reread = try await storage.load(key) } catch { return .unwritable(written, current.generation) }
                guard let reread else { return .loggedOut }
                current = reread
            }
        }
        return .unwritable(written, current.generation)
    }

    /// The stored session. A damaged row is final for this session (`sessionDamaged`, announced as
    /// `needsReauthentication`: a login replaces it); any other failure is `storeUnavailable`.
    func loadSession() async throws -> StoredSession? {
        let stored: StoredSession?
        do {
            stored = try await storage.load(key)
        } catch let error as OAuthError where error.code == OAuthError.sessionDamaged {
            snapshot.withLock { $0 = Snapshot() }
            eventListeners.yield(.needsReauthentication)
            throw error
        } catch {
            throw OAuthError(OAuthError.storeUnavailable, "cannot read the session of \(key)", underlying: error)
        }
        if let stored, let admits { try admits(stored.session) }
        return stored
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
            } catch let error as OAuthError
                where error.code == OAuthError.transient && configuration.reachability?.status == .offline
            {
                // The network went away: no retries burned; the refresh waits for it.
                _ = error
                try checkOnline()
                throw error
            } catch let error as OAuthError
                where error.code == OAuthError.transient && attempt < configuration.transientAttempts
                && !Self.mayHaveReachedTheServer(error)
            {
                let delay =
                    min(max(configuration.backoff, 0) * Double(1 << min(attempt - 1, 16)), 60)
                    * Double.random(in: 0.5...1.0)
                try await sleeper(delay)
                attempt += 1
            }
        }
    }

    /// `invalid_grant` for a renewal without a person, as an error of that attempt.
    static func renewalRefused(_ error: OAuthError, key: String) -> OAuthError {
        OAuthError(
            OAuthError.renewalRefused,
            "the provider refused the renewal of \(key) (the workload's identity token or the client's grant): "
                + "this attempt failed, the session stays and the next call asks again",
            oauthError: error.oauthError, errorDescription: error.errorDescription, errorURI: error.errorURI,
            status: error.status, underlying: error)
    }

    static func same(_ a: String?, _ b: String?) -> Bool {
        switch (a, b) {
        case (nil, nil): true
        case (let x?, let y?): x.utf8.elementsEqual(y.utf8)
        default: false
        }
    }
}
