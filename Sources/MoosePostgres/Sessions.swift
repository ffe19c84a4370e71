#if MoosePostgres
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth
import MooseCrypto
import PostgresNIO

/// The outcome of one compare-and-set statement.
enum WriteOutcome: Sendable {
    case written(Int64)
    case conflict
    case leaseLost
}

extension PostgresSessionStorage: LeaseReleaseNotifying {
    /// `PostgresStorageConfiguration.leaseLifetime` (5 s by default): a replica lost mid-refresh blocks
    /// the fleet that long, not a coordinator's 30 s `leaseTTL`.
    public var leaseLifetime: TimeInterval? { configuration.leaseLifetime }

    /// Runs a `SessionStorage` method: this module's errors become the contract's `OAuthError`s.
    func contract<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresStorageError {
            throw Self.oauth(error)
        }
    }

    // MARK: - SessionStorage: sessions

    /// The session under `key` (opened with the store's keys) and its generation; `nil` when none is
    /// stored (or only a tombstone). A value that does not authenticate (or does not decode) is
    /// `sessionDamaged` with a `tampered` (`corrupt`) cause — never silently `nil`.
    public func load(_ key: String) async throws -> StoredSession? {
        try await contract {
            try Self.validate(key: key)
            _ = try await keyRing()
            let t = tables
            let row: (generation: Int64, keyID: Int64, sealed: [UInt8])? = try await perform(
                "reading the session \(key)"
            ) { _ in
                let rows = try await self.client.query(
                    """
                    SELECT generation, key_id, sealed FROM \(unescaped: t.sessions) WHERE key = \(key) AND sealed IS NOT NULL
                    """
                ).collect()
                guard let row = rows.first else { return nil }
                let (generation, keyID, sealed) = try row.columns(3).decode((Int64, Int64, ByteBuffer).self)
                return (generation, keyID, Array(sealed.readableBytesView))
            }
            guard let row else { return nil }
            let session: OAuthSession
            do {
                session = try await open(row.sealed, key: key, generation: row.generation, keyID: row.keyID)
            } catch {
                throw Self.damagedRow(error, key: key)
            }
            return StoredSession(session: session, generation: row.generation)
        }
    }

    /// A row that does not open (`tampered`, `corrupt`) as the storage contract's damaged row — that
    /// one key; a login replaces it, a logout removes it. Any other error as it is.
    static func damagedRow(_ error: any Error, key: String) -> any Error {
        guard let error = error as? PostgresStorageError,
            error.code == PostgresStorageError.tampered || error.code == PostgresStorageError.corrupt
        else { return error }
        return OAuthError(
            OAuthError.sessionDamaged,
            "the stored session \(key) cannot be opened (\(error.message)); a new login replaces it, a logout removes it",
            underlying: error)
    }

    /// Compare-and-set in one statement: the row must be at `expectedGeneration` and, with `lease`,
    /// that acquisition must still hold the lease row (locked `FOR SHARE` first). `storageConflict`
    /// or `leaseLost` otherwise.
    @discardableResult
    public func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?, lease: SessionLease?)
        async throws -> Int64
    {
        try await contract {
            try Self.validate(key: key)
            if let lease { try Self.validate(lease) }
            var session = session
            session.updatedAt = Date()
            if let expected = expectedGeneration {
                guard expected > 0, expected < Int64.max else { throw Self.conflict(key, expected: expected) }
                return try await write(
                    session, key: key, lease: lease, expected: expected, next: expected + 1, statement: .update)
            }
            // "Only if nothing is stored": the new generation continues a tombstone's, so read it first.
            for _ in 0..<5 {
                let floor = try await floorGeneration(key)
                guard !floor.live else { throw Self.conflict(key, expected: nil) }
                do {
                    return try await write(
                        session, key: key, lease: lease, expected: floor.generation, next: floor.generation + 1,
                        statement: .insertOverTombstone)
                } catch let error as OAuthError where error.code == OAuthError.storageConflict {
                    continue // a delete or a write moved the floor meanwhile: read it again
                }
            }
            throw Self.conflict(key, expected: nil)
        }
    }

    /// Writes whatever is stored (a login): a compare-and-set on the generation just read, retried
    /// if another write came in between.
    @discardableResult
    public func replace(_ session: OAuthSession, key: String) async throws -> Int64 {
        try await contract {
            try Self.validate(key: key)
            var session = session
            session.updatedAt = Date()
            for _ in 0..<20 {
                let floor = try await floorGeneration(key)
                do {
                    return try await write(
                        session, key: key, lease: nil, expected: floor.generation, next: floor.generation + 1,
                        statement: .replace)
                } catch let error as OAuthError where error.code == OAuthError.storageConflict {
                    continue
                }
            }
            throw OAuthError(
                OAuthError.storeUnavailable, "the session \(key) kept changing under 20 attempts to replace it")
        }
    }

    /// Wipes the sealed value and keeps a tombstone with a higher generation. Always allowed.
    @discardableResult
    public func delete(_ key: String) async throws -> Bool {
        try await contract {
            try Self.validate(key: key)
            _ = try await keyRing()
            let t = tables
            // The secrets go; a tombstone keeps the generation growing (a save prepared before this
            // logout can never land on the next login's session).
            return try await perform("deleting the session \(key)") { _ in
                try await self.client.query(
                    """
                    UPDATE \(unescaped: t.sessions) SET generation = generation + 1, key_id = NULL, sealed = NULL, updated_at = clock_timestamp()
                    WHERE key = \(key) AND sealed IS NOT NULL RETURNING generation
                    """
                ).collect().count > 0
            }
        }
    }

    /// The keys with a stored session, sorted.
    public func keys() async throws -> [String] {
        try await contract {
            _ = try await keyRing()
            let t = tables
            return try await perform("listing sessions") { _ in
                var keys: [String] = []
                for row in try await self.client.query(
                    "SELECT key FROM \(unescaped: t.sessions) WHERE sealed IS NOT NULL"
                ).collect() {
                    keys.append(try row.columns(1).decode(String.self))
                }
                return keys
            }.sorted()
        }
    }

    /// The generation stored under `key` (a tombstone's too; 0 when the key was never written) and
    /// whether a session is stored.
    func floorGeneration(_ key: String) async throws(PostgresStorageError) -> (generation: Int64, live: Bool) {
        _ = try await keyRing()
        let t = tables
        return try await perform("reading the session \(key)") { _ in
            let rows = try await self.client.query(
                """
                SELECT generation, sealed IS NOT NULL FROM \(unescaped: t.sessions) WHERE key = \(key)
                """
            ).collect()
            guard let row = rows.first else { return (0, false) }
            let (generation, live) = try row.columns(2).decode((Int64, Bool).self)
            guard generation > 0, generation < Int64.max else {
                throw PostgresStorageError(
                    PostgresStorageError.corrupt, "the session \(key) has an impossible generation")
            }
            return (generation, live)
        }
    }

    enum WriteStatement { case update, insertOverTombstone, replace }

    /// One compare-and-set: writes `session` at generation `next` only if the row is at `expected`
    /// (live for `update`, absent or a tombstone for `insertOverTombstone`, either for `replace`)
    /// and, with `lease`, only while that acquisition holds it. A data key retired by a rotation in
    /// another replica (foreign key violation) makes it reload the keys and seal again.
    func write(
        _ session: OAuthSession, key: String, lease: SessionLease?, expected: Int64, next: Int64,
        statement: WriteStatement
    ) async throws -> Int64 {
        var ring = try await keyRing()
        var reloaded = false
        while true {
            let (keyID, sealed) = try seal(session, key: key, generation: next, ring: ring)
            let result = await writeOnce(
                key: key, keyID: keyID, sealed: sealed, lease: lease, expected: expected, next: next,
                statement: statement)
            switch result {
            case .failure(let error) where error.sqlState == "23503" && !reloaded:
                ring = try await reloadKeys()
                reloaded = true
            case .failure(let error):
                throw error
            case .success(.written(let generation)):
                return generation
            case .success(.conflict):
                throw Self.conflict(key, expected: statement == .update ? expected : nil)
            case .success(.leaseLost):
                throw Self.leaseLost(lease?.name ?? "")
            }
        }
    }

    private func writeOnce(
        key: String, keyID: Int64, sealed: [UInt8], lease: SessionLease?, expected: Int64, next: Int64,
        statement: WriteStatement
    ) async -> Result<WriteOutcome, PostgresStorageError> {
        do {
            return .success(
                try await perform("writing the session \(key)") { attempt in
                    let result = try await self.runWrite(
                        key: key, keyID: keyID, sealed: sealed, lease: lease, expected: expected,
                        next: next, statement: statement)
                    // A retry after a broken connection: the first attempt may have committed. If the
                    // row holds exactly what we sealed (a random nonce makes it unique), it did.
                    if attempt > 1, case .conflict = result,
                        try await self.holds(key: key, generation: next, sealed: sealed)
                    {
                        return .written(next)
                    }
                    return result
                })
        } catch {
            return .failure(error)
        }
    }

    private func holds(key: String, generation: Int64, sealed: [UInt8]) async throws -> Bool {
        let t = tables
        let rows = try await client.query("SELECT generation, sealed FROM \(unescaped: t.sessions) WHERE key = \(key)")
            .collect()
        guard let row = rows.first else { return false }
        let (stored, bytes) = try row.columns(2).decode((Int64, ByteBuffer?).self)
        return stored == generation && bytes.map { $0.readableBytesView.elementsEqual(sealed) } == true
    }

    private func runWrite(
        key: String, keyID: Int64, sealed: [UInt8], lease: SessionLease?, expected: Int64, next: Int64,
        statement: WriteStatement
    ) async throws -> WriteOutcome {
        let t = tables
        let value = ByteBuffer(bytes: sealed)
        let rows: [PostgresRow]
        switch (statement, lease) {
        case (.update, nil):
            rows = try await client.query(
                """
                UPDATE \(unescaped: t.sessions) SET generation = \(next), key_id = \(keyID), sealed = \(value), updated_at = clock_timestamp()
                WHERE key = \(key) AND generation = \(expected) AND sealed IS NOT NULL RETURNING generation, true
                """
            ).collect()
        case (.update, let lease?):
            // The lease row is locked (FOR SHARE) before the session row: a takeover committed
            // meanwhile is seen (the locking read re-checks the newest row version), and a takeover
            // after this statement waits for it to commit.
            rows = try await client.query(
                """
                WITH lease AS (
                    SELECT 1 FROM \(unescaped: t.leases) WHERE name = \(lease.name) AND holder = \(lease.holder)
                    AND token = \(lease.fencingToken) AND expires_at > clock_timestamp() FOR SHARE
                ), written AS (
                    UPDATE \(unescaped: t.sessions) SET generation = \(next), key_id = \(keyID), sealed = \(value), updated_at = clock_timestamp()
                    WHERE key = \(key) AND generation = \(expected) AND sealed IS NOT NULL AND EXISTS (SELECT 1 FROM lease)
                    RETURNING generation
                )
                SELECT (SELECT generation FROM written), EXISTS (SELECT 1 FROM lease)
                """
            ).collect()
        case (.insertOverTombstone, nil), (.replace, nil):
            let condition = statement == .replace ? "" : " AND s.sealed IS NULL"
            rows = try await client.query(
                """
                INSERT INTO \(unescaped: t.sessions) AS s (key, generation, key_id, sealed, updated_at)
                VALUES (\(key), \(next), \(keyID), \(value), clock_timestamp())
                ON CONFLICT (key) DO UPDATE SET generation = excluded.generation, key_id = excluded.key_id, sealed = excluded.sealed,
                    updated_at = excluded.updated_at
                WHERE s.generation = \(expected)\(unescaped: condition)
                RETURNING generation, true
                """
            ).collect()
        case (.insertOverTombstone, let lease?), (.replace, let lease?):
            let condition = statement == .replace ? "" : " AND s.sealed IS NULL"
            rows = try await client.query(
                """
                WITH lease AS (
                    SELECT 1 FROM \(unescaped: t.leases) WHERE name = \(lease.name) AND holder = \(lease.holder)
                    AND token = \(lease.fencingToken) AND expires_at > clock_timestamp() FOR SHARE
                ), written AS (
                    INSERT INTO \(unescaped: t.sessions) AS s (key, generation, key_id, sealed, updated_at)
                    SELECT \(key), \(next), \(keyID), \(value), clock_timestamp() WHERE EXISTS (SELECT 1 FROM lease)
                    ON CONFLICT (key) DO UPDATE SET generation = excluded.generation, key_id = excluded.key_id, sealed = excluded.sealed,
                        updated_at = excluded.updated_at
                    WHERE s.generation = \(expected)\(unescaped: condition)
                    RETURNING generation
                )
                SELECT (SELECT generation FROM written), EXISTS (SELECT 1 FROM lease)
                """
            ).collect()
        }
        guard let row = rows.first else { return .conflict }
        let (generation, leaseHeld) = try row.columns(2).decode((Int64?, Bool).self)
        if let generation {
            guard generation == next else {
                throw PostgresStorageError(
                    PostgresStorageError.corrupt, "the database reports generation \(generation) after writing \(next)")
            }
            return .written(generation)
        }
        return leaseHeld ? .conflict : .leaseLost
    }

    // MARK: - SessionStorage: leases

    /// Takes the lease with one conditional upsert (expiry by the server's clock), waiting up to
    /// `timeout` — woken by the holder's NOTIFY on release, else polling no later than its expiry.
    public func acquireLease(_ name: String, ttl: TimeInterval, timeout: TimeInterval) async throws -> SessionLease {
        try await contract {
            let holder = try Self.holderID()
            let started = ContinuousClock.now
            let patience = Duration.milliseconds(Int64(max(0, min(timeout.isFinite ? timeout : 0, 86_400)) * 1000))
            var poll = 0.02
            while true {
                try Task.checkCancellation()
                let seen = signals.epoch(name)
                let attempt = try await attemptLease(name, ttl: ttl, holder: holder)
                if case .taken(let lease) = attempt { return lease }
                let elapsed = ContinuousClock.now - started
                guard elapsed < patience, case .busy(let remaining) = attempt else {
                    throw OAuthError(OAuthError.leaseBusy, "lease \(name) is held by another holder")
                }
                let cap = notificationsAreLive ? configuration.pollInterval : min(configuration.pollInterval, poll)
                poll = min(poll * 2, 0.25)
                await signals.wait(
                    name, since: seen,
                    timeout: max(0.001, min(remaining + 0.002, cap, Self.seconds(patience - elapsed))))
            }
        }
    }

    /// One attempt to take the lease; if it is held, waits for its release NOTIFY (or its expiry by
    /// the server's clock, or the poll interval — 0.1 s when notifications are not live — or `wait`)
    /// and returns `nil`: the coordinator re-reads what the holder wrote without queueing for the lease.
    public func acquireLeaseOrAwaitRelease(_ name: String, ttl: TimeInterval, wait: TimeInterval) async throws
        -> SessionLease?
    {
        try await contract {
            let seen = signals.epoch(name)
            switch try await attemptLease(name, ttl: ttl, holder: try Self.holderID()) {
            case .taken(let lease):
                return lease
            case .busy(let remaining):
                let cap = notificationsAreLive ? configuration.pollInterval : min(configuration.pollInterval, 0.1)
                let limit = wait.isFinite ? max(0, min(wait, 86_400)) : 0
                if limit > 0 {
                    await signals.wait(name, since: seen, timeout: max(0.001, min(remaining + 0.002, cap, limit)))
                }
                return nil
            }
        }
    }

    enum LeaseAttempt: Sendable {
        case taken(SessionLease)
        /// Held by another holder for this many more seconds (by the server's clock).
        case busy(Double)
    }

    static func holderID() throws(PostgresStorageError) -> String {
        do { return try SecureRandom.bytes(count: 12).map { String($0, radix: 16) }.joined() } catch {
            throw PostgresStorageError(PostgresStorageError.unavailable, "no randomness for a lease holder id")
        }
    }

    /// One statement: take the lease if it lapsed (or if this holder took it in an attempt whose
    /// answer was lost), else report how long the current holder still has.
    func attemptLease(_ name: String, ttl: TimeInterval, holder: String) async throws -> LeaseAttempt {
        try Self.validate(lease: name)
        try Self.validate(ttl: ttl)
        _ = try await keyRing()
        let t = tables
        let (token, expiresMilliseconds, remainingMilliseconds) = try await perform("taking the lease \(name)") { _ in
            let rows = try await self.client.query(
                """
                WITH taken AS (
                    INSERT INTO \(unescaped: t.leases) AS l (name, holder, token, expires_at)
                    VALUES (\(name), \(holder), 1, clock_timestamp() + \(ttl) * interval '1 second')
                    ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = l.token + 1, expires_at = excluded.expires_at
                    WHERE l.expires_at <= clock_timestamp() OR l.holder = excluded.holder
                    RETURNING token, (extract(epoch FROM expires_at) * 1000)::int8 AS expires_ms
                )
                SELECT token, expires_ms, NULL::int8 FROM taken
                UNION ALL
                SELECT NULL::int8, NULL::int8, greatest(0, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::int8)
                FROM \(unescaped: t.leases) WHERE name = \(name) AND NOT EXISTS (SELECT 1 FROM taken)
                """
            ).collect()
            guard let row = rows.first else { return (Int64?.none, Int64?.none, Int64?.some(0)) }
            return try row.columns(3).decode((Int64?, Int64?, Int64?).self)
        }
        if let token, let expiresMilliseconds {
            guard token > 0 else {
                throw PostgresStorageError(PostgresStorageError.corrupt, "a lease token is not positive")
            }
            return .taken(
                SessionLease(
                    name: name, holder: holder, fencingToken: token,
                    expiresAt: try Self.date(milliseconds: expiresMilliseconds)))
        }
        return .busy(Double(max(0, min(remainingMilliseconds ?? 0, 86_400_000))) / 1000)
    }

    /// Extends the lease by `ttl` from the server's now, if this acquisition still holds it.
    public func renewLease(_ lease: SessionLease, ttl: TimeInterval) async throws -> SessionLease {
        try await contract {
            try Self.validate(lease)
            try Self.validate(ttl: ttl)
            let t = tables
            let expires: Int64? = try await perform("renewing the lease \(lease.name)") { _ in
                let rows = try await self.client.query(
                    """
                    UPDATE \(unescaped: t.leases) SET expires_at = clock_timestamp() + \(ttl) * interval '1 second'
                    WHERE name = \(lease.name) AND holder = \(lease.holder) AND token = \(lease.fencingToken) AND expires_at > clock_timestamp()
                    RETURNING (extract(epoch FROM expires_at) * 1000)::int8
                    """
                ).collect()
                return try rows.first?.columns(1).decode(Int64.self)
            }
            guard let expires else { throw Self.leaseLost(lease.name) }
            return SessionLease(
                name: lease.name, holder: lease.holder, fencingToken: lease.fencingToken,
                expiresAt: try Self.date(milliseconds: expires))
        }
    }

    /// Expires the lease row (its fencing token stays) and notifies waiters in every replica.
    public func releaseLease(_ lease: SessionLease) async throws {
        try await contract {
            try Self.validate(lease)
            let t = tables, channel = configuration.channel
            // Expired, not deleted: the row keeps its token, so fencing tokens keep growing. The
            // NOTIFY is delivered when this statement commits.
            try await perform("releasing the lease \(lease.name)") { _ in
                _ = try await self.client.query(
                    """
                    WITH released AS (
                        UPDATE \(unescaped: t.leases) SET expires_at = 'epoch'
                        WHERE name = \(lease.name) AND holder = \(lease.holder) AND token = \(lease.fencingToken)
                        RETURNING name
                    )
                    SELECT pg_notify(\(channel), name) FROM released
                    """
                ).collect()
            }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    // MARK: - Notifications

    /// Keeps a LISTEN connection open (reconnecting with backoff) and wakes lease waiters on every
    /// NOTIFY. A probe NOTIFY sent through the pool must come back before notifications count as
    /// live: through a pooler in transaction mode it does not, and waiters keep polling quickly.
    func listen() async {
        let endpoint = configuration.listenEndpoint ?? configuration.endpoint
        let channel = configuration.channel
        var delay = 0.1
        var warned = false
        while !Task.isCancelled {
            var connected = false
            do {
                let connection = try await connector.connect(to: endpoint)
                connected = true
                let probe =
                    "moose-probe:"
                    + ((try? SecureRandom.bytes(count: 8))?.map { String($0, radix: 16) }.joined() ?? "x")
                do {
                    try await connection.listen(on: channel) { notifications in
                        signals.signalAll() // anything released while we were not listening
                        let prober = Task {
                            _ = try? await self.client.query("SELECT pg_notify(\(channel), \(probe))").collect()
                            try? await Task.sleep(nanoseconds: 3_000_000_000)
                            if !self.notificationsAreLive, !Task.isCancelled {
                                self.logger.warning(
                                    "moose: no notification arrives on LISTEN at \(endpoint.text) (a pooler in transaction mode?): lease waiters poll; set listen_host/listen_port to PostgreSQL itself"
                                )
                            }
                        }
                        defer { prober.cancel() }
                        for try await notification in notifications {
                            if notification.payload.utf8.elementsEqual(probe.utf8) {
                                state.withLock { $0.listening = true }
                            } else if !notification.payload.hasPrefix("moose-probe:") {
                                signals.signal(notification.payload)
                            }
                        }
                    }
                } catch {}
                try? await connection.close()
            } catch {
                if !warned {
                    logger.warning(
                        "moose: cannot LISTEN at \(endpoint.text): \(connector.classify(error, doing: "listening").error.message); lease waiters poll"
                    )
                    warned = true
                }
            }
            state.withLock { $0.listening = false }
            if connected { delay = 0.1 }
            try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
            delay = min(delay * 2, 5)
        }
    }
}
#endif
