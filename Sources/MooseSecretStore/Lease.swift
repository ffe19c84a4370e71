#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
import MooseCrypto

/// A lease as the store's lease rows see it: a name, its holder, a fencing token and an expiry.
///
/// The store has no lease struct of its own. `SessionLease` — the storage contract's lease in
/// MooseOAuth — is the one lease value in Moose, and MooseSQLiteStorage declares its conformance
/// here, so a lease taken through the store and one handed to a `RefreshCoordinator` are the same
/// value, with no second struct of the same four fields and no conversion between them. A protocol
/// rather than the type itself because the store sits below MooseOAuth (it links no OAuth and
/// MooseOAuth links no SQLite): only the layer that sees both connects them.
///
/// `package`: leases of the file store reach apps through `EncryptedSessionStorage`'s
/// `acquireLease`, `renewLease` and `releaseLease`.
///
/// At most one holder has a lease at a time. A holder that dies (even `kill -9`) loses it when its
/// ttl runs out; every acquisition increments the fencing token: a write guarded by
/// `Transaction.requireLease(_:)` commits only while that exact acquisition is still current.
package protocol FencedLease: Sendable {
    /// The lease's name (for example `refresh:default`).
    var name: String { get }
    /// This holder's random identity.
    var holder: String { get }
    /// Strictly increasing across acquisitions of `name`.
    var fencingToken: Int64 { get }
    /// When the lease lapses unless renewed (by the store's clock).
    var expiresAt: Date { get }
    /// A lease as the store hands it out.
    init(name: String, holder: String, fencingToken: Int64, expiresAt: Date)
}

extension SecretStore {
    /// Tries once to take the lease; `nil` if someone else holds it.
    package func tryAcquireLease<L: FencedLease>(name: String, ttl: TimeInterval, as type: L.Type = L.self) throws(SecretStoreError) -> L? {
        guard ttl > 0, ttl <= 86_400 else { throw SecretStoreError(SecretStoreError.invalidArgument, "lease ttl must be 0…86400 s") }
        return try locked { (state) throws(SecretStoreError) in try Leases.tryAcquire(state, name: name, ttl: ttl) }
    }

    /// Takes the lease, waiting (polling with jitter) up to `timeout` while another holder has it.
    ///
    /// - Throws: `leaseTimeout` when it could not be had in time; `CancellationError` if cancelled.
    package func acquireLease<L: FencedLease>(name: String, ttl: TimeInterval, timeout: TimeInterval, as type: L.Type = L.self) async throws -> L {
        let deadline = Date().addingTimeInterval(timeout)
        var delay: UInt64 = 5_000_000
        while true {
            try Task.checkCancellation()
            if let lease = try tryAcquireLease(name: name, ttl: ttl, as: L.self) { return lease }
            guard Date() < deadline else {
                throw SecretStoreError(SecretStoreError.leaseTimeout, "lease \(name) is held by another process")
            }
            try await Task.sleep(nanoseconds: delay + UInt64.random(in: 0...delay))
            delay = min(delay * 2, 50_000_000)
        }
    }

    /// Whether `lease` is still the current acquisition and has not expired.
    package func isHeld(_ lease: some FencedLease) throws(SecretStoreError) -> Bool {
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
    package func renewLease<L: FencedLease>(_ lease: L, ttl: TimeInterval) throws(SecretStoreError) -> L {
        try locked { (state) throws(SecretStoreError) in try Leases.renew(state, lease, ttl: ttl) }
    }

    /// Gives the lease back (no-op if it was already lost).
    package func releaseLease(_ lease: some FencedLease) throws(SecretStoreError) {
        try locked { (state) throws(SecretStoreError) in try Leases.release(state, lease) }
    }
}

enum Leases {
    static func tryAcquire<L: FencedLease>(_ state: borrowing SecretStore.State, name: String, ttl: TimeInterval) throws(SecretStoreError) -> L? {
        guard !name.isEmpty else { throw SecretStoreError(SecretStoreError.invalidArgument, "a lease needs a name") }
        let connection = state.connection
        let holder: String
        do { holder = try SecureRandom.bytes(count: 12).map { String($0, radix: 16) }.joined() } catch {
            throw SecretStoreError(SecretStoreError.io, "no randomness for a lease holder id")
        }
        return try Format.inTransaction(connection) { () throws(SecretStoreError) -> L? in
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
                return L(name: name, holder: holder, fencingToken: token + 1,
                         expiresAt: Date(timeIntervalSince1970: Double(expires) / 1000))
            }
        }
    }

    /// Throws `leaseLost` unless `lease` is the current, unexpired acquisition.
    static func require(_ state: borrowing SecretStore.State, _ lease: some FencedLease) throws(SecretStoreError) {
        let connection = state.connection
        let held: Bool = try Format.sql {
            let select = try connection.statement("SELECT holder, token, expires_at FROM leases WHERE name = ?")
            try select.bind(1, lease.name)
            guard try select.step() else { return false }
            return select.text(0).map { $0.utf8.elementsEqual(lease.holder.utf8) } == true
                && select.int64(1) == lease.fencingToken && select.int64(2) > Format.now()
        }
        guard held else {
            throw SecretStoreError(SecretStoreError.leaseLost, "lease \(lease.name) expired or was taken over")
        }
    }

    static func renew<L: FencedLease>(_ state: borrowing SecretStore.State, _ lease: L, ttl: TimeInterval) throws(SecretStoreError) -> L {
        let connection = state.connection
        return try Format.inTransaction(connection) { () throws(SecretStoreError) -> L in
            try require(state, lease)
            let expires = Format.now() + Int64(ttl * 1000)
            try Format.sql {
                let update = try connection.statement("UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND token = ?")
                try update.bind(1, expires)
                try update.bind(2, lease.name)
                try update.bind(3, lease.holder)
                try update.bind(4, lease.fencingToken)
                try update.step()
            }
            return L(name: lease.name, holder: lease.holder, fencingToken: lease.fencingToken,
                     expiresAt: Date(timeIntervalSince1970: Double(expires) / 1000))
        }
    }

    static func release(_ state: borrowing SecretStore.State, _ lease: some FencedLease) throws(SecretStoreError) {
        let connection = state.connection
        try Format.sql {
            // Keep the row (and its token) so fencing tokens keep increasing; just expire it.
            let update = try connection.statement("UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ? AND token = ?")
            try update.bind(1, lease.name)
            try update.bind(2, lease.holder)
            try update.bind(3, lease.fencingToken)
            try update.step()
        }
    }
}
