#if MoosePostgres
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import Logging
import MooseCrypto
public import MooseResourceServer
import PostgresNIO
import Synchronization

/// A DPoP replay cache shared by every replica of a resource server (RFC 9449 §11.1): a proof's `jti`
/// accepted by one replica is refused by all of them, for as long as the proof could be accepted.
///
/// One table, `<schema>.dpop_proofs` (the SHA-256 of each key, when it may be forgotten, and the
/// SHA-256 of its proof key's thumbprint), created on first use if it is missing (`CREATE TABLE IF NOT
/// EXISTS`: the database user needs that right once, or create it beforehand — the statements are in
/// docs/resource-server.md). Independent of the session store:
/// it needs no master key, and a resource server that stores no session can use it alone.
///
/// Each check is one `INSERT … ON CONFLICT` round trip: a key not held (or held past its expiry) is
/// recorded and is a first use; a key still held is a replay. A check that cannot be made (the
/// database down past `connect_timeout`) throws, and the resource server refuses the request as
/// `temporarilyUnavailable` — never accepts a proof unchecked. Expired rows are deleted now and then
/// (at most once a minute per process).
///
/// One proof key cannot crowd out the others: each row records the SHA-256 of its proof key's JWK
/// thumbprint (column `holder`), and the same statement counts that key's unexpired rows before it
/// inserts. A key holding `maximumEntriesPerKey` of them gets `DPoPReplayQuotaExceeded` (its request
/// only is refused, 503) until some expire; no row is forgotten early, which would reopen the replay.
/// Concurrent proofs of one key may pass the count together, so a key can exceed its quota by the
/// number of its checks in flight. A table made by an older Moose gets the column and its index on
/// first use (`ADD COLUMN IF NOT EXISTS`, `CREATE INDEX IF NOT EXISTS`, only when missing); a database
/// user that may not alter it keeps the old table working, without the quota (a warning is logged).
///
/// ```swift
/// let replays = try PostgresDPoPReplayCache(url: "postgres://api@db.internal/api?sslmode=verify-full")
/// Task { await replays.run() }            // the connection pool, for as long as the server runs
/// let server = ResourceServer(configuration: configuration, keys: keys, replayCache: replays)
/// ```
public final class PostgresDPoPReplayCache: DPoPReplayCache {
    /// The connection settings (`description` is the redacted URL).
    public let configuration: PostgresStorageConfiguration
    let connector: Connector
    let client: PostgresClient
    let table: String
    /// The most unexpired rows one proof key may hold.
    let maximumEntriesPerKey: Int
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var tableReady = false
        /// Whether the table has the `holder` column (and so the per-key quota is enforced).
        var holders = false
        var nextSweep = Date.distantPast
    }

    /// A cache on the database `configuration` names (its `schema` holds the table). Makes no
    /// connection: `run()` runs the pool, and the first check creates the table if it is missing.
    ///
    /// - Parameters:
    ///   - configuration: the database; its `schema` holds the `dpop_proofs` table.
    ///   - maximumEntriesPerKey: the most unexpired rows one proof key (JWK thumbprint) may hold
    ///     (default 4,000, at least 1): about 60 proofs a second with the default 66 s proof window.
    ///   - logger: background messages; none by default.
    /// - Throws: `PostgresStorageError.invalidConfiguration` (also for an unreadable `sslrootcert`).
    public init(
        configuration: PostgresStorageConfiguration, maximumEntriesPerKey: Int = 4_000, logger: Logger? = nil
    ) throws(PostgresStorageError) {
        let configuration = try configuration.validated()
        self.configuration = configuration
        self.maximumEntriesPerKey = min(max(1, maximumEntriesPerKey), Int(Int32.max))
        let logger = logger ?? Logger(label: "moose.postgres.dpop", factory: { _ in SwiftLogNoOpLogHandler() })
        self.logger = logger
        connector = try Connector(configuration, logger: logger)
        client = PostgresClient(configuration: connector.clientConfiguration(), backgroundLogger: logger)
        table = Tables(schema: configuration.schema).quotedSchema + ".dpop_proofs"
    }

    /// A cache for a `postgres://` URL (see `PostgresStorageConfiguration` for its parameters).
    ///
    /// - Parameters:
    ///   - url: a `postgres://` or `postgresql://` URL, with its query parameters.
    ///   - maximumEntriesPerKey: the most unexpired rows one proof key (JWK thumbprint) may hold
    ///     (default 4,000, at least 1).
    ///   - logger: background messages; none by default.
    /// - Throws: `PostgresStorageError.invalidConfiguration`, naming the part of the URL that is wrong.
    public convenience init(url: String, maximumEntriesPerKey: Int = 4_000, logger: Logger? = nil)
        throws(PostgresStorageError)
    {
        try self.init(
            configuration: PostgresStorageConfiguration(url: url), maximumEntriesPerKey: maximumEntriesPerKey,
            logger: logger)
    }

    /// Runs the connection pool until the calling task is cancelled.
    public func run() async {
        await client.run()
    }

    /// Records `key` (its SHA-256) until `expiry`, attributed to no proof key: `true` the first time,
    /// `false` while an earlier record of it lasts. Throws `PostgresStorageError` when the database
    /// cannot answer in time.
    public func firstUse(of key: String, until expiry: Date) async throws -> Bool {
        try await firstUse(of: key, until: expiry, proofKey: nil)
    }

    /// Records `key` (its SHA-256) until `expiry` for the proof key whose JWK thumbprint is `proofKey`:
    /// `true` the first time, `false` while an earlier record of it lasts (whatever the key holds).
    /// Throws `DPoPReplayQuotaExceeded` when that key already holds `maximumEntriesPerKey` unexpired
    /// rows (counted in the same statement that inserts); `PostgresStorageError` when the database
    /// cannot answer in time. `proofKey` `nil`, or a table without the `holder` column: no quota.
    public func firstUse(of key: String, until expiry: Date, proofKey: String?) async throws -> Bool {
        let digest = ByteBuffer(bytes: DigestAlgorithm.sha256.hash(Array(key.utf8)))
        let milliseconds = Int64(max(0, min(expiry.timeIntervalSince1970, 32_503_680_000)) * 1000)
        try await prepareTable()
        let table = self.table
        let first: Bool
        if let proofKey, state.withLock({ $0.holders }) {
            let holder = ByteBuffer(bytes: DigestAlgorithm.sha256.hash(Array(proofKey.utf8)))
            let limit = Int64(maximumEntriesPerKey)
            // One statement, one snapshot: `quota` counts the key's unexpired rows (no more than the
            // limit), `recorded` inserts only under it, `replay` says whether the key was held before.
            let (recorded, held, replay) = try await perform("recording a DPoP proof") { client in
                let rows = try await client.query(
                    """
                    WITH quota AS (
                        SELECT count(*) AS held FROM (SELECT 1 FROM \(unescaped: table)
                            WHERE holder = \(holder) AND expires_at > clock_timestamp() LIMIT \(limit)) AS mine
                    ), recorded AS (
                        INSERT INTO \(unescaped: table) AS prior (digest, expires_at, holder)
                        SELECT \(digest), to_timestamp(\(milliseconds)::float8 / 1000), \(holder)
                        FROM quota WHERE quota.held < \(limit)
                        ON CONFLICT (digest) DO UPDATE SET expires_at = EXCLUDED.expires_at, holder = EXCLUDED.holder
                        WHERE prior.expires_at <= clock_timestamp()
                        RETURNING 1
                    )
                    SELECT (SELECT count(*) FROM recorded), (SELECT held FROM quota),
                        EXISTS (SELECT 1 FROM \(unescaped: table) WHERE digest = \(digest)
                            AND expires_at > clock_timestamp())
                    """
                ).collect()
                guard let row = rows.first else { return (false, Int64(0), false) }
                let (recorded, held, replay) = try row.decode((Int64, Int64, Bool).self)
                return (recorded == 1, held, replay)
            }
            if !recorded, !replay, held >= limit {
                throw DPoPReplayQuotaExceeded(held: Int(held), share: maximumEntriesPerKey)
            }
            first = recorded
        } else {
            first = try await perform("recording a DPoP proof") { client in
                try await client.query(
                    """
                    INSERT INTO \(unescaped: table) AS held (digest, expires_at)
                    VALUES (\(digest), to_timestamp(\(milliseconds)::float8 / 1000))
                    ON CONFLICT (digest) DO UPDATE SET expires_at = EXCLUDED.expires_at
                    WHERE held.expires_at <= clock_timestamp()
                    RETURNING 1
                    """
                ).collect().count == 1
            }
        }
        await sweepIfDue()
        return first
    }

    /// Creates the table (and its index) once per process, if it is missing; gives a table made by an
    /// older Moose the `holder` column and its index, if missing and allowed (else: no quota).
    private func prepareTable() async throws {
        guard !state.withLock({ $0.tableReady }) else { return }
        let table = self.table, schema = Tables(schema: configuration.schema).quotedSchema
        try await perform("creating the DPoP proof table") { client in
            _ = try await client.query("CREATE SCHEMA IF NOT EXISTS \(unescaped: schema)").collect()
            _ = try await client.query(
                """
                CREATE TABLE IF NOT EXISTS \(unescaped: table) (digest bytea PRIMARY KEY CHECK (length(digest) = 32),
                    expires_at timestamptz NOT NULL, holder bytea)
                """
            ).collect()
        }
        var (hasColumn, hasIndex) = try await holderColumnAndIndex()
        if !(hasColumn && hasIndex) {
            // A table from before the quota (or just made): altering it needs its owner's rights.
            let needsColumn = !hasColumn
            do {
                try await perform("adding the DPoP proof table's holder column") { client in
                    if needsColumn {
                        _ = try await client.query(
                            "ALTER TABLE \(unescaped: table) ADD COLUMN IF NOT EXISTS holder bytea"
                        ).collect()
                    }
                    _ = try await client.query(
                        """
                        CREATE INDEX IF NOT EXISTS dpop_proofs_holder ON \(unescaped: table) (holder, expires_at)
                            WHERE holder IS NOT NULL
                        """
                    ).collect()
                }
                (hasColumn, hasIndex) = (true, true)
            } catch {
                // Another replica may have added them meanwhile; else the table works as before, without the
                // quota (counting without the index would scan the table on every proof).
                (hasColumn, hasIndex) = (try? await holderColumnAndIndex()) ?? (false, false)
                if !(hasColumn && hasIndex) {
                    logger.warning(
                        "the DPoP replay table lacks its holder column or index, and they could not be added: no per-key quota",
                        metadata: ["error": "\(error)"])
                }
            }
        }
        let holders = hasColumn && hasIndex
        state.withLock {
            $0.tableReady = true
            $0.holders = holders
        }
    }

    /// Whether the table has the `holder` column, and its index.
    private func holderColumnAndIndex() async throws(PostgresStorageError) -> (Bool, Bool) {
        let table = self.table
        let index = Tables(schema: configuration.schema).quotedSchema + ".dpop_proofs_holder"
        return try await perform("looking at the DPoP proof table") { client in
            let rows = try await client.query(
                """
                SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(\(table))
                    AND attname = 'holder' AND NOT attisdropped), to_regclass(\(index)) IS NOT NULL
                """
            ).collect()
            guard let row = rows.first else { return (false, false) }
            return try row.decode((Bool, Bool).self)
        }
    }

    /// Deletes rows past their expiry, at most once a minute per process; a failure is left for the next time.
    private func sweepIfDue() async {
        let now = Date()
        let due = state.withLock { state -> Bool in
            guard now >= state.nextSweep else { return false }
            state.nextSweep = now.addingTimeInterval(60)
            return true
        }
        guard due else { return }
        let table = self.table
        _ = try? await perform("forgetting expired DPoP proofs") { client in
            try await client.query("DELETE FROM \(unescaped: table) WHERE expires_at <= clock_timestamp()").collect()
                .count
        }
    }

    /// Runs `body` within `connect_timeout`; every failure becomes a `PostgresStorageError` free of secrets.
    private func perform<T: Sendable>(_ what: String, _ body: @escaping @Sendable (PostgresClient) async throws -> T)
        async throws(PostgresStorageError) -> T
    {
        let client = self.client
        do {
            return try await Deadline.run(within: .milliseconds(Int64(configuration.connectTimeout * 1000))) {
                try await body(client)
            }
        } catch is DeadlineExceeded {
            throw PostgresStorageError(
                PostgresStorageError.unavailable,
                "\(what) (\(configuration.redactedURL)): no answer within \(Connector.seconds(configuration.connectTimeout)) (connect_timeout)"
            )
        } catch {
            throw connector.classify(error, doing: what).error
        }
    }
}
#endif
