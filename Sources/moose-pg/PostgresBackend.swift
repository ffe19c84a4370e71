#if MoosePostgres
import Dispatch
import Synchronization
import MooseCLI
import MooseOAuth
import MoosePostgres
import MooseSecretStore
import MooseSealing
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The CLI's session backend for `postgres://` stores: a `PostgresSessionStorage` whose `run()`
/// goes on in a background task while the synchronous command calls into it.
final class PostgresBackend: CLISessionBackend, Sendable {
    let postgres: PostgresSessionStorage
    private let runner: Task<Void, Never>
    private let closed = Mutex(false)

    init(_ location: CLIStoreLocation) throws {
        let storage = try Self.open(location)
        postgres = storage
        runner = Task.detached { await storage.run() }
    }

    /// The storage `location` names (the password from `PGPASSWORD` when the URL has none); a bad URL
    /// or key is a usage error.
    private static func open(_ location: CLIStoreLocation) throws -> PostgresSessionStorage {
        do {
            var configuration = try PostgresStorageConfiguration(url: location.url)
            if configuration.password == nil, let password = getenv("PGPASSWORD").map({ String(cString: $0) }),
                !password.isEmpty
            {
                configuration.password = password
            }
            return try PostgresSessionStorage(configuration: configuration, masterKey: location.masterKey)
        } catch {
            throw CLIError.usage(error.message)
        }
    }

    var storage: any SessionStorage { postgres }

    /// Runs `body` on the storage and waits for it (from the synchronous command).
    func call<T: Sendable>(_ body: @escaping @Sendable (PostgresSessionStorage) async throws -> T) throws -> T {
        let storage = postgres
        return try CLIBlocking.run { try await body(storage) }
    }

    func load(_ key: String) throws -> StoredSession? { try call { try await $0.load(key) } }

    func replace(_ session: OAuthSession, key: String) throws {
        _ = try call { try await $0.replace(session, key: key) }
    }

    func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?) throws -> Int64 {
        try call { try await $0.save(session, key: key, expectedGeneration: expectedGeneration, lease: nil) }
    }

    func delete(_ key: String) throws -> Bool { try call { try await $0.delete(key) } }

    func keys() throws -> [String] { try call { try await $0.keys() } }

    func prepareStore() throws -> String {
        do { try call { try await $0.prepare() } } catch { throw Self.cliError(error) }
        let configuration = postgres.configuration
        return
            "store \(configuration.redactedURL) is ready (schema \(configuration.schema), version \(PostgresSessionStorage.schemaVersion)); key OK"
    }

    func checkStore() throws -> CLIStoreCheck {
        let report: PostgresSessionStorage.CheckReport
        do { report = try call { try await $0.check() } } catch { throw Self.cliError(error) }
        let configuration = postgres.configuration
        var lines = report.bad.map { key, error in "BAD  \(PostgresSessionStorage.namespace)/\(key): \(error.code)" }
        lines.append(
            "database: \(configuration.redactedURL), schema \(configuration.schema) version \(report.schemaVersion)")
        lines.append("\(report.good) sessions open, \(report.bad.count) do not (\(report.tombstones) deleted)")
        return CLIStoreCheck(lines: lines, isHealthy: report.isHealthy)
    }

    func rotateDataKey() throws -> String {
        do {
            let count = try call { try await $0.rotateDataKey() }
            return "data key rotated; \(count) sessions sealed again"
        } catch let error as PostgresStorageError {
            throw CLIError.failed(error.description)
        }
    }

    func rotateMasterKey(to newKey: MasterKeySource) throws -> String {
        do {
            try call { try await $0.rotateMasterKey(to: newKey) }
            return "master key rotated; every machine that uses this store needs the new key"
        } catch let error as PostgresStorageError {
            throw CLIError.failed(error.description)
        }
    }

    /// Cancels `run()` and waits (up to 2 s) for the pool to close its connections.
    func close() {
        let first = closed.withLock { closed in
            defer { closed = true }; return !closed
        }
        guard first else { return }
        runner.cancel()
        let done = DispatchSemaphore(value: 0)
        let runner = self.runner
        Task.detached {
            await runner.value
            done.signal()
        }
        _ = done.wait(timeout: .now() + 2)
    }

    /// A store operation's error as `moose store` reports it (the same mapping as for a file store).
    static func cliError(_ error: any Error) -> any Error {
        if let error = error as? PostgresStorageError { return CLIError.failed(error.description) }
        if let error = error as? SecretStoreError {
            return error.code == SecretStoreError.invalidArgument
                ? CLIError.usage(error.message) : CLIError.failed("\(error.code): \(error.message)")
        }
        if let error = error as? OAuthError { return CLIError.failed(error.description) }
        return error
    }
}
#endif
