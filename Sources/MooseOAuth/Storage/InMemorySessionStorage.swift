#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization
import MooseCrypto

/// Sessions in memory, for tests and short-lived tools: the whole storage contract (compare-and-set,
/// leases with fencing and expiry) within one process, nothing on disk.
///
/// ```swift
/// let storage = InMemorySessionStorage()
/// try await storage.replace(OAuthSession(issuer: issuer, clientID: "app", tokens: tokens), key: "default")
/// ```
public final class InMemorySessionStorage: SessionStorage {
    struct LeaseRow { var holder: String; var token: Int64; var expiresAt: Date }
    struct State {
        var sessions: [String: StoredSession] = [:]
        /// The last generation of every key ever written: generations keep growing across a delete.
        var generations: [String: Int64] = [:]
        var leases: [String: LeaseRow] = [:]
        /// Keys whose row `damage(_:)` marked unreadable.
        var damaged: Set<String> = []
    }
    private let state = Mutex(State())
    private let clock: @Sendable () -> Date

    /// An empty storage; `clock` decides lease expiry (tests inject one).
    public init(clock: @escaping @Sendable () -> Date = { Date() }) { self.clock = clock }

    public func load(_ key: String) async throws -> StoredSession? {
        try state.withLock { (state) throws(OAuthError) -> StoredSession? in
            if state.damaged.contains(key) { throw Self.damagedError(key) }
            return state.sessions[key]
        }
    }

    /// Makes the row under `key` unreadable, as bit rot or a row sealed under another key would make
    /// a stored one: for tests of what an app does with `OAuthError.sessionDamaged` (the storage
    /// contract's damaged-row rules hold: `keys` lists it, `replace` writes over it, `delete` removes it).
    public func damage(_ key: String) {
        state.withLock { state in
            state.sessions[key] = nil
            state.damaged.insert(key)
        }
    }

    static func damagedError(_ key: String) -> OAuthError {
        OAuthError(
            OAuthError.sessionDamaged,
            "the stored session \(key) cannot be opened; a new login replaces it, a logout removes it")
    }

    @discardableResult
    public func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?, lease: SessionLease?)
        async throws -> Int64
    {
        let now = clock()
        return try state.withLock { (state) throws(OAuthError) -> Int64 in
            if let lease {
                guard let row = state.leases[lease.name], row.holder.utf8.elementsEqual(lease.holder.utf8),
                    row.token == lease.fencingToken, row.expiresAt > now
                else {
                    throw OAuthError(OAuthError.leaseLost, "lease \(lease.name) expired or was taken over")
                }
            }
            if state.damaged.contains(key) { throw Self.damagedError(key) }
            let current = state.sessions[key]?.generation
            guard current == expectedGeneration else {
                throw OAuthError(OAuthError.storageConflict, "the session \(key) was written by someone else")
            }
            var session = session
            session.updatedAt = now
            let next = (state.generations[key] ?? 0) + 1
            state.generations[key] = next
            state.sessions[key] = StoredSession(session: session, generation: next)
            return next
        }
    }

    @discardableResult
    public func replace(_ session: OAuthSession, key: String) async throws -> Int64 {
        let now = clock()
        return state.withLock { state in
            var session = session
            session.updatedAt = now
            let next = (state.generations[key] ?? 0) + 1
            state.generations[key] = next
            state.damaged.remove(key)
            state.sessions[key] = StoredSession(session: session, generation: next)
            return next
        }
    }

    @discardableResult
    public func delete(_ key: String) async throws -> Bool {
        state.withLock { state in
            let wasDamaged = state.damaged.remove(key) != nil
            guard state.sessions.removeValue(forKey: key) != nil || wasDamaged else { return false }
            state.generations[key, default: 0] += 1
            return true
        }
    }

    public func keys() async throws -> [String] { state.withLock { Set($0.sessions.keys).union($0.damaged).sorted() } }

    public func acquireLease(_ name: String, ttl: TimeInterval, timeout: TimeInterval) async throws -> SessionLease {
        let deadline = clock().addingTimeInterval(timeout)
        let holder = (try? SecureRandom.bytes(count: 12))?.map { String($0, radix: 16) }.joined() ?? UUID().uuidString
        var delay: UInt64 = 2_000_000
        while true {
            let now = clock()
            let taken: SessionLease? = state.withLock { state in
                let previous = state.leases[name]
                if let previous, previous.expiresAt > now { return nil }
                let row = LeaseRow(
                    holder: holder, token: (previous?.token ?? 0) + 1, expiresAt: now.addingTimeInterval(ttl))
                state.leases[name] = row
                return SessionLease(name: name, holder: holder, fencingToken: row.token, expiresAt: row.expiresAt)
            }
            if let taken { return taken }
            guard now < deadline else {
                throw OAuthError(OAuthError.leaseBusy, "lease \(name) is held by another holder")
            }
            try await Task.sleep(nanoseconds: delay)
            delay = min(delay * 2, 50_000_000)
        }
    }

    public func renewLease(_ lease: SessionLease, ttl: TimeInterval) async throws -> SessionLease {
        let now = clock()
        return try state.withLock { (state) throws(OAuthError) -> SessionLease in
            guard var row = state.leases[lease.name], row.holder.utf8.elementsEqual(lease.holder.utf8),
                row.token == lease.fencingToken, row.expiresAt > now
            else {
                throw OAuthError(OAuthError.leaseLost, "lease \(lease.name) expired or was taken over")
            }
            row.expiresAt = now.addingTimeInterval(ttl)
            state.leases[lease.name] = row
            return SessionLease(
                name: lease.name, holder: lease.holder, fencingToken: lease.fencingToken, expiresAt: row.expiresAt)
        }
    }

    public func releaseLease(_ lease: SessionLease) async throws {
        state.withLock { state in
            if let row = state.leases[lease.name], row.holder.utf8.elementsEqual(lease.holder.utf8),
                row.token == lease.fencingToken
            {
                state.leases[lease.name]?.expiresAt = .distantPast
            }
        }
    }
}
