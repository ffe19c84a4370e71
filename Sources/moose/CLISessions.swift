import MooseOAuth
import MooseSecretStore
#if MOOSE_POSTGRES
import MoosePostgres
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `moose` is built without SwiftNIO, so that its hot commands start fast; a PostgreSQL store is
/// handled by `moose-pg` (the same commands built with `MoosePostgres`), installed next to it:
/// `moose` replaces itself with it, same arguments, same environment.
enum PostgresHandoff {
    static func exec() throws -> Never {
        var path = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        let own = length > 0 ? String(decoding: path.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
        let folder = own.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let sibling = (folder.isEmpty ? "." : folder) + "/moose-pg"
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(sibling)] + CommandLine.arguments.dropFirst().map { strdup($0) } + [nil]
        execv(sibling, argv)
        execvp("moose-pg", argv)   // not next to moose: on the PATH, then
        for pointer in argv { free(pointer) }
        throw CLIError.usage("--store names a PostgreSQL database, which needs moose-pg next to moose (\(sibling): \(String(cString: strerror(errno)))); "
                             + "build it with swift build --product moose-pg, or give a file store")
    }
}

/// The sessions a command works on: the encrypted SQLite file (read synchronously: the fast path
/// of `moose token` never starts the concurrency runtime or SwiftNIO), or a PostgreSQL database
/// shared with other machines (`--store postgres://…`), whose connection pool runs in the
/// background for the life of the command.
final class CLISessions {
    enum Backend {
        case file(EncryptedSessionStorage)
        #if MOOSE_POSTGRES
        case postgres(PostgresBackend)
        #endif
    }

    let backend: Backend

    /// Opens the store `options` name (`create`: a missing file store is created; a PostgreSQL
    /// schema is created and migrated on first use either way).
    init(options: StoreOptions, create: Bool) throws {
        if options.isPostgres {
            #if MOOSE_POSTGRES
            backend = .postgres(try PostgresBackend(options: options))
            #else
            try PostgresHandoff.exec()
            #endif
        } else {
            backend = .file(EncryptedSessionStorage(store: try options.open(create: create)))
        }
    }

    deinit { close() }

    /// The storage for a `RefreshCoordinator`.
    var storage: any SessionStorage {
        switch backend {
        case .file(let sessions): sessions
        #if MOOSE_POSTGRES
        case .postgres(let postgres): postgres.storage
        #endif
        }
    }

    /// The file store, when sessions live in one (the JWKS cache is kept there).
    var fileStore: SecretStore? {
        if case .file(let sessions) = backend { return sessions.store }
        return nil
    }

    func load(_ key: String) throws -> StoredSession? {
        switch backend {
        case .file(let sessions): try sessions.loadNow(key)
        #if MOOSE_POSTGRES
        case .postgres(let postgres): try postgres.call { try await $0.load(key) }
        #endif
        }
    }

    func replace(_ session: OAuthSession, key: String) throws {
        switch backend {
        case .file(let sessions): try sessions.replaceNow(session, key: key)
        #if MOOSE_POSTGRES
        case .postgres(let postgres): _ = try postgres.call { try await $0.replace(session, key: key) }
        #endif
        }
    }

    /// A compare-and-set write (see `SessionStorage.save`).
    @discardableResult
    func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?) throws -> Int64 {
        switch backend {
        case .file(let sessions): try sessions.saveNow(session, key: key, expectedGeneration: expectedGeneration, lease: nil)
        #if MOOSE_POSTGRES
        case .postgres(let postgres): try postgres.call { try await $0.save(session, key: key, expectedGeneration: expectedGeneration, lease: nil) }
        #endif
        }
    }

    @discardableResult
    func delete(_ key: String) throws -> Bool {
        switch backend {
        case .file(let sessions): try sessions.deleteNow(key)
        #if MOOSE_POSTGRES
        case .postgres(let postgres): try postgres.call { try await $0.delete(key) }
        #endif
        }
    }

    func keys() throws -> [String] {
        switch backend {
        case .file(let sessions): try sessions.keysNow()
        #if MOOSE_POSTGRES
        case .postgres(let postgres): try postgres.call { try await $0.keys() }
        #endif
        }
    }

    /// Ends the PostgreSQL pool (a file store needs nothing).
    func close() {
        #if MOOSE_POSTGRES
        if case .postgres(let postgres) = backend { postgres.close() }
        #endif
    }
}

#if MOOSE_POSTGRES
/// A `PostgresSessionStorage` whose `run()` goes on in a background task while the synchronous
/// command calls into it.
final class PostgresBackend: @unchecked Sendable {
    let storage: PostgresSessionStorage
    private let runner: Task<Void, Never>
    private var closed = false

    init(options: StoreOptions) throws {
        var configuration: PostgresStorageConfiguration
        do {
            configuration = try PostgresStorageConfiguration(url: options.resolvedStorePath)
            if configuration.password == nil, let password = getenv("PGPASSWORD").map({ String(cString: $0) }), !password.isEmpty {
                configuration.password = password
            }
            storage = try PostgresSessionStorage(configuration: configuration, masterKey: try options.keySource())
        } catch let error as PostgresStorageError {
            throw CLIError.usage(error.message)
        }
        let storage = self.storage
        runner = Task.detached { await storage.run() }
    }

    /// Runs `body` on the storage and waits for it (from the synchronous command).
    func call<T: Sendable>(_ body: @escaping @Sendable (PostgresSessionStorage) async throws -> T) throws -> T {
        let storage = self.storage
        return try Blocking.run { try await body(storage) }
    }

    /// Cancels `run()` and waits (up to 2 s) for the pool to close its connections.
    func close() {
        guard !closed else { return }
        closed = true
        runner.cancel()
        let done = DispatchSemaphore(value: 0)
        let runner = self.runner
        Task.detached {
            await runner.value
            done.signal()
        }
        _ = done.wait(timeout: .now() + 2)
    }
}
#endif
