#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseCrypto

/// A named, time-limited lock held through the store file, shared by every process that opens it.
///
/// At most one holder has a lease at a time. A holder that dies (even `kill -9`) loses it when its
/// ttl runs out; every acquisition increments `token`, a fencing token: a write guarded by
/// `Transaction.requireLease(_:)` commits only while that exact acquisition is still current.
public struct Lease: Sendable, Hashable {
    /// The lease's name (for example `refresh:default`).
    public let name: String
    /// This holder's random identity.
    public let holder: String
    /// The fencing token: strictly increasing across acquisitions of this name.
    public let token: Int64
    /// When the lease lapses unless renewed.
    public let expiresAt: Date

    /// A lease as a store handed it out (for adapters that carry it through another type).
    public init(name: String, holder: String, token: Int64, expiresAt: Date) {
        self.name = name
        self.holder = holder
        self.token = token
        self.expiresAt = expiresAt
    }
}

extension SecretStore {
    /// Tries once to take the lease; `nil` if someone else holds it.
    public func tryAcquireLease(name: String, ttl: TimeInterval) throws(SecretStoreError) -> Lease? {
        guard ttl > 0, ttl <= 86_400 else { throw SecretStoreError(SecretStoreError.invalidArgument, "lease ttl must be 0…86400 s") }
        return try locked { (state) throws(SecretStoreError) in try Leases.tryAcquire(state, name: name, ttl: ttl) }
    }

    /// Takes the lease, waiting (polling with jitter) up to `timeout` while another holder has it.
    ///
    /// - Throws: `leaseTimeout` when it could not be had in time; `CancellationError` if cancelled.
    public func acquireLease(name: String, ttl: TimeInterval, timeout: TimeInterval) async throws -> Lease {
        let deadline = Date().addingTimeInterval(timeout)
        var delay: UInt64 = 5_000_000
        while true {
            try Task.checkCancellation()
            if let lease = try tryAcquireLease(name: name, ttl: ttl) { return lease }
            guard Date() < deadline else {
                throw SecretStoreError(SecretStoreError.leaseTimeout, "lease \(name) is held by another process")
            }
            try await Task.sleep(nanoseconds: delay + UInt64.random(in: 0...delay))
            delay = min(delay * 2, 50_000_000)
        }
    }

    /// Whether `lease` is still the current acquisition and has not expired.
    public func isHeld(_ lease: Lease) throws(SecretStoreError) -> Bool {
        try locked { (state) throws(SecretStoreError) in
            do throws(SecretStoreError) {
                try Leases.require(state, lease)
                return true
            } catch where error.code == SecretStoreError.leaseLost {
                return false
            }
        }
    }

    /// Extends a held lease. Throws `leaseLost` if it lapsed or someone else took it.
    public func renewLease(_ lease: Lease, ttl: TimeInterval) throws(SecretStoreError) -> Lease {
        try locked { (state) throws(SecretStoreError) in try Leases.renew(state, lease, ttl: ttl) }
    }

    /// Gives the lease back (no-op if it was already lost).
    public func releaseLease(_ lease: Lease) throws(SecretStoreError) {
        try locked { (state) throws(SecretStoreError) in try Leases.release(state, lease) }
    }

    /// Runs `body` while holding the lease, then releases it (also on error or cancellation).
    ///
    /// ```swift
    /// try await store.withLease(name: "refresh:default", ttl: 30, timeout: 45) { lease in
    ///     … re-read, refresh, then commit inside `transaction { try $0.requireLease(lease); … }` …
    /// }
    /// ```
    public func withLease<R: Sendable>(name: String, ttl: TimeInterval, timeout: TimeInterval,
                                       _ body: (Lease) async throws -> R) async throws -> R {
        let lease = try await acquireLease(name: name, ttl: ttl, timeout: timeout)
        do {
            let result = try await body(lease)
            try? releaseLease(lease)
            return result
        } catch {
            try? releaseLease(lease)
            throw error
        }
    }
}

enum Leases {
    static func tryAcquire(_ state: borrowing SecretStore.State, name: String, ttl: TimeInterval) throws(SecretStoreError) -> Lease? {
        guard !name.isEmpty else { throw SecretStoreError(SecretStoreError.invalidArgument, "a lease needs a name") }
        let connection = state.connection
        let holder: String
        do { holder = try SecureRandom.bytes(count: 12).map { String($0, radix: 16) }.joined() } catch {
            throw SecretStoreError(SecretStoreError.io, "no randomness for a lease holder id")
        }
        return try Format.inTransaction(connection) { () throws(SecretStoreError) -> Lease? in
            try Format.sql {
                let now = Format.now()
                let select = try connection.statement("SELECT token, expires_at FROM leases WHERE name = ?")
                try select.bind(1, name)
                var token: Int64 = 0
                if try select.step() {
                    token = select.int64(0)
                    if select.int64(1) > now { return nil }   // held, not expired
                }
                let expires = now + Int64(ttl * 1000)
                let upsert = try connection.statement("""
                    INSERT INTO leases (name, holder, token, expires_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, token = excluded.token,
                    expires_at = excluded.expires_at
                    """)
                try upsert.bind(1, name)
                try upsert.bind(2, holder)
                try upsert.bind(3, token + 1)
                try upsert.bind(4, expires)
                try upsert.step()
                return Lease(name: name, holder: holder, token: token + 1,
                             expiresAt: Date(timeIntervalSince1970: Double(expires) / 1000))
            }
        }
    }

    /// Throws `leaseLost` unless `lease` is the current, unexpired acquisition.
    static func require(_ state: borrowing SecretStore.State, _ lease: Lease) throws(SecretStoreError) {
        let connection = state.connection
        let held: Bool = try Format.sql {
            let select = try connection.statement("SELECT holder, token, expires_at FROM leases WHERE name = ?")
            try select.bind(1, lease.name)
            guard try select.step() else { return false }
            return select.text(0) == lease.holder && select.int64(1) == lease.token && select.int64(2) > Format.now()
        }
        guard held else {
            throw SecretStoreError(SecretStoreError.leaseLost, "lease \(lease.name) expired or was taken over")
        }
    }

    static func renew(_ state: borrowing SecretStore.State, _ lease: Lease, ttl: TimeInterval) throws(SecretStoreError) -> Lease {
        let connection = state.connection
        return try Format.inTransaction(connection) { () throws(SecretStoreError) -> Lease in
            try require(state, lease)
            let expires = Format.now() + Int64(ttl * 1000)
            try Format.sql {
                let update = try connection.statement("UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND token = ?")
                try update.bind(1, expires)
                try update.bind(2, lease.name)
                try update.bind(3, lease.holder)
                try update.bind(4, lease.token)
                try update.step()
            }
            return Lease(name: lease.name, holder: lease.holder, token: lease.token,
                         expiresAt: Date(timeIntervalSince1970: Double(expires) / 1000))
        }
    }

    static func release(_ state: borrowing SecretStore.State, _ lease: Lease) throws(SecretStoreError) {
        let connection = state.connection
        try Format.sql {
            // Keep the row (and its token) so fencing tokens keep increasing; just expire it.
            let update = try connection.statement("UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ? AND token = ?")
            try update.bind(1, lease.name)
            try update.bind(2, lease.holder)
            try update.bind(3, lease.token)
            try update.step()
        }
    }
}
