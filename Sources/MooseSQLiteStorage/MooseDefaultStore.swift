#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseSealing
import MooseSecretStore

extension EncryptedSessionStorage {
    /// Where the `moose` CLI keeps its store unless told otherwise: `$MOOSE_STORE`, else
    /// `$XDG_DATA_HOME/moose/store.sqlite`, else `$HOME/.local/share/moose/store.sqlite` (each base
    /// folder only when it is an absolute path: never the current directory).
    ///
    /// - Parameter environment: the variables to read (default: the process's).
    /// - Returns: the path (or `postgres://` URL, for `moose-pg`), or `nil` when neither `MOOSE_STORE`,
    ///   an absolute `XDG_DATA_HOME` nor an absolute `HOME` is set.
    public static func mooseStorePath(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> String?
    {
        if let path = environment["MOOSE_STORE"], !path.isEmpty { return path }
        if let base = environment["XDG_DATA_HOME"], base.hasPrefix("/") { return base + "/moose/store.sqlite" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.local/share/moose/store.sqlite" }
        return nil
    }

    /// The master key of `moose`'s store unless told otherwise: the variable `MOOSE_STORE_KEY` (the
    /// key in base64) when set, else the key file `$XDG_CONFIG_HOME/moose/store.key`, else
    /// `$HOME/.config/moose/store.key`.
    ///
    /// - Parameter environment: the variables to read (default: the process's).
    /// - Returns: the key's source, or `nil` when neither `MOOSE_STORE_KEY`, an absolute `XDG_CONFIG_HOME`
    ///   nor an absolute `HOME` is set.
    public static func mooseMasterKey(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> MasterKeySource?
    {
        if let value = environment["MOOSE_STORE_KEY"], !value.isEmpty { return .environment("MOOSE_STORE_KEY") }
        if let base = environment["XDG_CONFIG_HOME"], base.hasPrefix("/") { return .keyFile(base + "/moose/store.key") }
        if let home = environment["HOME"], home.hasPrefix("/") { return .keyFile(home + "/.config/moose/store.key") }
        return nil
    }

    /// `true` when `location` (a `--store` or `MOOSE_STORE` value) is a PostgreSQL URL —
    /// `postgres://` or `postgresql://`, in any case — not a file path.
    package static func namesPostgreSQLDatabase(_ location: String) -> Bool {
        let lowered = location.prefix(16).lowercased()
        return lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://")
    }

    /// The sessions `moose login` made, opened as `moose` opens them by default (`mooseStorePath`,
    /// `mooseMasterKey`): an app renews them with `TokenManager.open(key:storage:transport:)`, and
    /// `moose token` hands out the app's.
    ///
    /// ```swift
    /// let storage = try EncryptedSessionStorage.moose()
    /// let work = try await TokenManager.open(key: "work", storage: storage, transport: CurlTransport())
    /// ```
    ///
    /// - Parameters:
    ///   - environment: the variables to read (default: the process's).
    ///   - create: make the store (and a new key file) when missing; default `false`: `moose login` makes it.
    /// - Returns: the storage on `moose`'s file store.
    /// - Throws: `SecretStoreError` with `invalidArgument` when no location can be made from the
    ///   environment (no absolute `HOME`) or `MOOSE_STORE` names a PostgreSQL database (open it with
    ///   MoosePostgres); the store's own errors otherwise (missing, wrong key, damaged).
    public static func moose(
        environment: [String: String] = ProcessInfo.processInfo.environment, create: Bool = false
    ) throws -> EncryptedSessionStorage {
        guard let path = mooseStorePath(environment: environment), let key = mooseMasterKey(environment: environment)
        else {
            throw SecretStoreError(
                SecretStoreError.invalidArgument,
                "moose's store has no default location here: set HOME (or XDG_DATA_HOME and XDG_CONFIG_HOME), "
                    + "or MOOSE_STORE and MOOSE_STORE_KEY")
        }
        guard !namesPostgreSQLDatabase(path) else {
            throw SecretStoreError(
                SecretStoreError.invalidArgument,
                "MOOSE_STORE names a PostgreSQL database: open it with MoosePostgres (PostgresSessionStorage)")
        }
        return EncryptedSessionStorage(store: try SecretStore(path: path, masterKey: key, create: create))
    }
}
