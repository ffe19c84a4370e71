#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth
package import MooseSealing
public import MooseSecretStore

/// Sessions in the encrypted SQLite secret store (the default storage): one AES-256-GCM sealed row
/// per key in namespace `moose.session`, bound to its name by the AAD; leases are the store's own
/// cross-process leases with fencing tokens, so every process that opens the file shares them.
///
/// ```swift
/// import MooseOAuth
/// import MooseSQLiteStorage
///
/// let store = try SecretStore(path: path, masterKey: .keyFile(keyPath))
/// let storage = EncryptedSessionStorage(store: store)
/// let coordinator = RefreshCoordinator(key: "default", storage: storage, authorizer: flow)
/// ```
///
/// A row holds `{"generation": N, "session": {…}}`; rows written by Moose 0.1 (a bare session with
/// an embedded profile) read as generation 0 and are rewritten in the new shape on the next save.
///
/// A damaged row (its sealed bytes do not authenticate — bit rot, a torn copy, a row sealed under
/// another key — or its plaintext is not a session) is `OAuthError.sessionDamaged` for that key only;
/// `keys` lists it, `replace` writes over it and `delete` removes it. Its generation cannot be read,
/// so the write after it takes the clock's milliseconds since 1970 as the generation: larger than any
/// counter a row reaches by writing, and than any earlier damaged row's.
public struct EncryptedSessionStorage: SessionStorage {
    /// The store.
    public let store: SecretStore
    /// The namespace used for sessions.
    public static let namespace = "moose.session"

    /// Sessions in `store`.
    ///
    /// - Parameter store: an open `SecretStore`, shared with whatever else it holds (sessions live under
    ///   `EncryptedSessionStorage.namespace`); every process opening the same file shares the sessions.
    public init(store: SecretStore) { self.store = store }

    struct Record: Codable {
        var generation: Int64
        var session: OAuthSession?
    }

    /// A row: a session and its generation, or — after a delete — only the generation (a tombstone
    /// without secrets), so generations keep growing across a logout and a new login and a
    /// compare-and-set made before the logout can never land on the new session.
    static func decodeRow(_ bytes: [UInt8]) throws -> (session: OAuthSession?, generation: Int64) {
        let decoder = JSONDecoder()
        if let record = try? decoder.decode(Record.self, from: Data(bytes)) {
            return (record.session, record.generation)
        }
        return (try decoder.decode(OAuthSession.self, from: Data(bytes)), 0)
    }

    static func decode(_ bytes: [UInt8]) throws -> StoredSession? {
        let row = try decodeRow(bytes)
        return row.session.map { StoredSession(session: $0, generation: row.generation) }
    }

    static func encode(_ session: OAuthSession, generation: Int64) throws -> [UInt8] {
        Array(try JSONEncoder().encode(Record(generation: generation, session: session)))
    }

    /// What a transaction finds under a key.
    enum Existing {
        case none
        case row(session: OAuthSession?, generation: Int64)
        /// Present, but it does not authenticate or does not decode.
        case damaged

        /// The generation the next write takes.
        var nextGeneration: Int64 {
            switch self {
            case .none: 1
            case .row(_, let generation): generation < Int64.max ? generation + 1 : generation
            case .damaged: EncryptedSessionStorage.generationAfterDamage()
            }
        }
    }

    /// The generation after a row whose own generation cannot be read: milliseconds since 1970 (see
    /// the type's documentation).
    static func generationAfterDamage() -> Int64 {
        let milliseconds = Date().timeIntervalSince1970 * 1000
        return milliseconds.isFinite && milliseconds > 1 && milliseconds < 9e15 ? Int64(milliseconds) : 1
    }

    /// Whether `error` is the store saying that the session row `key` does not authenticate.
    static func isDamagedRow(_ error: SecretStoreError, key: String) -> Bool {
        error.code == SecretStoreError.tampered && error.namespace.map { $0.utf8.elementsEqual(namespace.utf8) } == true
            && error.name.map { $0.utf8.elementsEqual(key.utf8) } == true
    }

    /// The contract's error for a damaged row.
    static func damaged(_ key: String, _ why: String, underlying: (any Error & Sendable)? = nil) -> OAuthError {
        OAuthError(
            OAuthError.sessionDamaged,
            "the stored session \(key) cannot be opened (\(why)); a new login replaces it, a logout removes it",
            underlying: underlying)
    }

    /// The row under `key`, read inside a transaction; a damaged row is `.damaged`, not an error.
    static func existing(_ tx: borrowing SecretStore.Transaction, key: String) throws(SecretStoreError) -> Existing {
        let bytes: [UInt8]?
        do throws(SecretStoreError) {
            bytes = try tx.get(namespace: namespace, name: key)
        } catch {
            if isDamagedRow(error, key: key) { return .damaged }
            throw error
        }
        guard let bytes else { return .none }
        guard let row = try? decodeRow(bytes) else { return .damaged }
        return .row(session: row.session, generation: row.generation)
    }

    /// Reads synchronously, without the concurrency runtime (for command-line fast paths).
    ///
    /// - Throws: `OAuthError.sessionDamaged` for a row that cannot be opened; `storeUnavailable`
    ///   (with the store's error) when the store cannot be read.
    public func loadNow(_ key: String) throws -> StoredSession? {
        let bytes: [UInt8]?
        do throws(SecretStoreError) {
            bytes = try store.get(namespace: Self.namespace, name: key)
        } catch {
            if Self.isDamagedRow(error, key: key) {
                throw Self.damaged(key, "its sealed bytes do not authenticate", underlying: error)
            }
            throw Self.map(error)
        }
        guard let bytes else { return nil }
        do {
            return try Self.decode(bytes)
        } catch {
            throw Self.damaged(key, "it opens, but is not a session this Moose can read")
        }
    }

    public func load(_ key: String) async throws -> StoredSession? { try loadNow(key) }

    /// The session under `key` in the store at `path`, read with `SecretStore.readSnapshot` (one
    /// short read, the store closed again, no shared-memory set-up): for a process that only reads
    /// once. Throws on any failure, `busy` (another process has the store open) included; the caller
    /// then reads the ordinary way, which reports errors as `loadNow` does.
    package static func loadSnapshot(path: String, masterKey: MasterKeySource, key: String) throws -> StoredSession? {
        guard
            let bytes = try SecretStore.readSnapshot(path: path, masterKey: masterKey, namespace: namespace, name: key)
        else {
            return nil
        }
        return try decode(bytes)
    }

    @discardableResult
    public func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?, lease: SessionLease?)
        async throws -> Int64
    {
        try saveNow(session, key: key, expectedGeneration: expectedGeneration, lease: lease)
    }

    enum Outcome { case written(Int64), conflict(Int64?), damaged, unencodable }

    /// `save(_:key:expectedGeneration:lease:)`, synchronously.
    @discardableResult
    public func saveNow(_ session: OAuthSession, key: String, expectedGeneration: Int64?, lease: SessionLease?) throws
        -> Int64
    {
        var session = session
        session.updatedAt = Date()
        let outcome: Outcome
        do {
            outcome = try store.transaction { (tx) throws(SecretStoreError) -> Outcome in
                if let lease { try tx.requireLease(lease) }
                let existing = try Self.existing(tx, key: key)
                var current: Int64? = nil
                switch existing {
                case .damaged: return .damaged
                case .row(.some, let generation): current = generation
                case .row(nil, _), .none: break
                }
                guard current == expectedGeneration else { return .conflict(current) }
                let next = existing.nextGeneration
                guard let bytes = try? Self.encode(session, generation: next) else { return .unencodable }
                try tx.put(bytes, namespace: Self.namespace, name: key)
                return .written(next)
            }
        } catch {
            throw Self.map(error)
        }
        switch outcome {
        case .written(let generation): return generation
        case .conflict(let current):
            throw OAuthError(
                OAuthError.storageConflict,
                "the session \(key) is at generation \(current.map(String.init) ?? "none"), not \(expectedGeneration.map(String.init) ?? "none"): someone else wrote it"
            )
        case .damaged:
            throw Self.damaged(key, "its sealed bytes do not authenticate or do not decode")
        case .unencodable:
            throw OAuthError(OAuthError.invalidConfiguration, "the session \(key) cannot be encoded")
        }
    }

    @discardableResult
    public func replace(_ session: OAuthSession, key: String) async throws -> Int64 {
        try replaceNow(session, key: key)
    }

    /// `replace(_:key:)`, synchronously.
    @discardableResult
    public func replaceNow(_ session: OAuthSession, key: String) throws -> Int64 {
        var session = session
        session.updatedAt = Date()
        let written: Int64?
        do {
            written = try store.transaction { (tx) throws(SecretStoreError) -> Int64? in
                // A damaged row is written over: a login is the way out of it.
                let next = try Self.existing(tx, key: key).nextGeneration
                guard let bytes = try? Self.encode(session, generation: next) else { return nil }
                try tx.put(bytes, namespace: Self.namespace, name: key)
                return next
            }
        } catch {
            throw Self.map(error)
        }
        guard let written else { throw OAuthError(OAuthError.invalidConfiguration, "the session cannot be encoded") }
        return written
    }

    @discardableResult
    public func delete(_ key: String) async throws -> Bool { try deleteNow(key) }

    /// `delete(_:)`, synchronously: the session's secrets are gone; a tombstone keeps its generation.
    /// A damaged row is removed too (`true`), its tombstone taking `generationAfterDamage`.
    @discardableResult
    public func deleteNow(_ key: String) throws -> Bool {
        do {
            return try store.transaction { (tx) throws(SecretStoreError) -> Bool in
                let existing = try Self.existing(tx, key: key)
                switch existing {
                case .none, .row(nil, _): return false
                case .row(_?, _), .damaged: break
                }
                guard
                    let tombstone = try? JSONEncoder().encode(Record(generation: existing.nextGeneration, session: nil))
                else {
                    return try tx.delete(namespace: Self.namespace, name: key)
                }
                try tx.put(Array(tombstone), namespace: Self.namespace, name: key)
                return true
            }
        } catch {
            throw Self.map(error)
        }
    }

    public func keys() async throws -> [String] { try keysNow() }

    /// `keys()`, synchronously: every key with a session or a damaged row (not a tombstone).
    public func keysNow() throws -> [String] {
        do {
            return try store.list(namespace: Self.namespace).map(\.name).sorted().filter { key in
                do throws(SecretStoreError) {
                    guard let bytes = try store.get(namespace: Self.namespace, name: key) else { return false }
                    guard let row = try? Self.decodeRow(bytes) else { return true } // damaged: listed
                    return row.session != nil
                } catch {
                    return Self.isDamagedRow(error, key: key)
                }
            }
        } catch {
            throw Self.map(error)
        }
    }

    public func acquireLease(_ name: String, ttl: TimeInterval, timeout: TimeInterval) async throws -> SessionLease {
        do {
            return try await store.acquireLease(name: name, ttl: ttl, timeout: timeout, as: SessionLease.self)
        } catch let error as SecretStoreError {
            throw Self.map(error)
        }
    }

    public func renewLease(_ lease: SessionLease, ttl: TimeInterval) async throws -> SessionLease {
        do { return try store.renewLease(lease, ttl: ttl) } catch { throw Self.map(error) }
    }

    public func releaseLease(_ lease: SessionLease) async throws {
        do { try store.releaseLease(lease) } catch { throw Self.map(error) }
    }

    /// The storage contract's errors for the store's.
    static func map(_ error: SecretStoreError) -> OAuthError {
        switch error.code {
        case SecretStoreError.leaseLost: OAuthError(OAuthError.leaseLost, error.message, underlying: error)
        case SecretStoreError.leaseTimeout: OAuthError(OAuthError.leaseBusy, error.message, underlying: error)
        default:
            OAuthError(
                OAuthError.storeUnavailable, "the store is unavailable (\(error.code)): \(error.message)",
                underlying: error)
        }
    }
}

/// The storage contract's lease is the store's lease too: the file store's lease rows hand out and
/// check `SessionLease` values themselves (see `FencedLease`), so there is one lease type.
extension SessionLease: FencedLease {}
