import Dispatch
import MooseOAuth
import MooseSQLiteStorage
import MooseSealing
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
    static func openPostgres(_ options: StoreOptions) throws -> CLIOpenedStore {
        switch postgres.withLock({ $0 }) {
        case .handoff:
            try PostgresHandoff.exec()
        case .backend(let open):
            return try open(CLIStoreLocation(url: try options.resolvedStorePath, masterKey: try options.keySource()))
        }
    }
}

/// The sessions a command works on, through the library's contract (`storage`, waited for with `run`):
/// the encrypted SQLite file, or a store that the program's registered backend opens (`--store
/// postgres://…` in `moose-pg`: a database shared with other machines, whose connection pool runs in
/// the background for the life of the command). A file store is also read synchronously (`load`): the
/// fast path of `moose token` never starts the concurrency runtime.
final class CLISessions {
    /// The sessions, and the store's upkeep (`moose store init|check|rotate-key`).
    let storage: any SessionStorage & SessionStoreMaintenance
    /// The file store's storage, when sessions live in a file.
    let file: EncryptedSessionStorage?
    /// Where the store is (and how its key is had), as the command was given it.
    let options: StoreOptions
    /// The registered backend's background work (a connection pool) until `close`.
    private var running: Task<Void, Never>?

    /// Opens the store `options` name (`create`: a missing file store is created; a PostgreSQL
    /// schema is created and migrated on first use either way). `profile`, when the command names one,
    /// goes into the first-contact hint (`moose login --profile NAME …`).
    convenience init(options: StoreOptions, create: Bool, profile: String? = nil) throws {
        if try options.isPostgres {
            self.init(options, opened: try RegisteredBackends.openPostgres(options))
            return
        }
        // First contact: no store yet means nobody logged in — say what to do, not how stores work.
        let path = try options.resolvedStorePath
        if !create, !FileManager.default.fileExists(atPath: path) {
            throw CLIError.failed(
                "not logged in (no store at \(path) yet); run \(Self.firstLogin(profile ?? "default", store: options))")
        }
        self.init(options, file: try options.open(create: create))
    }

    private init(_ options: StoreOptions, file store: SecretStore) {
        self.options = options
        let file = EncryptedSessionStorage(store: store)
        self.file = file
        storage = file
    }

    private init(_ options: StoreOptions, opened: CLIOpenedStore) {
        self.options = options
        file = nil
        storage = opened.storage
        running = opened.running.map { run in Task.detached { await run() } }
    }

    deinit { close() }

    /// The store `moose store` keeps up: a file store opened with the store commands' own messages
    /// (`StoreOptions.open`: a missing one is `moose store init`'s to make), or the registered backend's.
    static func maintained(_ options: StoreOptions, create: Bool = false) throws -> CLISessions {
        if try options.isPostgres { return try CLISessions(options: options, create: create) }
        return CLISessions(options, file: try options.open(create: create))
    }

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
        if described == true || plan(of: profile, store: store) != nil { return loginHint(profile) }
        return loginHint(profile) + " --issuer URL --client-id ID"
    }

    /// The file store, when sessions live in one (the JWKS cache is kept there).
    var fileStore: SecretStore? { file?.store }

    /// `body` on the storage, waited for (`CLIBlocking.run`).
    func run<T: Sendable>(
        _ body: @escaping @Sendable (any SessionStorage & SessionStoreMaintenance) async throws -> T
    ) throws -> T {
        let storage = self.storage
        return try CLIBlocking.run { try await body(storage) }
    }

    /// The session under `key`: read in this thread from a file store (`moose token`), else through `run`.
    func load(_ key: String) throws -> StoredSession? {
        if let file { return try file.loadNow(key) }
        return try run { try await $0.load(key) }
    }

    /// Every stored session's key: read in this thread from a file store (a TAB press, `moose profile
    /// list`), else through `run`.
    func keys() throws -> [String] {
        if let file { return try file.keysNow() }
        return try run { try await $0.keys() }
    }

    /// `body` on the store's upkeep, its errors as `moose store` says them: the file store's in its
    /// words with its code, another store's as it describes itself.
    func maintain<T: Sendable>(_ body: @escaping @Sendable (any SessionStoreMaintenance) async throws -> T) throws
        -> T
    {
        do { return try run { try await body($0) } } catch let error as SecretStoreError {
            throw StoreOptions.cliError(error)
        } catch let error as CLIError { throw error } catch { throw CLIError.failed(String(describing: error)) }
    }

    /// Ends a registered backend's background work and waits (up to 2 s) for its pool to close its
    /// connections (a file store needs nothing).
    func close() {
        guard let running else { return }
        self.running = nil
        running.cancel()
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await running.value
            done.signal()
        }
        _ = done.wait(timeout: .now() + 2)
    }
}

/// What a first login creates (`SecretStore.FirstUse`: the file store, its key file and their
/// folders, where they are not there yet), removed again when the login fails — unless the store holds
/// a session by now (another first login, in another process, stored one meanwhile) or cannot be listed.
struct FirstStore {
    private var made: SecretStore.FirstUse?
    private var store = ""

    init(_ options: StoreOptions) {
        guard (try? options.isPostgres) == false, let store = try? options.resolvedStorePath else { return }
        var keyFile: String?
        if case .keyFile(let key)? = try? options.keySource() { keyFile = key }
        made = SecretStore.FirstUse(store: store, keyFile: keyFile)
        self.store = store
    }

    /// The login's store, created if missing. When even that fails (a file where a folder must be),
    /// what it made goes again — the key file, the folders left empty — unless a store file is there
    /// by now (another process's, whose key this may be).
    func open(_ options: StoreOptions) throws -> OAuthContext {
        do { return try OAuthContext(options: options, create: true) } catch {
            if let made, !FileManager.default.fileExists(atPath: store) { made.undo() }
            throw error
        }
    }

    /// Removes what the failed login made, when the store holds no session.
    func undo(after sessions: CLISessions) {
        guard let made, !made.isEmpty, (try? sessions.keys())?.isEmpty == true else { return }
        sessions.close()
        made.undo()
    }
}

extension CLISessions {
    /// The file store's namespace where an earlier version's logout kept the plans of profiles logged
    /// out of: a plain `moose login` of such a profile logs in again as before.
    static let keptPlans = "moose.plan"

    /// The profiles whose rows hold sessions (damaged ones too; not a registration an unfinished login
    /// kept), sorted; none when the store cannot be listed.
    func profilesWithSessions() -> [String] {
        guard let catalog = try? catalog(keptOutside: false) else { return [] }
        return catalog.sessions.filter { catalog.rows[$0]?.session?.isRegistrationOnly != true }
    }

    /// Whether `profile`'s row holds a session (a damaged one too), not only the plan a logout kept.
    func holdsSession(_ profile: String) -> Bool {
        do { return try load(profile).map { !$0.session.isLoggedOut } ?? false } catch { return true }
    }

    /// The plans kept outside the store's rows: the settings file beside the config (`KeptSettings`,
    /// which outlives a lost key or a damaged row), and for the profiles it lacks, the file store's
    /// namespace where an earlier version's logout kept them.
    func plansKeptOutside() -> [String: Profile] {
        var plans = KeptSettings.profiles(store: options)
        guard let store = fileStore, let items = try? store.list(namespace: Self.keptPlans) else { return plans }
        for item in items where plans[item.name] == nil {
            if let bytes = try? store.get(namespace: Self.keptPlans, name: item.name),
                let plan = try? JSONDecoder().decode(Profile.self, from: Data(bytes))
            {
                plans[item.name] = plan
            }
        }
        return plans
    }

    /// The catalog of `only` (one profile's row), else of every row, with the plans kept outside
    /// (unless `keptOutside` is `false`: for a command that reads only the rows). A store that cannot
    /// be listed or read throws; a damaged row is listed.
    func catalog(only profile: String? = nil, keptOutside: Bool = true) throws -> ProfileCatalog {
        var rows: [String: ProfileCatalog.Row] = [:]
        let names = try profile.map { [$0] } ?? keys()
        for key in names { rows[key] = try ProfileCatalog.Row { try load(key) } }
        return ProfileCatalog(rows: rows, kept: keptOutside ? plansKeptOutside() : [:])
    }

    /// The plan a plain `moose login --profile` of `profile` follows where neither an option nor the
    /// config file says otherwise — one rule for every command that shows or uses it
    /// (`ProfileCatalog.plan(of:)`): the plan of the row in `store` (its session's, or the one `moose
    /// logout` kept there, which every machine sharing the store reads), else the plans kept outside
    /// it. Nothing is created; a store not there yet, or one that cannot be opened, leaves the
    /// settings file.
    static func plan(of profile: String, store: StoreOptions) -> Profile? {
        guard let sessions = try? openIfPresent(store), let catalog = try? sessions.catalog(only: profile) else {
            return KeptSettings.plan(profile, store: store)
        }
        return catalog.plan(of: profile)
    }

    /// The resource of `profile`'s row when it holds only the client a resource login registered
    /// before it stopped (`OAuthSession.isRegistrationOnly`): a plain `moose login --profile` is that
    /// login again, its scopes discovered, the client used.
    static func unfinishedResource(of profile: String, store: StoreOptions) -> String? {
        guard let session = try? openIfPresent(store)?.load(profile)?.session, session.isRegistrationOnly else {
            return nil
        }
        return session.resource
    }

    /// The profiles `store` knows (`ProfileCatalog`): a store not there yet has only the settings
    /// file's; one that cannot be opened or listed throws.
    static func catalog(of store: StoreOptions) throws -> ProfileCatalog {
        try openIfPresent(store)?.catalog() ?? ProfileCatalog(rows: [:], kept: KeptSettings.profiles(store: store))
    }

    /// Every profile name `store` knows, or the settings file's alone when the store cannot be read:
    /// for `moose profile use` and a TAB press, which say nothing of a store fault.
    static func profileNames(in store: StoreOptions) -> [String] {
        guard let catalog = try? catalog(of: store) else { return Array(KeptSettings.profiles(store: store).keys) }
        return catalog.sessions + catalog.loggedOut
    }
}
