/// The upkeep of a sealed session store, alike for Moose's two: `EncryptedSessionStorage` (the SQLite
/// file, MooseSQLiteStorage) and `PostgresSessionStorage` (MoosePostgres). It is what `moose store init`,
/// `check` and `rotate-key` do, for an app that keeps its sessions in such a store and does its own upkeep.
///
/// ```swift
/// let report = try await storage.checkStore()
/// for line in report.lines { print(line) }
/// if !report.isHealthy { … a value does not open: the key is wrong, or a row was changed … }
/// ```
///
/// Every method returns what it did in words for a person (the store's name, counts, key ids, session
/// keys: never a secret, a token or a sealed value) and throws the store's own error type
/// (`SecretStoreError`, `PostgresStorageError`) when the store cannot be opened or changed.
public protocol SessionStoreMaintenance: Sendable {
    /// Makes the store ready: creates it (or migrates its schema) where the store does that on first
    /// use, and checks that the master key opens it.
    ///
    /// - Returns: one line saying which store is ready.
    func prepareStore() async throws -> String

    /// Opens every value with the master key (through the data keys) and reports those that do not:
    /// tampered, sealed under a key the store does not have, not what the store expects. Changes nothing.
    ///
    /// - Returns: the lines of the report, and whether every value opened.
    func checkStore() async throws -> SessionStoreCheck

    /// Seals every value again under a fresh data key (the master key does not change).
    ///
    /// - Returns: one line saying what was sealed again.
    func rotateStoreDataKey() async throws -> String

    /// Rewraps the store's data keys under `newKey` (the values are untouched). Afterwards only `newKey`
    /// opens the store; a new key file is made when `newKey` names one that does not exist yet.
    ///
    /// - Parameter newKey: the master key the store uses from now on.
    /// - Returns: one line saying the key was rotated, and what that means for the store's other users.
    func rotateStoreMasterKey(to newKey: MasterKeySource) async throws -> String
}

/// What `SessionStoreMaintenance.checkStore()` found.
public struct SessionStoreCheck: Sendable, Equatable {
    /// The report for a person, in order: one line per value that does not open (its name and why), then
    /// the store's own state and the counts. Never a secret.
    public var lines: [String]
    /// `false` when a value did not open or the store itself is damaged.
    public var isHealthy: Bool

    /// A report of `lines`, healthy or not.
    ///
    /// - Parameters:
    ///   - lines: the report's lines, in order (never a secret).
    ///   - isHealthy: whether every value opened and the store is sound.
    public init(lines: [String], isHealthy: Bool) {
        self.lines = lines
        self.isHealthy = isHealthy
    }
}
