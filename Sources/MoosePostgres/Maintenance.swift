#if MoosePostgres
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseSealing
import MooseCrypto
import MooseOAuth
import Logging
import PostgresNIO

/// `moose store init|check|rotate-key` on a PostgreSQL store: `prepare()`, `check()`, `rotateDataKey()` and
/// `rotateMasterKey(to:)`, each saying what it did. Each throws `PostgresStorageError`; call them while
/// `run()` runs, as every other operation (`checkStore()` reads through the pool).
extension PostgresSessionStorage: SessionStoreMaintenance {
    /// Creates or migrates the schema and checks the master key (`prepare()`).
    ///
    /// - Returns: `store URL is ready (schema S, version V); key OK`, the URL redacted.
    public func prepareStore() async throws(PostgresStorageError) -> String {
        try await prepare()
        return
            "store \(configuration.redactedURL) is ready (schema \(configuration.schema), version \(Self.schemaVersion)); key OK"
    }

    /// Opens every stored session (`check()`).
    ///
    /// - Returns: `BAD  moose.session/KEY: CODE` for each session that does not open, then the database
    ///   (its redacted URL, schema and version) and the counts: the sessions that open, the rows a logout
    ///   left with only the plan (when there are any), those that do not open, and the tombstones of
    ///   deleted sessions.
    public func checkStore() async throws(PostgresStorageError) -> SessionStoreCheck {
        let report = try await check()
        var lines = report.bad.map { key, error in "BAD  \(Self.namespace)/\(key): \(error.code)" }
        lines.append(
            "database: \(configuration.redactedURL), schema \(configuration.schema) version \(report.schemaVersion)")
        // A row a logout left with only the plan opens too, but holds no session: said apart.
        let kept = report.loggedOut > 0 ? ", \(report.loggedOut) logged out with the plan kept" : ""
        lines.append(
            "\(report.good - report.loggedOut) sessions open\(kept), \(report.bad.count) do not (\(report.tombstones) deleted)"
        )
        return SessionStoreCheck(lines: lines, isHealthy: report.isHealthy)
    }

    /// Seals every session again under a new data key (`rotateDataKey()`).
    ///
    /// - Returns: `data key rotated; N sessions sealed again`, or `…; N sessions and M kept plans sealed
    ///   again` when rows a logout left with only the plan were sealed again too.
    public func rotateStoreDataKey() async throws(PostgresStorageError) -> String {
        let (rows, keptPlans) = try await rotateDataKeyCounting()
        let kept = keptPlans > 0 ? " and \(keptPlans) kept plans" : ""
        return "data key rotated; \(rows - keptPlans) sessions\(kept) sealed again"
    }

    /// Rewraps the data keys under `newKey` (`rotateMasterKey(to:)`): every replica needs it from now on.
    ///
    /// - Parameter newKey: the master key the store uses from now on.
    /// - Returns: `master key rotated; every machine that uses this store needs the new key`.
    public func rotateStoreMasterKey(to newKey: MasterKeySource) async throws(PostgresStorageError) -> String {
        try await rotateMasterKey(to: newKey)
        return "master key rotated; every machine that uses this store needs the new key"
    }
}

extension PostgresSessionStorage {
    /// What `check()` found.
    public struct CheckReport: Sendable {
        /// Rows whose value opened and decoded (sessions, and the rows of `loggedOut`).
        public let good: Int
        /// Of `good`, the rows a logout that kept the plan left: no session, only its plan
        /// (`OAuthSession.isLoggedOut`).
        public let loggedOut: Int
        /// Sessions that did not, each with the reason (`tampered`, `corrupt`…), never a value.
        public let bad: [(key: String, error: PostgresStorageError)]
        /// Deleted sessions kept as tombstones (a generation, no secrets).
        public let tombstones: Int
        /// The schema version found.
        public let schemaVersion: Int
        /// `true` when every session opened.
        public var isHealthy: Bool { bad.isEmpty }
    }

    /// Opens every stored session with the master key (through the data keys) and reports those
    /// that do not — tampered, sealed under a missing key, not a session. Changes nothing.
    ///
    /// - Throws: `PostgresStorageError` when the store cannot be opened at all (`wrongKey`,
    ///   `unavailable`, `unsupportedVersion`, a damaged data key: `tampered`).
    public func check() async throws(PostgresStorageError) -> CheckReport {
        _ = try await keyRing()
        _ = try await reloadKeys() // every data key unwraps, and the key check still matches
        let t = tables
        let rows: [(key: String, generation: Int64, keyID: Int64?, sealed: [UInt8]?)] = try await perform(
            "reading every session"
        ) { _ in
            var rows: [(key: String, generation: Int64, keyID: Int64?, sealed: [UInt8]?)] = []
            for row in try await self.client.query(
                "SELECT key, generation, key_id, sealed FROM \(unescaped: t.sessions) ORDER BY key"
            ).collect() {
                let (key, generation, keyID, sealed) = try row.columns(4).decode(
                    (String, Int64, Int64?, ByteBuffer?).self)
                rows.append((key, generation, keyID, sealed.map { Array($0.readableBytesView) }))
            }
            return rows
        }
        let version: Int32 = try await perform("reading the schema version") { _ in
            try await self.client.query("SELECT coalesce(max(version), 0)::int4 FROM \(unescaped: t.migrations)")
                .collect().first?.columns(1).decode(Int32.self) ?? 0
        }
        var good = 0, tombstones = 0, loggedOut = 0
        var bad: [(key: String, error: PostgresStorageError)] = []
        for row in rows {
            guard let sealed = row.sealed, let keyID = row.keyID else { tombstones += 1; continue }
            do {
                if try await open(sealed, key: row.key, generation: row.generation, keyID: keyID).isLoggedOut {
                    loggedOut += 1
                }
                good += 1
            } catch {
                bad.append((row.key, error))
            }
        }
        return CheckReport(
            good: good, loggedOut: loggedOut, bad: bad, tombstones: tombstones, schemaVersion: Int(version))
    }

    /// Seals every session again under a new data key, then deletes the data keys no row uses any
    /// more. Replicas that still seal with an old key find out at their next write (the foreign key
    /// refuses it), reload the keys and seal again; rows they wrote meanwhile keep their key alive
    /// until the next rotation. Generations do not change (a rotation is not a session write).
    ///
    /// - Returns: how many rows were sealed again: sessions, and the rows a logout left with only the plan.
    @discardableResult
    public func rotateDataKey() async throws(PostgresStorageError) -> Int {
        try await rotateDataKeyCounting().rows
    }

    /// `rotateDataKey()`, with how many of the rows sealed again hold only a kept plan.
    func rotateDataKeyCounting() async throws(PostgresStorageError) -> (rows: Int, keptPlans: Int) {
        let ring = try await keyRing()
        let t = tables, logger = self.logger
        let (count, fresh): ((rows: Int, keptPlans: Int), KeyRing) = try await perform(
            "rotating the data key", needsPool: false
        ) { _ in
            let connection = try await self.connector.connect(to: self.configuration.endpoint)
            let result: ((rows: Int, keptPlans: Int), KeyRing)
            do {
                result = try await connection.withTransaction(logger: logger) {
                    connection -> ((rows: Int, keptPlans: Int), KeyRing) in
                    _ = try await Schema.rows(
                        connection, "SELECT pg_advisory_xact_lock(\(Schema.lockKey(t.schema)))", logger)
                    _ = try await Schema.rows(
                        connection, "SELECT value FROM \(unescaped: t.meta) WHERE name = 'current_key' FOR UPDATE",
                        logger)
                    var ring = ring
                    ring.dataKeys = try Schema.unwrap(
                        try await Schema.rows(connection, "SELECT id, wrapped FROM \(unescaped: t.dataKeys)", logger),
                        ring: ring)
                    let newID = (ring.dataKeys.keys.max() ?? 0) + 1
                    let newKey = try SecretKey(randomByteCount: 32)
                    let wrapped = try Envelope.wrap(newKey, id: newID, master: ring.master, storeID: ring.storeID)
                    _ = try await Schema.rows(
                        connection,
                        "INSERT INTO \(unescaped: t.dataKeys) (id, wrapped) VALUES (\(newID), \(ByteBuffer(bytes: wrapped)))",
                        logger)
                    try await Schema.setMeta(connection, t, "current_key", Envelope.bigEndian(newID), logger)
                    var fresh = ring
                    fresh.dataKeys[newID] = newKey
                    fresh.currentKeyID = newID
                    let count = try await Self.reseal(
                        connection, t, ring: ring, newKey: newKey, newID: newID, logger: logger)
                    return (count, fresh)
                }
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
            return result
        }
        state.withLock { $0.ring = fresh }
        // Old keys go only when no row names them (the foreign key makes this race-free); a failure
        // here leaves them in place, readable, for the next rotation.
        _ = try? await perform("deleting retired data keys") { _ in
            try await self.client.query(
                """
                DELETE FROM \(unescaped: t.dataKeys) d WHERE d.id <> \(fresh.currentKeyID)
                AND NOT EXISTS (SELECT 1 FROM \(unescaped: t.sessions) s WHERE s.key_id = d.id)
                """
            ).collect().count
        }
        return count
    }

    /// Seals every session row not yet under data key `newID` again with `newKey` (inside the caller's
    /// transaction, rows locked), checking each against the key it names first.
    ///
    /// - Returns: how many rows were sealed again, and how many of them hold only a kept plan.
    private static func reseal(
        _ connection: PostgresConnection, _ t: Tables, ring: KeyRing, newKey: SecretKey, newID: Int64,
        logger: Logger
    ) async throws -> (rows: Int, keptPlans: Int) {
        var count = 0, keptPlans = 0
        let rows = try await Schema.rows(
            connection,
            """
            SELECT key, generation, key_id, sealed FROM \(unescaped: t.sessions) WHERE sealed IS NOT NULL AND key_id <> \(newID) FOR UPDATE
            """, logger)
        for row in rows {
            let (key, generation, keyID, sealed) = try row.columns(4).decode(
                (String, Int64, Int64, ByteBuffer).self)
            guard let oldKey = ring.dataKeys[keyID] else {
                throw Self.tampered(key, "it names data key \(keyID), which this store does not have")
            }
            var plain: [UInt8]
            do {
                plain = try AESGCM.openCombined(
                    Array(sealed.readableBytesView), using: oldKey,
                    authenticating: Self.aad(
                        storeID: ring.storeID, key: key, keyID: keyID, generation: generation))
            } catch {
                throw Self.tampered(key, "it was modified, or moved from another row or generation")
            }
            defer { for index in plain.indices { plain[index] = 0 } }
            if (try? JSONDecoder().decode(OAuthSession.self, from: Data(plain)))?.isLoggedOut == true { keptPlans += 1 }
            let resealed = try AESGCM.sealCombined(
                plain, using: newKey,
                authenticating: Self.aad(
                    storeID: ring.storeID, key: key, keyID: newID, generation: generation))
            _ = try await Schema.rows(
                connection,
                """
                UPDATE \(unescaped: t.sessions) SET key_id = \(newID), sealed = \(ByteBuffer(bytes: resealed))
                WHERE key = \(key) AND generation = \(generation)
                """, logger)
            count += 1
        }
        return (count, keptPlans)
    }

    /// Rewraps the data keys under a new master key (one small transaction; sessions are untouched).
    /// Afterwards the old master key no longer opens the store: every replica needs the new one (a
    /// replica still running keeps its unwrapped data keys until it must reload them).
    public func rotateMasterKey(to newKey: MasterKeySource) async throws(PostgresStorageError) {
        let ring = try await keyRing()
        let t = tables, logger = self.logger
        let master: SecretKey = try await perform("rotating the master key", needsPool: false) { _ in
            let connection = try await self.connector.connect(to: self.configuration.endpoint)
            let master: SecretKey
            do {
                master = try await connection.withTransaction(logger: logger) { connection -> SecretKey in
                    _ = try await Schema.rows(
                        connection, "SELECT pg_advisory_xact_lock(\(Schema.lockKey(t.schema)))", logger)
                    let meta = try await Schema.readMeta(connection, t, logger)
                    guard let check = meta["key_check"],
                        try Envelope.isKeyCheck(check, of: ring.master, storeID: ring.storeID)
                    else {
                        throw PostgresStorageError(
                            PostgresStorageError.wrongKey, "the master key was rotated meanwhile by another process")
                    }
                    let keys = try Schema.unwrap(
                        try await Schema.rows(connection, "SELECT id, wrapped FROM \(unescaped: t.dataKeys)", logger),
                        ring: ring)
                    let kdf = try KDFParameters.fresh(for: newKey, parameters: MasterKeySource.defaultScryptParameters)
                    let master = try Schema.resolve(newKey, kdf: kdf, create: true)
                    for (id, key) in keys {
                        let wrapped = try Envelope.wrap(key, id: id, master: master, storeID: ring.storeID)
                        _ = try await Schema.rows(
                            connection,
                            "UPDATE \(unescaped: t.dataKeys) SET wrapped = \(ByteBuffer(bytes: wrapped)) WHERE id = \(id)",
                            logger)
                    }
                    if let kdf {
                        try await Schema.setMeta(connection, t, "kdf", Array(JSONEncoder().encode(kdf)), logger)
                    } else {
                        _ = try await Schema.rows(
                            connection, "DELETE FROM \(unescaped: t.meta) WHERE name = 'kdf'", logger)
                    }
                    try await Schema.setMeta(
                        connection, t, "key_check", try Envelope.keyCheck(master: master, storeID: ring.storeID), logger
                    )
                    return master
                }
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
            return master
        }
        state.withLock { $0.ring?.master = master }
    }
}
#endif
