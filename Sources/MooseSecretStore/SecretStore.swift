public import MooseCrypto
public import MooseSealing
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An encrypted key–value store for secrets in one SQLite file, safe to share between threads,
/// tasks and processes.
///
/// Each value is sealed with AES-256-GCM under a random data key, with a fresh 96-bit nonce per write
/// and additional authenticated data binding it to the store, its namespace, name and key id — a
/// ciphertext copied to another row, or rolled back to another key, does not open. The data key is
/// stored wrapped (AES-256-GCM) by the master key, so the master key rotates by rewrapping one row.
/// Namespaces and names are stored in plaintext (they are metadata: "session/refresh_token"), values never.
///
/// ```swift
/// let store = try SecretStore(path: "/home/me/.local/share/moose/store.sqlite",
///                             masterKey: .keyFile("/home/me/.config/moose/store.key"))
/// try store.put(Array(refreshToken.utf8), namespace: "session:default", name: "refresh_token")
/// let value = try store.get(namespace: "session:default", name: "refresh_token")
/// ```
public final class SecretStore: Sendable {
    /// The store file.
    public let path: String
    private let box: StateBox

    /// The schema version this Moose writes (`PRAGMA user_version`).
    static let schemaVersion: Int64 = 1

    /// One value's metadata, as listed by `list(namespace:)`.
    public struct Entry: Sendable, Hashable {
        /// The namespace.
        public let namespace: String
        /// The name.
        public let name: String
        /// When it was last written.
        public let updatedAt: Date
        /// The id of the data key that sealed it.
        public let keyID: Int64
    }

    struct State: ~Copyable {
        let connection: SQLiteConnection
        var master: SecretKey
        var dataKeys: [Int64: SecretKey] {
            didSet { ciphers.removeAll() }
        }
        /// One reusable AES-GCM context per data key (safe: only ever used under the store's lock).
        var ciphers: [Int64: AESGCM.Context] = [:]
        var currentKeyID: Int64
        let storeID: [UInt8]

        mutating func cipher(_ keyID: Int64) throws(SecretStoreError) -> AESGCM.Context? {
            if let cached = ciphers[keyID] { return cached }
            guard let key = dataKeys[keyID] else { return nil }
            do {
                let context = try AESGCM.Context(key: key)
                ciphers[keyID] = context
                return context
            } catch {
                throw SecretStoreError(SecretStoreError.io, "cannot set up AES-GCM", underlying: error.message)
            }
        }
    }

    /// How hard a commit insists on reaching the disk.
    public enum Durability: Sendable {
        /// `synchronous=FULL` (the default): a write that returned survives a crash or power loss.
        case full
        /// `synchronous=NORMAL`: a power loss may drop the last commits (never corrupts). For caches.
        case normal
    }

    /// Opens the store at `path`, creating it (file 0600, folder 0700) if it does not exist.
    ///
    /// `readOnly` opens an existing store for reading only: every write fails with `permission`.
    ///
    /// - Parameters:
    ///   - path: the store's file (its `-wal` and lock files live next to it).
    ///   - masterKey: the key that unlocks the store (a key file, the Keychain or Secret Service, a
    ///     passphrase); it must be this store's, or a new store's first one.
    ///   - create: whether a missing store is created (default `true`); `false`: a missing one is `io`.
    ///   - durability: how hard a commit insists on reaching the disk (default `.full`).
    ///   - readOnly: open an existing store for reading only (default `false`).
    ///   - scryptParameters: the scrypt cost of a new store's passphrase key (ignored for other master
    ///     keys, and for an existing store, which keeps its own); default N = 2^16, r = 8, p = 1.
    /// - Throws: `SecretStoreError` with `wrongKey` if `masterKey` is not this store's key, `corrupt` for
    ///   a damaged, empty or foreign file, `unsupportedVersion` for a newer format, `permission`, `io` (no
    ///   store at `path` with `create` false or `readOnly`), `busy`, `keyUnavailable`. Opening never
    ///   modifies an existing file.
    public convenience init(
        path: String, masterKey: MasterKeySource, create: Bool = true, durability: Durability = .full,
        readOnly: Bool = false,
        scryptParameters: Scrypt.Parameters = MasterKeySource.defaultScryptParameters
    ) throws(SecretStoreError) {
        try self.init(
            path: path, masterKey: masterKey, create: create, durability: durability, readOnly: readOnly,
            scryptParameters: scryptParameters, snapshot: false)
    }

    /// `snapshot` (for `readSnapshot`): SQLite's exclusive locking mode, taken without waiting, so the
    /// write-ahead log's index lives in this connection's memory rather than in a `-shm` file; and no
    /// writes (`query_only`). Every check of an ordinary open runs unchanged.
    private init(
        path: String, masterKey: MasterKeySource, create: Bool, durability: Durability, readOnly: Bool,
        scryptParameters: Scrypt.Parameters, snapshot: Bool
    ) throws(SecretStoreError) {
        self.path = path
        if readOnly, !FileSystem.exists(path) {
            throw SecretStoreError(SecretStoreError.io, "no store at \(path) to open read-only")
        }
        var newKey: (master: SecretKey, kdf: KDFParameters?)? = nil
        if FileSystem.exists(path) {
            // An existing empty file (and no write-ahead log holding its pages) is a damaged store —
            // truncated, or left by a crash during `init` — never silently made anew: that would
            // hide the loss of every secret it held.
            // A young empty file may be another process's store in the making (created, its schema not
            // yet written): it is waited for, briefly, before it is called damaged.
            if !FileSystem.awaitCreator(
                of: path, while: { FileSystem.size(path) == 0 && !FileSystem.exists(path + "-wal") })
            {
                throw SecretStoreError(
                    SecretStoreError.corrupt,
                    "\(path) is empty (0 bytes): the store was truncated or damaged; restore it from a backup, "
                        + "or remove the file to start over with a new store")
            }
        } else {
            guard create else {
                throw SecretStoreError(
                    SecretStoreError.io, "no store at \(path) (opened with create: false; create: true makes one)")
            }
            // The master key first: a key that is not there (an unset variable, no Secret Service)
            // fails before any file exists — a half-made store would read as damaged next time.
            do {
                let kdf = try KDFParameters.fresh(for: masterKey, parameters: scryptParameters)
                newKey = (try masterKey.resolve(kdf: kdf, create: true), kdf)
            } catch {
                throw SecretStoreError(error)
            }
            try FileSystem.ensurePrivateFolder(for: path)
            try FileSystem.createPrivateFile(path)
        }
        let connection: SQLiteConnection
        do {
            connection = try SQLiteConnection(
                path: path, mode: readOnly ? .readOnly : .readWrite, busyTimeout: snapshot ? 0 : 5_000)
            // Before anything reads the file: the locking mode decides how the write-ahead log is opened.
            if snapshot { try connection.execute("PRAGMA locking_mode=EXCLUSIVE") }
            let synchronous = durability == .full ? "FULL" : "NORMAL"
            try connection.execute("PRAGMA synchronous=\(synchronous); PRAGMA secure_delete=ON; PRAGMA foreign_keys=ON")
            if readOnly || snapshot { try connection.execute("PRAGMA query_only=ON") }
        } catch {
            throw error.storeError
        }
        let opened = try Self.open(connection: connection, masterKey: masterKey, newKey: newKey)
        box = StateBox(opened)
    }

    /// `newKey`: the resolved master key (and scrypt parameters) of a store this call creates; `nil`
    /// when the file existed.
    private static func open(
        connection: SQLiteConnection, masterKey: MasterKeySource,
        newKey: (master: SecretKey, kdf: KDFParameters?)?
    ) throws(SecretStoreError) -> State {
        do {
            var version = try connection.pragmaInteger("user_version")
            if version == 0, newKey == nil {
                // Another process may be creating this store right now (its file exists, its schema not
                // yet committed): a young file is waited for, briefly, before it is called foreign.
                _ = try FileSystem.awaitCreator(of: connection.path) {
                    version = try connection.pragmaInteger("user_version")
                    return version == 0
                }
            }
            if version == 0 {
                guard let newKey else {
                    throw SecretStoreError(
                        SecretStoreError.corrupt, "\(connection.path) is not a Moose store (no schema)")
                }
                try connection.execute("PRAGMA journal_mode=WAL")
                try StoreFormat.create(connection: connection, master: newKey.master, kdf: newKey.kdf)
                version = try connection.pragmaInteger("user_version")
            }
            guard version <= schemaVersion else {
                throw SecretStoreError(
                    SecretStoreError.unsupportedVersion,
                    "the store has schema version \(version); this Moose knows up to \(schemaVersion)")
            }
            if version < schemaVersion {
                try StoreFormat.migrate(connection: connection, from: version)
            }
            return try StoreFormat.load(connection: connection, masterKey: masterKey)
        } catch let error as SQLiteError {
            throw error.storeError
        } catch let error as SecretStoreError {
            throw error
        } catch let error as SealingError {
            throw SecretStoreError(error)
        } catch {
            throw SecretStoreError(SecretStoreError.io, "cannot open the store", underlying: "\(error)")
        }
    }

    /// Reads one value and closes the store again: for short-lived processes that read once (`moose
    /// token` with a valid cached token). It skips the shared-memory set-up of SQLite's write-ahead log
    /// (a `-shm` file created, sized, mapped, then deleted by the only connection): the read runs in
    /// exclusive locking mode, whose log index lives in the connection's memory.
    ///
    /// Safe next to other processes: the exclusive lock is only taken when no other connection has the
    /// store open (every open write-ahead-log connection holds a shared lock on the file) and never
    /// waited for — any failure, `busy` included, is thrown, and the caller reads the ordinary way. It is
    /// held for the read alone: the algorithms are fetched beforehand (their first use is most of
    /// the cost), and a passphrase store (scrypt, ~200 ms) is refused rather than read under the lock.
    /// Others opening the store meanwhile wait for it through their busy handler, as for any writer.
    ///
    /// Every check of `init` and `get` runs (an empty file, the schema version, the metadata, the
    /// master key check, each AEAD open), and a read sees every committed write (the log is read).
    /// Nothing is written: `query_only`, no creation, no migration (an older schema is an error here).
    package static func readSnapshot(path: String, masterKey: MasterKeySource, namespace: String, name: String)
        throws(SecretStoreError) -> [UInt8]?
    {
        if case .passphrase = masterKey {
            throw SecretStoreError(
                SecretStoreError.invalidArgument,
                "a passphrase store is not read as a snapshot (scrypt would run under the lock)")
        }
        // Nor one keyed by the Secret Service: a D-Bus round trip (or a keyring's prompt) under the
        // exclusive lock would hold every other process out.
        if case .secretService = masterKey {
            throw SecretStoreError(
                SecretStoreError.invalidArgument,
                "a Secret Service store is not read as a snapshot (D-Bus would run under the lock)")
        }
        LibCrypto.prepareStoreAlgorithms()
        let store = try SecretStore(
            path: path, masterKey: masterKey, create: false, durability: .full, readOnly: false,
            scryptParameters: MasterKeySource.defaultScryptParameters, snapshot: true)
        return try store.get(namespace: namespace, name: name)
    }

    // MARK: - Values

    /// Stores `value` under `namespace`/`name`, replacing any previous value. Durable when it returns
    /// (`synchronous=FULL`): a crash afterwards never loses it.
    public func put(_ value: some ContiguousBytes, namespace: String, name: String) throws(SecretStoreError) {
        try transaction { (tx) throws(SecretStoreError) in try tx.put(value, namespace: namespace, name: name) }
    }

    /// The value under `namespace`/`name`, or `nil`.
    ///
    /// - Throws: `tampered(namespace:name:)` if the stored ciphertext does not authenticate.
    public func get(namespace: String, name: String) throws(SecretStoreError) -> [UInt8]? {
        try locked { (state) throws(SecretStoreError) in try StoreFormat.get(&state, namespace: namespace, name: name) }
    }

    /// Removes the value; `true` if there was one.
    @discardableResult
    public func delete(namespace: String, name: String) throws(SecretStoreError) -> Bool {
        try transaction { (tx) throws(SecretStoreError) in try tx.delete(namespace: namespace, name: name) }
    }

    /// The entries (metadata only) of one namespace, or of all, sorted by namespace and name.
    public func list(namespace: String? = nil) throws(SecretStoreError) -> [Entry] {
        try locked { (state) throws(SecretStoreError) in try StoreFormat.list(state, namespace: namespace) }
    }

    /// Stores an `Encodable` value as JSON.
    public func put<T: Encodable>(_ value: T, namespace: String, name: String, encoder: JSONEncoder = JSONEncoder())
        throws
    {
        try put(Array(encoder.encode(value)), namespace: namespace, name: name)
    }

    /// Reads a `Decodable` value stored as JSON.
    public func get<T: Decodable>(
        _ type: T.Type, namespace: String, name: String,
        decoder: JSONDecoder = JSONDecoder()
    ) throws -> T? {
        guard let bytes = try get(namespace: namespace, name: name) else { return nil }
        return try decoder.decode(T.self, from: Data(bytes))
    }

    // MARK: - Transactions

    /// A group of reads and writes that commits atomically (`BEGIN IMMEDIATE` … `COMMIT`), or not at all.
    public struct Transaction: ~Copyable {
        fileprivate var state: UnsafeMutablePointer<State>

        /// Stores a value (see `SecretStore.put`).
        public mutating func put(_ value: some ContiguousBytes, namespace: String, name: String)
            throws(SecretStoreError)
        {
            try StoreFormat.put(
                &state.pointee, value: value.withUnsafeBytes { Array($0) }, namespace: namespace, name: name)
        }

        /// Reads a value (see `SecretStore.get`).
        public func get(namespace: String, name: String) throws(SecretStoreError) -> [UInt8]? {
            try StoreFormat.get(&state.pointee, namespace: namespace, name: name)
        }

        /// Removes a value.
        @discardableResult
        public mutating func delete(namespace: String, name: String) throws(SecretStoreError) -> Bool {
            try StoreFormat.delete(state.pointee, namespace: namespace, name: name)
        }

        /// Checks, inside this transaction, that `lease` is still held (a fencing check): commit only then.
        package func requireLease(_ lease: some FencedLease) throws(SecretStoreError) {
            try Leases.require(state.pointee, lease)
        }
    }

    /// Runs `body` in one write transaction: every put and delete in it lands together or not at all.
    ///
    /// ```swift
    /// try store.transaction { tx in
    ///     try tx.put(access, namespace: "session", name: "access_token")
    ///     try tx.put(refresh, namespace: "session", name: "refresh_token")
    /// }
    /// ```
    public func transaction<R>(_ body: (inout Transaction) throws(SecretStoreError) -> R) throws(SecretStoreError) -> R
    {
        try locked { (state) throws(SecretStoreError) in
            try withUnsafeMutablePointer(to: &state) { (pointer) throws(SecretStoreError) -> R in
                var tx = Transaction(state: pointer)
                return try StoreFormat.inTransaction(pointer.pointee.connection) { () throws(SecretStoreError) -> R in
                    try StoreFormat.refreshCurrentKey(&pointer.pointee)
                    return try body(&tx)
                }
            }
        }
    }

    // MARK: - Keys

    /// Rewraps the data keys with a new master key (one small transaction; values are untouched).
    /// Afterwards the old master key no longer opens the store.
    public func rotateMasterKey(
        to newKey: MasterKeySource,
        scryptParameters: Scrypt.Parameters = MasterKeySource.defaultScryptParameters
    ) throws(SecretStoreError) {
        try locked { (state) throws(SecretStoreError) in
            try StoreFormat.rotateMasterKey(&state, to: newKey, scrypt: scryptParameters)
        }
    }

    /// Creates a new data key and re-encrypts every value with it, in one transaction; old data keys
    /// are then deleted.
    public func rotateDataKey() throws(SecretStoreError) {
        try locked { (state) throws(SecretStoreError) in try StoreFormat.rotateDataKey(&state) }
    }

    /// Opens every value and reports those that do not (wrong key, tampered), plus SQLite's own
    /// `integrity_check`. Changes nothing.
    public func check() throws(SecretStoreError) -> CheckReport {
        try locked { (state) throws(SecretStoreError) in try StoreFormat.check(&state) }
    }

    /// What `check()` found.
    public struct CheckReport: Sendable {
        /// Values that opened.
        public let good: Int
        /// Values that did not, with the reason.
        public let bad: [(entry: Entry, error: SecretStoreError)]
        /// SQLite's `PRAGMA integrity_check` result (`ok` when the file is sound).
        public let integrity: String
        /// `true` when every value opened and the file is sound.
        public var isHealthy: Bool { bad.isEmpty && integrity == "ok" }
    }

    // MARK: - Locking

    func locked<R>(_ body: (inout State) throws(SecretStoreError) -> R) throws(SecretStoreError) -> R {
        box.lock.lock()
        defer {
            box.state.connection.resetAll()
            box.lock.unlock()
        }
        return try body(&box.state)
    }
}

/// The store's mutable state and the lock that guards it. Every access goes through
/// `SecretStore.locked`, which holds `lock` for the whole call: that is what makes it Sendable.
/// Not a `Mutex<State>`: its `withLock` wants the state and the result `sending`, which a critical
/// section that hands the non-Sendable connection to the caller's closure and returns its generic
/// result cannot be (region isolation refuses it).
// unchecked: `state` is only touched between `lock.lock()` and `lock.unlock()` in `SecretStore.locked`.
final class StateBox: @unchecked Sendable {
    let lock = PThreadMutex()
    var state: SecretStore.State

    init(_ state: consuming SecretStore.State) { self.state = state }
}

/// A plain mutex (no `sending` constraints on what the critical section touches).
// unchecked: a pthread mutex is made to be shared between threads; the pointer never changes.
final class PThreadMutex: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
}
