import MooseOAuth
import MooseSQLiteStorage
import MooseSecretStore
import Synchronization
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

/// `moose` is built without SwiftNIO, so that its hot commands start fast; a PostgreSQL store is
/// handled by `moose-pg` (the same commands with the PostgreSQL backend), installed next to it:
/// `moose` replaces itself with it, same arguments, same environment.
enum PostgresHandoff {
    static func exec() throws -> Never {
        var path = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        let own =
            length > 0
            ? String(decoding: path.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            : CommandLine.arguments[0]
        let folder = own.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let sibling = (folder.isEmpty ? "." : folder) + "/moose-pg"
        let argv: [UnsafeMutablePointer<CChar>?] =
            [strdup(sibling)] + CommandLine.arguments.dropFirst().map { strdup($0) } + [nil]
        execv(sibling, argv)
        execvp("moose-pg", argv) // not next to moose: on the PATH, then
        for pointer in argv { free(pointer) }
        throw CLIError.usage(
            "--store names a PostgreSQL database, which needs moose-pg next to moose (\(sibling): \(String(cString: strerror(errno)))); "
                + "build it with swift build --product moose-pg --traits MoosePostgres, or give a file store")
    }
}

/// The backend the program registered for `postgres://` stores (`MooseCLIProgram.run(postgres:)`),
/// set once before any command runs.
enum RegisteredBackends {
    static let postgres = Mutex<PostgresStores>(.handoff)

    /// Opens the PostgreSQL store `options` name with the registered backend, or hands the whole
    /// command line to `moose-pg` (this call then does not return).
    static func openPostgres(_ options: StoreOptions) throws -> any CLISessionBackend {
        switch postgres.withLock({ $0 }) {
        case .handoff:
            try PostgresHandoff.exec()
        case .backend(let open):
            return try open(CLIStoreLocation(url: try options.resolvedStorePath, masterKey: try options.keySource()))
        }
    }
}

/// The sessions a command works on: the encrypted SQLite file (read synchronously: the fast path
/// of `moose token` never starts the concurrency runtime), or a store that the program's registered
/// backend opens (`--store postgres://…` in `moose-pg`: a database shared with other machines,
/// whose connection pool runs in the background for the life of the command).
final class CLISessions {
    enum Backend {
        case file(EncryptedSessionStorage)
        case registered(any CLISessionBackend)
    }

    let backend: Backend
    /// Where the store is (and how its key is had), as the command was given it.
    let options: StoreOptions

    /// Opens the store `options` name (`create`: a missing file store is created; a PostgreSQL
    /// schema is created and migrated on first use either way). `profile`, when the command names one,
    /// goes into the first-contact hint (`moose login --profile NAME …`).
    init(options: StoreOptions, create: Bool, profile: String? = nil) throws {
        self.options = options
        if try options.isPostgres {
            backend = .registered(try RegisteredBackends.openPostgres(options))
        } else {
            // First contact: no store yet means nobody logged in — say what to do, not how stores work.
            let path = try options.resolvedStorePath
            if !create, !FileManager.default.fileExists(atPath: path) {
                throw CLIError.failed(
                    "not logged in (no store at \(path) yet); run \(Self.firstLogin(profile ?? "default", store: options))"
                )
            }
            backend = .file(EncryptedSessionStorage(store: try options.open(create: create)))
        }
    }

    deinit { close() }

    /// The store `options` name, or `nil` when there is none yet (a file store not created). A store
    /// that is there but cannot be opened (no key, wrong key, damaged, permission denied, a folder in
    /// its place) throws, so that no command reports "no profiles" or "no sessions" for it.
    static func openIfPresent(_ options: StoreOptions) throws -> CLISessions? {
        if try !options.isPostgres, !FileManager.default.fileExists(atPath: try options.resolvedStorePath) {
            return nil
        }
        return try CLISessions(options: options, create: false)
    }

    /// The first login of `profile`, as a command that works as printed: `moose login --profile NAME`
    /// when the config file (issuer and client id) or the kept settings already say how, else with
    /// `--issuer URL --client-id ID` to fill in.
    static func firstLogin(_ profile: String, store: StoreOptions) -> String {
        let described = (try? CLIConfig.load())?.profiles[profile].map { $0.issuer != nil && $0.clientID != nil }
        if described == true || KeptSettings.plan(profile, store: store) != nil { return loginHint(profile) }
        return loginHint(profile) + " --issuer URL --client-id ID"
    }

    /// The storage for a `RefreshCoordinator`.
    var storage: any SessionStorage {
        switch backend {
        case .file(let sessions): sessions
        case .registered(let other): other.storage
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
        case .registered(let other): try other.load(key)
        }
    }

    func replace(_ session: OAuthSession, key: String) throws {
        switch backend {
        case .file(let sessions): try sessions.replaceNow(session, key: key)
        case .registered(let other): try other.replace(session, key: key)
        }
    }

    /// A compare-and-set write (see `SessionStorage.save`).
    @discardableResult
    func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?) throws -> Int64 {
        switch backend {
        case .file(let sessions):
            try sessions.saveNow(session, key: key, expectedGeneration: expectedGeneration, lease: nil)
        case .registered(let other): try other.save(session, key: key, expectedGeneration: expectedGeneration)
        }
    }

    @discardableResult
    func delete(_ key: String) throws -> Bool {
        switch backend {
        case .file(let sessions): try sessions.deleteNow(key)
        case .registered(let other): try other.delete(key)
        }
    }

    func keys() throws -> [String] {
        switch backend {
        case .file(let sessions): try sessions.keysNow()
        case .registered(let other): try other.keys()
        }
    }

    /// Ends a registered backend's connections (a file store needs nothing).
    func close() {
        if case .registered(let other) = backend { other.close() }
    }
}

/// What a first login creates — the file store, its key file and their folders, where they are not
/// there yet — noted before the login opens the store, so that a login that fails (an issuer typo, a
/// secret that cannot be read, a refusal) removes them again: it leaves nothing on disk. A store or
/// key that was already there is never touched, nor a folder that is not empty.
struct FirstStore {
    private var files: [String] = []
    private var folders: [String] = []

    init(_ options: StoreOptions) {
        guard (try? options.isPostgres) == false, let store = try? options.resolvedStorePath,
            !FileManager.default.fileExists(atPath: store)
        else { return }
        files = [store, store + "-wal", store + "-shm", store + "-journal"]
        folders = Self.missingFolders(above: store)
        if case .keyFile(let key)? = try? options.keySource(), !FileManager.default.fileExists(atPath: key) {
            files.append(key)
            folders += Self.missingFolders(above: key)
        }
    }

    /// The folders above `path` that do not exist yet, deepest first.
    private static func missingFolders(above path: String) -> [String] {
        var missing: [String] = []
        var folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        while folder.path != "/", !FileManager.default.fileExists(atPath: folder.path) {
            missing.append(folder.path)
            folder = folder.deletingLastPathComponent()
        }
        return missing
    }

    /// Removes what the failed login made — unless the store holds a session by now (another first
    /// login, in another process, stored one meanwhile) or cannot be listed: then it stays as it is.
    func undo(after sessions: CLISessions) {
        guard !files.isEmpty, (try? sessions.keys())?.isEmpty == true else { return }
        sessions.close()
        for file in files { unlink(file) }
        for folder in folders { rmdir(folder) }
    }
}
