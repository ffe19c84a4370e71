public import MooseOAuth
public import MooseSealing

/// Where a command's sessions live when `--store` (or `MOOSE_STORE`) is not a file: a backend a
/// program registers at start-up with `MooseCLIProgram.run(postgres:)` — `moose-pg` registers its
/// PostgreSQL backend. The file store is built in and never goes through this protocol.
///
/// The commands are synchronous: each method blocks until its work is done (run async work with
/// `CLIBlocking.run`). Errors thrown by the session methods reach the user as they are; the store
/// methods throw `CLIError` for the messages and exit statuses of `moose store`.
public protocol CLISessionBackend: AnyObject {
    /// The storage a `RefreshCoordinator` uses for the command's session.
    var storage: any SessionStorage { get }

    /// The session stored under `key`, if any.
    func load(_ key: String) throws -> StoredSession?
    /// Writes `session` under `key` whatever is stored there (a new login).
    func replace(_ session: OAuthSession, key: String) throws
    /// A compare-and-set write (see `SessionStorage.save`); returns the new generation.
    func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?) throws -> Int64
    /// Deletes the session under `key`; `false` when there was none.
    func delete(_ key: String) throws -> Bool
    /// Every stored session's key.
    func keys() throws -> [String]
    /// Releases what the backend holds (connections, background tasks); called once, at the end.
    func close()

    /// `moose store init`: creates (or migrates) the store and checks the master key; returns the
    /// line to print.
    func prepareStore() throws -> String
    /// `moose store check`: opens every session and reports, changing nothing.
    func checkStore() throws -> CLIStoreCheck
    /// `moose store rotate-key`: re-seals every session under a fresh data key; returns the line to print.
    func rotateDataKey() throws -> String
    /// `moose store rotate-key --master …`: rewraps the data key under `newKey`; returns the line to print.
    func rotateMasterKey(to newKey: MasterKeySource) throws -> String
}

/// What `moose store check` prints for a registered backend.
public struct CLIStoreCheck: Sendable {
    /// Lines to print, in order (never a secret).
    public var lines: [String]
    /// `false` when a session did not open or the store is damaged (exit 1).
    public var isHealthy: Bool

    /// A report of `lines`, healthy or not.
    public init(lines: [String], isHealthy: Bool) {
        self.lines = lines
        self.isHealthy = isHealthy
    }
}

/// The store a backend is asked to open: the URL given with `--store` (or `MOOSE_STORE`) and the
/// master key the options chose.
public struct CLIStoreLocation: Sendable {
    /// The store's URL as given (it may hold a password: never print it as is).
    public let url: String
    /// The master key source (`--key-file`, `--key-env`, `--passphrase-file`, or the defaults).
    public let masterKey: MasterKeySource

    init(url: String, masterKey: MasterKeySource) {
        self.url = url
        self.masterKey = masterKey
    }
}

/// What a `postgres://` store is opened with.
public enum PostgresStores: Sendable {
    /// Replace this process with `moose-pg` next to the running binary (else on the `PATH`), same
    /// arguments and environment: `moose`, which links no SwiftNIO.
    case handoff
    /// Open it in this process with this backend: `moose-pg`.
    case backend(@Sendable (CLIStoreLocation) throws -> any CLISessionBackend)
}
