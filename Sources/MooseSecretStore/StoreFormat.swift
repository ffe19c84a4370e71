import MooseCrypto
import MooseSealing
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The on-disk format (schema version 1).
///
/// ```
/// meta(key TEXT PRIMARY KEY, value BLOB)        format=1, store_id (16 random bytes), kdf (JSON, passphrase
///                                               stores only), key_check, current_key
/// data_keys(id INTEGER PRIMARY KEY, wrapped BLOB, created_at INTEGER)
/// secrets(namespace TEXT, name TEXT, key_id INTEGER, sealed BLOB, updated_at INTEGER,
///         PRIMARY KEY(namespace, name))
/// leases(name TEXT PRIMARY KEY, holder TEXT, token INTEGER, expires_at INTEGER)
/// ```
///
/// `sealed`, `wrapped` and `key_check` are MooseSealing's `Envelope` (shared with MoosePostgres):
///
/// - `sealed` = nonce(12) ‖ AES-256-GCM ciphertext ‖ tag(16) under data key `key_id`, with
///   AAD = "moose-secret/v1" ‖ store_id ‖ u32 len ‖ namespace ‖ u32 len ‖ name ‖ u64 key_id.
/// - `wrapped` = nonce ‖ AES-256-GCM(data key) ‖ tag under the master key, with
///   AAD = "moose-data-key/v1" ‖ store_id ‖ u64 id.
/// - `key_check` = HMAC-SHA-256(master key, "moose-key-check/v1" ‖ store_id): tells a wrong master key
///   (`wrongKey`) from a damaged wrapped key (`tampered`). It reveals nothing about the key.
enum StoreFormat {
    static func now() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    /// Data key `id` unwrapped; a key that does not authenticate is `tampered`, naming the key.
    static func unwrap(_ wrapped: [UInt8], id: Int64, master: SecretKey, storeID: [UInt8]) throws(SecretStoreError)
        -> SecretKey
    {
        do {
            return try Envelope.unwrap(wrapped, id: id, master: master, storeID: storeID)
        } catch {
            throw SecretStoreError(SecretStoreError.tampered, error.message, namespace: "(data keys)", name: String(id))
        }
    }

    static func sql<R>(_ body: () throws -> R) throws(SecretStoreError) -> R {
        do {
            return try body()
        } catch let error as SQLiteError {
            throw error.storeError
        } catch let error as SecretStoreError {
            throw error
        } catch let error as SealingError {
            throw SecretStoreError(error)
        } catch {
            throw SecretStoreError(SecretStoreError.io, "unexpected error", underlying: "\(error)")
        }
    }

    static func inTransaction<R>(
        _ connection: SQLiteConnection, immediate: Bool = true,
        _ body: () throws(SecretStoreError) -> R
    ) throws(SecretStoreError) -> R {
        try sql { try connection.transaction(immediate: immediate) { try body() } }
    }

    // MARK: create / migrate / load

    /// Forward migrations: `migrations[n]` takes a store from schema version n + 1 to n + 2 (version 1
    /// is made by `create`, which needs the master key). Each runs in its own immediate transaction
    /// with `user_version` bumped inside it, so a crash leaves either the old or the new schema.
    static let migrations: [String] = []

    static func migrate(connection: SQLiteConnection, from version: Int64) throws {
        var current = version
        while current < SecretStore.schemaVersion {
            let index = Int(current - 1)
            guard index >= 0, index < migrations.count else {
                throw SecretStoreError(
                    SecretStoreError.unsupportedVersion, "no migration from schema version \(current)")
            }
            try connection.transaction(immediate: true) {
                // Another process may have migrated meanwhile.
                guard try connection.pragmaInteger("user_version") == current else { return }
                try connection.execute(migrations[index])
                try connection.execute("PRAGMA user_version = \(current + 1)")
            }
            current += 1
        }
    }

    /// Writes a new store's schema and first data key under `master` (resolved by the caller before
    /// the file was made; `kdf`: a passphrase's scrypt salt and cost, kept in `meta`).
    static func create(connection: SQLiteConnection, master: SecretKey, kdf: KDFParameters?) throws {
        try connection.transaction(immediate: true) {
            // Another process may have created it between our check and our lock.
            guard try connection.pragmaInteger("user_version") == 0 else { return }
            try connection.execute(
                """
                CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
                CREATE TABLE data_keys (id INTEGER PRIMARY KEY, wrapped BLOB NOT NULL, created_at INTEGER NOT NULL);
                CREATE TABLE secrets (namespace TEXT NOT NULL, name TEXT NOT NULL, key_id INTEGER NOT NULL,
                                      sealed BLOB NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (namespace, name));
                CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, token INTEGER NOT NULL,
                                     expires_at INTEGER NOT NULL);
                """)
            let storeID = try SecureRandom.bytes(count: 16)
            if let kdf { try setMeta(connection, "kdf", Array(JSONEncoder().encode(kdf))) }
            let dataKey = try SecretKey(randomByteCount: 32)
            let insert = try connection.statement("INSERT INTO data_keys (id, wrapped, created_at) VALUES (1, ?, ?)")
            try insert.bind(1, blob: try Envelope.wrap(dataKey, id: 1, master: master, storeID: storeID))
            try insert.bind(2, now())
            try insert.step()
            try setMeta(connection, "format", [1])
            try setMeta(connection, "store_id", storeID)
            try setMeta(connection, "key_check", try Envelope.keyCheck(master: master, storeID: storeID))
            try setMeta(connection, "current_key", Envelope.bigEndian(1))
            try connection.execute("PRAGMA user_version = \(SecretStore.schemaVersion)")
        }
    }

    static func setMeta(_ connection: SQLiteConnection, _ key: String, _ value: [UInt8]) throws {
        let statement = try connection.statement(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
        try statement.bind(1, key)
        try statement.bind(2, blob: value)
        try statement.step()
    }

    static func meta(_ connection: SQLiteConnection, _ key: String) throws -> [UInt8]? {
        let statement = try connection.statement("SELECT value FROM meta WHERE key = ?")
        defer { statement.reset() }
        try statement.bind(1, key)
        guard try statement.step() else { return nil }
        return statement.blob(0)
    }

    static func load(connection: SQLiteConnection, masterKey: MasterKeySource) throws -> SecretStore.State {
        guard let storeID = try meta(connection, "store_id"), storeID.count == 16,
            let check = try meta(connection, "key_check"),
            let current = try meta(connection, "current_key"), current.count == 8
        else {
            throw SecretStoreError(
                SecretStoreError.corrupt, "\(connection.path): the store's metadata is missing or damaged")
        }
        var kdf: KDFParameters? = nil
        if let kdfJSON = try meta(connection, "kdf") {
            kdf = try? JSONDecoder().decode(KDFParameters.self, from: Data(kdfJSON))
            if kdf == nil {
                throw SecretStoreError(SecretStoreError.corrupt, "the store's key-derivation parameters are damaged")
            }
        }
        let master = try masterKey.resolve(kdf: kdf, create: false)
        guard try Envelope.isKeyCheck(check, of: master, storeID: storeID) else {
            throw SecretStoreError(
                SecretStoreError.wrongKey,
                "the \(masterKey.description) is not the master key of \(connection.path)")
        }
        var state = SecretStore.State(
            connection: connection, master: master, dataKeys: [:],
            currentKeyID: current.reduce(0) { $0 << 8 | Int64($1) }, storeID: storeID)
        try reloadDataKeys(&state)
        return state
    }

    static func reloadDataKeys(_ state: inout SecretStore.State) throws {
        var keys: [Int64: SecretKey] = [:]
        let statement = try state.connection.statement("SELECT id, wrapped FROM data_keys")
        while try statement.step() {
            let id = statement.int64(0)
            keys[id] = try unwrap(statement.blob(1), id: id, master: state.master, storeID: state.storeID)
        }
        state.dataKeys = keys
        if let current = try meta(state.connection, "current_key"), current.count == 8 {
            state.currentKeyID = current.reduce(0) { $0 << 8 | Int64($1) }
        }
    }

    /// Inside a write transaction: make sure we seal with the key that is current *now* (another
    /// process may have rotated it).
    static func refreshCurrentKey(_ state: inout SecretStore.State) throws(SecretStoreError) {
        try sql {
            guard let current = try meta(state.connection, "current_key"), current.count == 8 else {
                throw SecretStoreError(SecretStoreError.corrupt, "the store's current key is missing")
            }
            let id = current.reduce(0) { $0 << 8 | Int64($1) }
            if id != state.currentKeyID || state.dataKeys[id] == nil { try reloadDataKeys(&state) }
        }
    }

    // MARK: values

    static func validate(namespace: String, name: String) throws(SecretStoreError) {
        guard !namespace.isEmpty, !name.isEmpty, namespace.utf8.count <= 1024, name.utf8.count <= 1024 else {
            throw SecretStoreError(SecretStoreError.invalidArgument, "namespace and name must be 1…1024 bytes")
        }
    }

    static func put(_ state: inout SecretStore.State, value: [UInt8], namespace: String, name: String)
        throws(SecretStoreError)
    {
        try validate(namespace: namespace, name: name)
        guard value.count <= 16 << 20 else {
            throw SecretStoreError(SecretStoreError.invalidArgument, "a value may be at most 16 MiB")
        }
        let keyID = state.currentKeyID
        guard let cipher = try state.cipher(keyID) else {
            throw SecretStoreError(SecretStoreError.corrupt, "the current data key \(keyID) is missing")
        }
        let sealed: [UInt8]
        do {
            sealed = try cipher.sealCombined(
                value,
                authenticating: Envelope.valueAAD(
                    storeID: state.storeID, namespace: namespace,
                    name: name, keyID: keyID))
        } catch {
            throw SecretStoreError(SecretStoreError.io, "encryption failed", underlying: error.message)
        }
        let connection = state.connection
        try sql {
            let statement = try connection.statement(
                """
                INSERT INTO secrets (namespace, name, key_id, sealed, updated_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(namespace, name) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed,
                updated_at = excluded.updated_at
                """)
            try statement.bind(1, namespace)
            try statement.bind(2, name)
            try statement.bind(3, keyID)
            try statement.bind(4, blob: sealed)
            try statement.bind(5, now())
            try statement.step()
        }
    }

    static func get(_ state: inout SecretStore.State, namespace: String, name: String) throws(SecretStoreError)
        -> [UInt8]?
    {
        let connection = state.connection
        let statement: Statement = try sql {
            let statement = try connection.statement(
                "SELECT key_id, sealed FROM secrets WHERE namespace = ? AND name = ?")
            try statement.bind(1, namespace)
            try statement.bind(2, name)
            return statement
        }
        guard try sql({ try statement.step() }) else { return nil }
        let keyID = statement.int64(0)
        // Fast path: decrypt straight from SQLite's row memory with the cached context.
        if let cipher = try state.cipher(keyID) {
            let aad = Envelope.valueAAD(storeID: state.storeID, namespace: namespace, name: name, keyID: keyID)
            let opened = statement.withBlob(1) { try? cipher.openCombined(buffer: $0, authenticating: aad) }
            if let opened { return opened }
        }
        return try open(&state, sealed: statement.blob(1), keyID: keyID, namespace: namespace, name: name)
    }

    static func open(
        _ state: inout SecretStore.State, sealed: [UInt8], keyID: Int64,
        namespace: String, name: String
    ) throws(SecretStoreError) -> [UInt8] {
        if state.dataKeys[keyID] == nil { try sql { try reloadDataKeys(&state) } }
        guard let cipher = try state.cipher(keyID) else {
            throw SecretStoreError.tampered(namespace: namespace, name: name)
        }
        do {
            return try cipher.openCombined(
                sealed,
                authenticating: Envelope.valueAAD(
                    storeID: state.storeID, namespace: namespace,
                    name: name, keyID: keyID))
        } catch {
            throw SecretStoreError.tampered(namespace: namespace, name: name)
        }
    }

    static func delete(_ state: borrowing SecretStore.State, namespace: String, name: String) throws(SecretStoreError)
        -> Bool
    {
        let connection = state.connection
        return try sql {
            let statement = try connection.statement("DELETE FROM secrets WHERE namespace = ? AND name = ?")
            try statement.bind(1, namespace)
            try statement.bind(2, name)
            try statement.step()
            return connection.changes > 0
        }
    }

    static func list(_ state: borrowing SecretStore.State, namespace: String?) throws(SecretStoreError) -> [SecretStore
        .Entry]
    {
        let connection = state.connection
        return try sql {
            let statement: Statement
            if let namespace {
                statement = try connection.statement(
                    "SELECT namespace, name, updated_at, key_id FROM secrets WHERE namespace = ? ORDER BY namespace, name"
                )
                try statement.bind(1, namespace)
            } else {
                statement = try connection.statement(
                    "SELECT namespace, name, updated_at, key_id FROM secrets ORDER BY namespace, name")
            }
            var entries: [SecretStore.Entry] = []
            while try statement.step() {
                entries.append(
                    SecretStore.Entry(
                        namespace: statement.text(0) ?? "", name: statement.text(1) ?? "",
                        updatedAt: Date(timeIntervalSince1970: Double(statement.int64(2)) / 1000),
                        keyID: statement.int64(3)))
            }
            return entries
        }
    }

    // MARK: rotation and checks

    static func rotateMasterKey(
        _ state: inout SecretStore.State, to newKey: MasterKeySource,
        scrypt: Scrypt.Parameters
    ) throws(SecretStoreError) {
        let connection = state.connection
        let storeID = state.storeID
        let newMaster: SecretKey = try sql {
            try connection.transaction(immediate: true) {
                try reloadDataKeys(&state) // unwrap with the current master inside the lock
                let kdf = try KDFParameters.fresh(for: newKey, parameters: scrypt)
                let master = try newKey.resolve(kdf: kdf, create: true)
                for (id, key) in state.dataKeys {
                    let statement = try connection.statement("UPDATE data_keys SET wrapped = ? WHERE id = ?")
                    try statement.bind(1, blob: try Envelope.wrap(key, id: id, master: master, storeID: storeID))
                    try statement.bind(2, id)
                    try statement.step()
                }
                if let kdf {
                    try setMeta(connection, "kdf", Array(JSONEncoder().encode(kdf)))
                } else {
                    let statement = try connection.statement("DELETE FROM meta WHERE key = 'kdf'")
                    try statement.step()
                }
                try setMeta(connection, "key_check", try Envelope.keyCheck(master: master, storeID: storeID))
                return master
            }
        }
        state.master = newMaster
    }

    static func rotateDataKey(_ state: inout SecretStore.State) throws(SecretStoreError) {
        let connection = state.connection
        try sql {
            try connection.transaction(immediate: true) {
                try reloadDataKeys(&state)
                let newID = (state.dataKeys.keys.max() ?? 0) + 1
                let newKey = try SecretKey(randomByteCount: 32)
                let insert = try connection.statement(
                    "INSERT INTO data_keys (id, wrapped, created_at) VALUES (?, ?, ?)")
                try insert.bind(1, newID)
                try insert.bind(
                    2, blob: try Envelope.wrap(newKey, id: newID, master: state.master, storeID: state.storeID))
                try insert.bind(3, now())
                try insert.step()
                // Read every row first, then rewrite: never update a table while stepping through it.
                var rows: [(String, String, Int64, [UInt8])] = []
                let select = try connection.statement("SELECT namespace, name, key_id, sealed FROM secrets")
                while try select.step() {
                    rows.append((select.text(0) ?? "", select.text(1) ?? "", select.int64(2), select.blob(3)))
                }
                state.dataKeys[newID] = newKey
                state.currentKeyID = newID
                for (namespace, name, keyID, sealed) in rows {
                    let plain = try open(&state, sealed: sealed, keyID: keyID, namespace: namespace, name: name)
                    try put(&state, value: plain, namespace: namespace, name: name)
                }
                try setMeta(connection, "current_key", Envelope.bigEndian(newID))
                let purge = try connection.statement("DELETE FROM data_keys WHERE id <> ?")
                try purge.bind(1, newID)
                try purge.step()
            }
            try reloadDataKeys(&state)
        }
    }

    static func check(_ state: inout SecretStore.State) throws(SecretStoreError) -> SecretStore.CheckReport {
        let connection = state.connection
        let integrity: String = try sql {
            let statement = try connection.statement("PRAGMA integrity_check")
            var lines: [String] = []
            while try statement.step() { lines.append(statement.text(0) ?? "") }
            return lines.joined(separator: "; ")
        }
        let rows: [(SecretStore.Entry, [UInt8])] = try sql {
            let statement = try connection.statement(
                "SELECT namespace, name, updated_at, key_id, sealed FROM secrets ORDER BY namespace, name")
            var rows: [(SecretStore.Entry, [UInt8])] = []
            while try statement.step() {
                rows.append(
                    (
                        SecretStore.Entry(
                            namespace: statement.text(0) ?? "", name: statement.text(1) ?? "",
                            updatedAt: Date(timeIntervalSince1970: Double(statement.int64(2)) / 1000),
                            keyID: statement.int64(3)), statement.blob(4)
                    ))
            }
            return rows
        }
        var good = 0
        var bad: [(entry: SecretStore.Entry, error: SecretStoreError)] = []
        for (entry, sealed) in rows {
            do {
                var plain = try open(
                    &state, sealed: sealed, keyID: entry.keyID, namespace: entry.namespace, name: entry.name)
                plain.withUnsafeMutableBytes { for i in $0.indices { $0[i] = 0 } }
                good += 1
            } catch {
                bad.append((entry, error))
            }
        }
        return SecretStore.CheckReport(good: good, bad: bad, integrity: integrity)
    }
}
