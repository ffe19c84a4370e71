public import MooseOAuth
public import MooseSealing

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

/// A store a program's backend opened (`PostgresStores.backend`): the storage the commands use — its
/// sessions, and `moose store init|check|rotate-key` through its `SessionStoreMaintenance` — and the work it
/// needs running while they do (a connection pool).
public struct CLIOpenedStore: Sendable {
    /// The sessions and the store's upkeep.
    public let storage: any SessionStorage & SessionStoreMaintenance
    /// Started in a detached task when the store is opened; cancelled when the command ends, which
    /// waits up to 2 s for it to return.
    let running: (@Sendable () async -> Void)?

    /// A store whose `storage` needs `running` to run while it is used (`PostgresSessionStorage.run()`).
    ///
    /// - Parameters:
    ///   - storage: the sessions and the store's upkeep.
    ///   - running: what must run in the background while the command uses `storage`; `nil` for nothing.
    public init(_ storage: any SessionStorage & SessionStoreMaintenance, running: (@Sendable () async -> Void)? = nil) {
        self.storage = storage
        self.running = running
    }
}

/// What a `postgres://` store is opened with.
public enum PostgresStores: Sendable {
    /// Replace this process with `moose-pg` next to the running binary (else on the `PATH`), same
    /// arguments and environment: `moose`, which links no SwiftNIO.
    case handoff
    /// Open it in this process with this backend: `moose-pg`. A `CLIError` it throws is the command's
    /// message and exit status.
    case backend(@Sendable (CLIStoreLocation) throws -> CLIOpenedStore)
}
