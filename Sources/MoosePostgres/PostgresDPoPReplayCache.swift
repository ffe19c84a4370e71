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
/// One table, `<schema>.dpop_proofs` (the SHA-256 of each key and when it may be forgotten), created on
/// first use if it is missing (`CREATE TABLE IF NOT EXISTS`: the database user needs that right once,
/// or create it beforehand — the statement is in docs/postgres.md). Independent of the session store:
/// it needs no master key, and a resource server that stores no session can use it alone.
///
/// Each check is one `INSERT … ON CONFLICT` round trip: a key not held (or held past its expiry) is
/// recorded and is a first use; a key still held is a replay. A check that cannot be made (the
/// database down past `connect_timeout`) throws, and the resource server refuses the request as
/// `temporarilyUnavailable` — never accepts a proof unchecked. Expired rows are deleted now and then
/// (at most once a minute per process).
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
    private let state = Mutex(State())

    private struct State {
        var tableReady = false
        var nextSweep = Date.distantPast
    }

    /// A cache on the database `configuration` names (its `schema` holds the table). Makes no
    /// connection: `run()` runs the pool, and the first check creates the table if it is missing.
    ///
    /// - Parameters:
    ///   - configuration: the database; its `schema` holds the `dpop_proofs` table.
    ///   - logger: background messages; none by default.
    /// - Throws: `PostgresStorageError.invalidConfiguration` (also for an unreadable `sslrootcert`).
    public init(configuration: PostgresStorageConfiguration, logger: Logger? = nil) throws(PostgresStorageError) {
        let configuration = try configuration.validated()
        self.configuration = configuration
        let logger = logger ?? Logger(label: "moose.postgres.dpop", factory: { _ in SwiftLogNoOpLogHandler() })
        connector = try Connector(configuration, logger: logger)
        client = PostgresClient(configuration: connector.clientConfiguration(), backgroundLogger: logger)
        table = Tables(schema: configuration.schema).quotedSchema + ".dpop_proofs"
    }

    /// A cache for a `postgres://` URL (see `PostgresStorageConfiguration` for its parameters).
    ///
    /// - Parameters:
    ///   - url: a `postgres://` or `postgresql://` URL, with its query parameters.
    ///   - logger: background messages; none by default.
    /// - Throws: `PostgresStorageError.invalidConfiguration`, naming the part of the URL that is wrong.
    public convenience init(url: String, logger: Logger? = nil) throws(PostgresStorageError) {
        try self.init(configuration: PostgresStorageConfiguration(url: url), logger: logger)
    }

    /// Runs the connection pool until the calling task is cancelled.
    public func run() async {
        await client.run()
    }

    /// Records `key` (its SHA-256) until `expiry`: `true` the first time, `false` while an earlier
    /// record of it lasts. Throws `PostgresStorageError` when the database cannot answer in time.
    public func firstUse(of key: String, until expiry: Date) async throws -> Bool {
        let digest = ByteBuffer(bytes: DigestAlgorithm.sha256.hash(Array(key.utf8)))
        let milliseconds = Int64(max(0, min(expiry.timeIntervalSince1970, 32_503_680_000)) * 1000)
        try await prepareTable()
        let table = self.table
        let inserted = try await perform("recording a DPoP proof") { client in
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
        await sweepIfDue()
        return inserted
    }

    /// Creates the table (and its expiry index) once per process, if it is missing.
    private func prepareTable() async throws {
        guard !state.withLock({ $0.tableReady }) else { return }
        let table = self.table, schema = Tables(schema: configuration.schema).quotedSchema
        try await perform("creating the DPoP proof table") { client in
            _ = try await client.query("CREATE SCHEMA IF NOT EXISTS \(unescaped: schema)").collect()
            _ = try await client.query(
                """
                CREATE TABLE IF NOT EXISTS \(unescaped: table) (digest bytea PRIMARY KEY CHECK (length(digest) = 32),
                    expires_at timestamptz NOT NULL)
                """
            ).collect()
        }
        state.withLock { $0.tableReady = true }
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
