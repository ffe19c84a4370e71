#if MoosePostgres
import MooseCLI
import MoosePostgres
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The CLI's `postgres://` stores: a `PostgresSessionStorage` (its sessions and its upkeep), whose
/// `run()` goes on in the background while the command uses it.
enum PostgresBackend {
    /// The storage `location` names (the password from `PGPASSWORD` when the URL has none); a bad URL
    /// or key is a usage error.
    static func open(_ location: CLIStoreLocation) throws -> CLIOpenedStore {
        let storage: PostgresSessionStorage
        do {
            var configuration = try PostgresStorageConfiguration(url: location.url)
            if configuration.password == nil, let password = getenv("PGPASSWORD").map({ String(cString: $0) }),
                !password.isEmpty
            {
                configuration.password = password
            }
            storage = try PostgresSessionStorage(configuration: configuration, masterKey: location.masterKey)
        } catch {
            throw CLIError.usage(error.message)
        }
        return CLIOpenedStore(storage, running: { await storage.run() })
    }
}
#endif
