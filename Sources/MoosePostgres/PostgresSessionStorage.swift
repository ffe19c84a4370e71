#if MoosePostgres
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import Logging
public import MooseOAuth
public import MooseSealing
import MooseCrypto
import PostgresNIO
import Synchronization

/// Sessions and leases in PostgreSQL, shared by every replica of a service (and every `moose` CLI
/// given the same `--store postgres://…`): one refresh per fleet.
///
/// - Values are sealed client-side in MooseSealing's envelope, the SQLite store's too — AES-256-GCM
///   under a data key wrapped by the master key (key file, environment, passphrase) — with AAD
///   binding each value to this store, its session key, its data key id and its generation: the database sees ciphertext,
///   and a value copied to another row or rolled back to another generation does not open.
/// - Leases are rows (holder, fencing token, expiry by the *server's* clock): taken with one
///   conditional `INSERT … ON CONFLICT DO UPDATE`, renewed and released with conditional `UPDATE`s.
///   A save fenced by a lease locks the lease row (`FOR SHARE`) in the same statement as its
///   compare-and-set on the generation, so a lease taken over commits nothing of its old holder's.
/// - No session-level state: no advisory locks held across statements, no long transactions, no
///   named prepared statements (postgres-nio's unnamed statements are parsed, bound and executed
///   before one Sync), so it works through PgBouncer in transaction-pooling mode.
/// - A released lease is announced with NOTIFY; waiters in other replicas LISTEN (on a direct
///   connection) and retry at once, and otherwise poll — a lost notification costs latency, never
///   correctness. The coordinator re-reads the session inside the lease before deciding anything.
/// - Connections come from postgres-nio's `PostgresClient` pool, which needs `run()` running:
///
/// ```swift
/// let storage = try PostgresSessionStorage(url: "postgres://app@db.internal/app?sslmode=verify-full",
///                                          masterKey: .environment("MOOSE_STORE_KEY"))
/// try await withThrowingDiscardingTaskGroup { group in
///     group.addTask { await storage.run() }            // the pool and the LISTEN connection
///     let coordinator = RefreshCoordinator(key: "default", storage: storage, authorizer: flow)
///     let token = try await coordinator.accessToken()
///     …
///     group.cancelAll()                                 // closes the pool
/// }
/// // or, for a bounded piece of work: try await PostgresSessionStorage.withRunning(configuration, masterKey: key) { storage in … }
/// ```
///
/// The first operation creates the schema (forward-only migrations, serialised across replicas)
/// and the store's keys, or opens them with the master key; a schema written by a newer Moose is
/// refused untouched. Every operation waits at most `connect_timeout` (default 10 s) — a database
/// that cannot be reached is `OAuthError.storeUnavailable`, which the coordinator reports before any
/// refresh token is spent.
public final class PostgresSessionStorage: SessionStorage {
    /// The schema version this Moose creates, migrates to and reads.
    public static var schemaVersion: Int { Int(Schema.version) }
    /// The namespace of session values in the AAD (the same as the SQLite store's).
    public static let namespace = "moose.session"

    /// The connection settings (`description` is the redacted URL).
    public let configuration: PostgresStorageConfiguration
    let masterKey: MasterKeySource
    let connector: Connector
    let client: PostgresClient
    let logger: Logger
    let tables: Tables
    let signals = LeaseSignals()

    struct State {
        var ring: KeyRing?
        var opening: Task<KeyRing, any Error>?
        var running = false
        /// The LISTEN connection is up and a probe notification came back through it.
        var listening = false
    }

    let state = Mutex(State())

    /// A storage for `configuration` with `masterKey`. Makes no connection: they are made by `run()`
    /// (the pool) and by the first operation (which also creates or migrates the schema).
    ///
    /// - Parameters:
    ///   - configuration: the database, TLS, schema, timeouts and lease settings.
    ///   - masterKey: the key the sessions are sealed under; every replica must use the same one.
    ///   - logger: background messages (migrations, the LISTEN connection); none by default.
    ///     Never a password, a token or a key.
    /// - Throws: `PostgresStorageError.invalidConfiguration` (also for an unreadable `sslrootcert`).
    public init(configuration: PostgresStorageConfiguration, masterKey: MasterKeySource, logger: Logger? = nil)
        throws(PostgresStorageError)
    {
        let configuration = try configuration.validated()
        self.configuration = configuration
        self.masterKey = masterKey
        let logger = logger ?? Logger(label: "moose.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        self.logger = logger
        connector = try Connector(configuration, logger: logger)
        client = PostgresClient(configuration: connector.clientConfiguration(), backgroundLogger: logger)
        tables = Tables(schema: configuration.schema)
    }

    /// A storage for a `postgres://` URL (see `PostgresStorageConfiguration` for its parameters).
    ///
    /// - Parameters:
    ///   - url: a `postgres://` or `postgresql://` URL, with its query parameters (`sslmode`, `schema`…).
    ///   - masterKey: the key the sessions are sealed under; every replica must use the same one.
    ///   - logger: background messages; none by default.
    /// - Throws: `PostgresStorageError.invalidConfiguration`, naming the part of the URL that is wrong
    ///   (never the password).
    public convenience init(url: String, masterKey: MasterKeySource, logger: Logger? = nil) throws(PostgresStorageError)
    {
        try self.init(configuration: PostgresStorageConfiguration(url: url), masterKey: masterKey, logger: logger)
    }

    /// Runs the connection pool and the LISTEN connection until the calling task is cancelled. Call
    /// it once, in a task that lives as long as the storage is used (operations fail with
    /// `storeUnavailable` when it is not running). A second call returns at once.
    public func run() async {
        let first = state.withLock { state -> Bool in
            if state.running { return false }
            state.running = true
            return true
        }
        guard first else {
            logger.warning("moose: PostgresSessionStorage.run() was called twice; the second call returns at once")
            return
        }
        await withDiscardingTaskGroup { group in
            group.addTask { await self.client.run() }
            if self.configuration.listens { group.addTask { await self.listen() } }
        }
        state.withLock {
            $0.running = false; $0.listening = false
        }
    }

    /// Makes a storage, runs it while `body` runs, and shuts it down afterwards (also when `body` throws).
    ///
    /// - Parameters:
    ///   - configuration: the database, TLS, schema, timeouts and lease settings.
    ///   - masterKey: the key the sessions are sealed under.
    ///   - logger: background messages; none by default.
    ///   - body: the work to do with the running storage; the storage must not outlive it.
    /// - Returns: what `body` returns.
    /// - Throws: `PostgresStorageError.invalidConfiguration` before `body` runs; otherwise what `body`
    ///   throws.
    ///
    /// ```swift
    /// let token = try await PostgresSessionStorage.withRunning(configuration, masterKey: .keyFile(path)) { storage in
    ///     try await RefreshCoordinator(key: "default", storage: storage, authorizer: flow).accessToken()
    /// }
    /// ```
    public static func withRunning<Result: Sendable>(
        _ configuration: PostgresStorageConfiguration, masterKey: MasterKeySource, logger: Logger? = nil,
        _ body: (PostgresSessionStorage) async throws -> Result
    ) async throws -> Result {
        let storage = try PostgresSessionStorage(configuration: configuration, masterKey: masterKey, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self, returning: Result.self) { group in
            group.addTask { await storage.run() }
            do {
                let result = try await body(storage)
                group.cancelAll()
                return result
            } catch {
                group.cancelAll()
                throw error
            }
        }
    }

    /// Creates or migrates the schema and opens the store's keys now (otherwise the first operation
    /// does it). Needs no `run()`: it uses a connection of its own.
    ///
    /// - Throws: `PostgresStorageError`: `unavailable`, `wrongKey`, `keyUnavailable`, `unsupportedVersion`,
    ///   `notMigrated`, `corrupt`, `tampered`.
    public func prepare() async throws(PostgresStorageError) {
        _ = try await keyRing()
    }

    /// `true` while lease waiters are woken by notifications (the LISTEN connection is up and a probe
    /// NOTIFY came back through it). When `false` they poll.
    public var notificationsAreLive: Bool { state.withLock { $0.listening } }

    // MARK: - Operations

    var operationLimit: Duration { .milliseconds(Int64(configuration.connectTimeout * 1000)) }

    /// Runs `body` (given the attempt number) within `connect_timeout`, retrying failures that leave
    /// nothing done (a broken connection, a restarting server) with a short backoff.
    func perform<T: Sendable>(
        _ what: String, needsPool: Bool = true,
        _ body: @escaping @Sendable (Int) async throws -> T
    ) async throws(PostgresStorageError) -> T {
        if needsPool, !state.withLock({ $0.running }) {
            throw PostgresStorageError(
                PostgresStorageError.unavailable,
                "\(what) (\(configuration.redactedURL)): the storage is not running: call run() in a task first (or use withRunning)"
            )
        }
        let start = ContinuousClock.now
        var delay = 0.02
        var last: PostgresStorageError? = nil
        var attempt = 1
        while true {
            let remaining = operationLimit - (ContinuousClock.now - start)
            do {
                guard remaining > .zero else { throw DeadlineExceeded() }
                let number = attempt
                return try await Deadline.run(within: remaining) { try await body(number) }
            } catch {
                if error is DeadlineExceeded, let last {
                    throw PostgresStorageError(
                        PostgresStorageError.unavailable,
                        "\(last.message); gave up after \(Connector.seconds(configuration.connectTimeout)) (connect_timeout)",
                        sqlState: last.sqlState)
                }
                let (transient, mapped) = connector.classify(error, doing: what)
                guard transient else { throw mapped }
                last = mapped
                attempt += 1
                let seconds = min(
                    delay,
                    max(0, Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18))
                try? await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
                delay = min(delay * 2, 0.5)
            }
        }
    }

    /// The key ring, opening the store (and creating or migrating the schema) on first use.
    func keyRing() async throws(PostgresStorageError) -> KeyRing {
        if let ring = state.withLock({ $0.ring }) { return ring }
        let task: Task<KeyRing, any Error> = state.withLock { state in
            if let opening = state.opening { return opening }
            let opening = Task { try await self.openStore() }
            state.opening = opening
            return opening
        }
        do {
            let ring = try await task.value
            return state.withLock { state in
                if state.opening == task { state.opening = nil }
                if state.ring == nil { state.ring = ring }
                return state.ring ?? ring
            }
        } catch {
            state.withLock { if $0.opening == task { $0.opening = nil } }
            throw connector.classify(error, doing: "opening the store").error
        }
    }

    private func openStore() async throws -> KeyRing {
        try await perform("opening the store", needsPool: false) { _ in
            let connection = try await self.connector.connect(to: self.configuration.endpoint)
            do {
                let tables = self.tables, mode = self.configuration.migrations, masterKey = self.masterKey,
                    logger = self.logger
                let ring = try await connection.withTransaction(logger: logger) { connection in
                    try await Schema.open(connection, tables: tables, mode: mode, masterKey: masterKey, logger: logger)
                }
                try? await connection.close()
                return ring
            } catch {
                try? await connection.close()
                throw error
            }
        }
    }

    /// Re-reads the data keys (another replica rotated them, or a value names a key we do not have).
    func reloadKeys() async throws(PostgresStorageError) -> KeyRing {
        let ring = try await keyRing()
        let t = tables
        let rows = try await perform("reading the data keys") { _ in
            try await self.client.query(
                """
                SELECT d.id, d.wrapped, c.value, k.value FROM \(unescaped: t.dataKeys) d, \(unescaped: t.meta) c, \(unescaped: t.meta) k
                WHERE c.name = 'current_key' AND k.name = 'key_check'
                """
            ).collect()
        }
        var fresh = ring
        do {
            if let first = rows.first {
                let (_, _, current, check) = try first.columns(4).decode(
                    (Int64, ByteBuffer, ByteBuffer, ByteBuffer).self)
                guard try Envelope.isKeyCheck(Array(check.readableBytesView), of: ring.master, storeID: ring.storeID)
                else {
                    throw PostgresStorageError(
                        PostgresStorageError.wrongKey,
                        "the master key of schema \(t.schema) was rotated: this process's \(masterKey.description) no longer opens it"
                    )
                }
                guard let id = Envelope.int64(bigEndian: Array(current.readableBytesView)), id > 0 else {
                    throw PostgresStorageError(PostgresStorageError.corrupt, "the current data key id is damaged")
                }
                fresh.currentKeyID = id
            }
            fresh.dataKeys = try Schema.unwrap(rows, ring: ring)
        } catch let error as PostgresStorageError {
            throw error
        } catch {
            throw connector.classify(error, doing: "reading the data keys").error
        }
        guard fresh.dataKeys[fresh.currentKeyID] != nil else {
            throw PostgresStorageError(
                PostgresStorageError.corrupt, "the current data key \(fresh.currentKeyID) is missing")
        }
        state.withLock { $0.ring = fresh }
        return fresh
    }

    // MARK: - Sealing

    /// AAD: the envelope's (`moose-secret/v1` ‖ store id ‖ namespace ‖ key ‖ key id, as in the SQLite
    /// store) followed by the generation, so a value rolled back to another generation of its row does
    /// not open either.
    static func aad(storeID: [UInt8], key: String, keyID: Int64, generation: Int64) -> [UInt8] {
        Envelope.valueAAD(storeID: storeID, namespace: namespace, name: key, keyID: keyID)
            + Envelope.bigEndian(generation)
    }

    func seal(_ session: OAuthSession, key: String, generation: Int64, ring: KeyRing) throws(PostgresStorageError) -> (
        keyID: Int64, sealed: [UInt8]
    ) {
        guard let dataKey = ring.dataKeys[ring.currentKeyID] else {
            throw PostgresStorageError(
                PostgresStorageError.corrupt, "the current data key \(ring.currentKeyID) is missing")
        }
        guard var plain = try? JSONEncoder().encode(session) else {
            throw PostgresStorageError(PostgresStorageError.invalidArgument, "the session cannot be encoded")
        }
        defer { plain.resetBytes(in: 0..<plain.count) }
        do {
            let sealed = try AESGCM.sealCombined(
                plain, using: dataKey,
                authenticating: Self.aad(
                    storeID: ring.storeID, key: key, keyID: ring.currentKeyID, generation: generation))
            return (ring.currentKeyID, sealed)
        } catch {
            throw PostgresStorageError(PostgresStorageError.corrupt, "encryption failed: \(error.message)")
        }
    }

    /// Opens a stored value; a data key this process does not know is looked up once.
    func open(_ sealed: [UInt8], key: String, generation: Int64, keyID: Int64) async throws(PostgresStorageError)
        -> OAuthSession
    {
        guard sealed.count >= 28, sealed.count <= (16 << 20) + 28, generation > 0, keyID > 0 else {
            throw Self.tampered(key, "it is not a sealed value")
        }
        var ring = try await keyRing()
        if ring.dataKeys[keyID] == nil { ring = try await reloadKeys() }
        guard let dataKey = ring.dataKeys[keyID] else {
            throw Self.tampered(key, "it names data key \(keyID), which this store does not have")
        }
        var plain: [UInt8]
        do {
            plain = try AESGCM.openCombined(
                sealed, using: dataKey,
                authenticating: Self.aad(storeID: ring.storeID, key: key, keyID: keyID, generation: generation))
        } catch {
            throw Self.tampered(key, "it was modified, or moved from another row or generation")
        }
        defer { for index in plain.indices { plain[index] = 0 } }
        guard let session = try? JSONDecoder().decode(OAuthSession.self, from: Data(plain)) else {
            throw PostgresStorageError(PostgresStorageError.corrupt, "the session \(key) opens but is not a session")
        }
        return session
    }

    static func tampered(_ key: String, _ why: String) -> PostgresStorageError {
        PostgresStorageError(PostgresStorageError.tampered, "the session \(key) does not authenticate: \(why)")
    }

    // MARK: - Argument checks

    static func validate(key: String) throws(PostgresStorageError) {
        guard !key.isEmpty, key.utf8.count <= 1024, !key.utf8.contains(0) else {
            throw PostgresStorageError(
                PostgresStorageError.invalidArgument, "a session key must be 1…1024 bytes without NUL")
        }
    }

    static func validate(lease name: String) throws(PostgresStorageError) {
        guard !name.isEmpty, name.utf8.count <= 1024, !name.utf8.contains(0) else {
            throw PostgresStorageError(
                PostgresStorageError.invalidArgument, "a lease name must be 1…1024 bytes without NUL")
        }
    }

    static func validate(ttl: TimeInterval) throws(PostgresStorageError) {
        guard ttl.isFinite, ttl > 0, ttl <= 86_400 else {
            throw PostgresStorageError(PostgresStorageError.invalidArgument, "a lease ttl must be 0…86400 s")
        }
    }

    static func validate(_ lease: SessionLease) throws(PostgresStorageError) {
        try validate(lease: lease.name)
        guard !lease.holder.isEmpty, lease.holder.utf8.count <= 64, !lease.holder.utf8.contains(0) else {
            throw PostgresStorageError(PostgresStorageError.invalidArgument, "a lease holder must be 1…64 bytes")
        }
    }

    /// A lease's expiry from the server's epoch milliseconds (bounded before conversion).
    static func date(milliseconds: Int64) throws(PostgresStorageError) -> Date {
        guard milliseconds > -100_000_000_000_000, milliseconds < 100_000_000_000_000 else {
            throw PostgresStorageError(PostgresStorageError.corrupt, "a lease expiry is out of range")
        }
        return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// The storage contract's errors for this module's.
    static func oauth(_ error: PostgresStorageError) -> OAuthError {
        if error.code == PostgresStorageError.invalidArgument {
            return OAuthError(OAuthError.invalidConfiguration, error.message, underlying: error)
        }
        let message = error.code == PostgresStorageError.unavailable ? error.message : "\(error.code): \(error.message)"
        return OAuthError(OAuthError.storeUnavailable, message, underlying: error)
    }

    static func conflict(_ key: String, expected: Int64?) -> OAuthError {
        OAuthError(
            OAuthError.storageConflict,
            "the session \(key) is not at generation \(expected.map(String.init) ?? "none"): someone else wrote it")
    }

    static func leaseLost(_ name: String) -> OAuthError {
        OAuthError(OAuthError.leaseLost, "lease \(name) expired or was taken over")
    }
}
#endif
