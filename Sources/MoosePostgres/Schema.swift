#if MoosePostgres
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import MooseCrypto
import MooseSealing
import PostgresNIO

/// The data keys this process knows, unwrapped, and which one seals new values.
struct KeyRing: Sendable {
    let storeID: [UInt8]
    var master: SecretKey
    var dataKeys: [Int64: SecretKey]
    var currentKeyID: Int64
}

/// One forward-only migration: its version, what it does, and its statements (run in the
/// transaction that bumps the version; a crash leaves the old schema or the new one).
struct Migration: Sendable {
    let version: Int32
    let description: String
    let statements: @Sendable (Tables) -> [String]
}

/// The schema, version by version (schema version = the highest applied migration):
///
/// ```
/// meta(name text PRIMARY KEY, value bytea)       format, store_id (16 random bytes), key_check,
///                                                current_key (8 bytes, big-endian), kdf (passphrase stores)
/// migrations(version int PRIMARY KEY, description text, applied_at timestamptz)
/// data_keys(id bigint PRIMARY KEY, wrapped bytea, created_at timestamptz)      -- wrapped by the master key
/// sessions(key text PRIMARY KEY, generation bigint > 0, key_id bigint REFERENCES data_keys,
///          sealed bytea, updated_at timestamptz)  -- sealed NULL: a tombstone keeping the generation
/// leases(name text PRIMARY KEY, holder text, token bigint > 0, expires_at timestamptz)
/// ```
enum Schema {
    static let migrations: [Migration] = [
        Migration(version: 1, description: "sessions, leases and data keys") { t in
            [
                """
                CREATE TABLE \(t.dataKeys) (id bigint PRIMARY KEY CHECK (id > 0), wrapped bytea NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT clock_timestamp())
                """,
                """
                CREATE TABLE \(t.sessions) (key text PRIMARY KEY, generation bigint NOT NULL CHECK (generation > 0),
                    key_id bigint REFERENCES \(t.dataKeys) (id), sealed bytea,
                    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                    CHECK ((sealed IS NULL) = (key_id IS NULL)))
                """,
                "CREATE INDEX sessions_key_id ON \(t.sessions) (key_id)",
                """
                CREATE TABLE \(t.leases) (name text PRIMARY KEY, holder text NOT NULL, token bigint NOT NULL CHECK (token > 0),
                    expires_at timestamptz NOT NULL)
                """
            ]
        }
    ]

    /// The schema version this Moose writes and reads.
    static var version: Int32 { migrations.last?.version ?? 0 }

    /// A 64-bit key for `pg_advisory_xact_lock` (transaction-level: safe through a pooler in
    /// transaction mode), the same in every replica for one schema.
    static func lockKey(_ schema: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "moose-schema:\(schema)".utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return Int64(bitPattern: hash)
    }

    static func bytes(_ buffer: ByteBuffer?) -> [UInt8]? { buffer.map { Array($0.readableBytesView) } }

    static func fail(_ code: PostgresStorageError.Code, _ message: String) -> PostgresStorageError {
        PostgresStorageError(code, message)
    }

    /// Runs one statement on `connection` and returns its rows.
    static func rows(_ connection: PostgresConnection, _ query: PostgresQuery, _ logger: Logger) async throws
        -> [PostgresRow]
    {
        try await connection.query(query, logger: logger).collect()
    }

    /// Inside a transaction on `connection`: checks the schema version (refusing a newer one),
    /// applies missing migrations (`apply`), creates the store's keys if the schema has none, and
    /// returns the key ring opened with `masterKey`.
    static func open(
        _ connection: PostgresConnection, tables t: Tables, mode: PostgresStorageConfiguration.Migrations,
        masterKey: MasterKeySource, logger: Logger
    ) async throws -> KeyRing {
        _ = try await rows(connection, "SELECT pg_advisory_xact_lock(\(lockKey(t.schema)))", logger)
        let schemaExists =
            try await rows(connection, "SELECT to_regnamespace(\(t.quotedSchema)) IS NOT NULL", logger)
            .first?.columns(1).decode(Bool.self) ?? false
        var version: Int32 = 0
        if schemaExists,
            try await rows(connection, "SELECT to_regclass(\(t.migrations)) IS NOT NULL", logger).first?.columns(1)
                .decode(Bool.self) == true
        {
            version =
                try await rows(
                    connection, "SELECT coalesce(max(version), 0)::int4 FROM \(unescaped: t.migrations)", logger
                )
                .first?.columns(1).decode(Int32.self) ?? 0
        }
        guard version <= self.version else {
            throw fail(
                PostgresStorageError.unsupportedVersion,
                "schema \(t.schema) is at version \(version); this Moose knows up to \(self.version) and changes nothing in a newer schema"
            )
        }
        if version < self.version {
            guard mode == .apply else {
                throw fail(
                    PostgresStorageError.notMigrated,
                    "schema \(t.schema) is at version \(version), this Moose needs \(self.version); run once with migrations=apply (a user allowed to create tables)"
                )
            }
            if !schemaExists { _ = try await rows(connection, "CREATE SCHEMA \(unescaped: t.quotedSchema)", logger) }
            if version == 0 {
                _ = try await rows(
                    connection,
                    "CREATE TABLE IF NOT EXISTS \(unescaped: t.meta) (name text PRIMARY KEY, value bytea NOT NULL)",
                    logger)
                _ = try await rows(
                    connection,
                    """
                    CREATE TABLE IF NOT EXISTS \(unescaped: t.migrations) (version integer PRIMARY KEY, description text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT clock_timestamp())
                    """, logger)
            }
            for migration in migrations where migration.version > version {
                for statement in migration.statements(t) {
                    _ = try await rows(connection, PostgresQuery(unsafeSQL: statement), logger)
                }
                _ = try await rows(
                    connection,
                    "INSERT INTO \(unescaped: t.migrations) (version, description) VALUES (\(migration.version), \(migration.description))",
                    logger)
                logger.info(
                    "moose: schema \(t.schema) migrated to version \(migration.version) (\(migration.description))")
            }
        }
        let meta = try await readMeta(connection, t, logger)
        if meta["store_id"] == nil {
            guard mode == .apply else {
                throw fail(
                    PostgresStorageError.notMigrated,
                    "schema \(t.schema) has no store keys yet; run once with migrations=apply")
            }
            return try await create(connection, t, masterKey: masterKey, logger: logger)
        }
        return try await load(connection, t, meta: meta, masterKey: masterKey, logger: logger)
    }

    static func readMeta(_ connection: PostgresConnection, _ t: Tables, _ logger: Logger) async throws -> [String:
        [UInt8]]
    {
        var meta: [String: [UInt8]] = [:]
        for row in try await rows(connection, "SELECT name, value FROM \(unescaped: t.meta)", logger) {
            let (name, value) = try row.columns(2).decode((String, ByteBuffer).self)
            guard value.readableBytes <= 4096 else {
                throw fail(PostgresStorageError.corrupt, "meta value \(name.prefix(40)) is too large")
            }
            meta[name] = Array(value.readableBytesView)
        }
        return meta
    }

    static func setMeta(
        _ connection: PostgresConnection, _ t: Tables, _ name: String, _ value: [UInt8], _ logger: Logger
    ) async throws {
        _ = try await rows(
            connection,
            """
            INSERT INTO \(unescaped: t.meta) (name, value) VALUES (\(name), \(ByteBuffer(bytes: value)))
            ON CONFLICT (name) DO UPDATE SET value = excluded.value
            """, logger)
    }

    /// Bounded scrypt parameters from the database (hostile until checked: a huge N would exhaust memory).
    static func kdf(_ bytes: [UInt8]?) throws(PostgresStorageError) -> KDFParameters? {
        guard let bytes else { return nil }
        guard let kdf = try? JSONDecoder().decode(KDFParameters.self, from: Data(bytes)),
            kdf.salt.count >= 16, kdf.salt.count <= 64, kdf.parameters.n >= 2, kdf.parameters.n <= 1 << 20,
            kdf.parameters.n & (kdf.parameters.n - 1) == 0, (1...32).contains(kdf.parameters.r),
            (1...16).contains(kdf.parameters.p)
        else {
            throw fail(
                PostgresStorageError.corrupt, "the store's key-derivation parameters are damaged or out of bounds")
        }
        return kdf
    }

    static func resolve(_ source: MasterKeySource, kdf: KDFParameters?, create: Bool) throws(PostgresStorageError)
        -> SecretKey
    {
        do {
            return try source.resolve(kdf: kdf, create: create)
        } catch {
            throw fail(
                PostgresStorageError.keyUnavailable,
                "the master key (\(source.description)) is not available: \(error.message)")
        }
    }

    static func create(_ connection: PostgresConnection, _ t: Tables, masterKey: MasterKeySource, logger: Logger)
        async throws -> KeyRing
    {
        let storeID = try SecureRandom.bytes(count: 16)
        let kdf = try KDFParameters.fresh(for: masterKey, parameters: MasterKeySource.defaultScryptParameters)
        if let kdf { try await setMeta(connection, t, "kdf", Array(JSONEncoder().encode(kdf)), logger) }
        let master = try resolve(masterKey, kdf: kdf, create: true)
        let dataKey = try SecretKey(randomByteCount: 32)
        _ = try await rows(
            connection,
            """
            INSERT INTO \(unescaped: t.dataKeys) (id, wrapped) VALUES (1, \(ByteBuffer(bytes: try Envelope.wrap(dataKey, id: 1, master: master, storeID: storeID))))
            """, logger)
        try await setMeta(connection, t, "format", [1], logger)
        try await setMeta(connection, t, "store_id", storeID, logger)
        try await setMeta(connection, t, "key_check", try Envelope.keyCheck(master: master, storeID: storeID), logger)
        try await setMeta(connection, t, "current_key", Envelope.bigEndian(1), logger)
        logger.info("moose: created the store's keys in schema \(t.schema)")
        return KeyRing(storeID: storeID, master: master, dataKeys: [1: dataKey], currentKeyID: 1)
    }

    static func load(
        _ connection: PostgresConnection, _ t: Tables, meta: [String: [UInt8]], masterKey: MasterKeySource,
        logger: Logger
    ) async throws -> KeyRing {
        guard let storeID = meta["store_id"], storeID.count == 16, let check = meta["key_check"], check.count == 32,
            let current = meta["current_key"].flatMap(Envelope.int64(bigEndian:)), current > 0
        else {
            throw fail(PostgresStorageError.corrupt, "schema \(t.schema): the store's metadata is missing or damaged")
        }
        let master = try resolve(masterKey, kdf: try kdf(meta["kdf"]), create: false)
        guard try Envelope.isKeyCheck(check, of: master, storeID: storeID) else {
            throw fail(
                PostgresStorageError.wrongKey,
                "the \(masterKey.description) is not the master key of schema \(t.schema)")
        }
        var ring = KeyRing(storeID: storeID, master: master, dataKeys: [:], currentKeyID: current)
        ring.dataKeys = try unwrap(
            try await rows(connection, "SELECT id, wrapped FROM \(unescaped: t.dataKeys)", logger), ring: ring)
        guard ring.dataKeys[current] != nil else {
            throw fail(PostgresStorageError.corrupt, "the current data key \(current) is missing")
        }
        return ring
    }

    /// Unwraps `(id, wrapped)` rows with the ring's master key.
    static func unwrap(_ rows: [PostgresRow], ring: KeyRing) throws -> [Int64: SecretKey] {
        var keys: [Int64: SecretKey] = [:]
        for row in rows {
            let (id, wrapped) = try row.columns(2).decode((Int64, ByteBuffer).self)
            guard wrapped.readableBytes <= 256 else {
                throw fail(PostgresStorageError.tampered, "data key \(id) is not a wrapped key")
            }
            do {
                keys[id] = try Envelope.unwrap(
                    Array(wrapped.readableBytesView), id: id, master: ring.master, storeID: ring.storeID)
            } catch {
                throw fail(PostgresStorageError.tampered, "data key \(id) does not authenticate under the master key")
            }
        }
        return keys
    }
}
#endif
