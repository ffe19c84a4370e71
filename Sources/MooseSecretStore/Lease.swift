#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
import MooseCrypto
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
/// At most one holder has a lease at a time. A holder that dies (even `kill -9`) loses it at once:
/// it kept an OS file lock beside the store for the lease's life (`LeaseLocks`), which the kernel
/// releases with the process, and the next taker that gets that lock takes the row over. Without the
/// file lock (a folder it cannot be made in, a holder from an older Moose) the lease lapses when its
/// ttl runs out, as always. Every acquisition increments the fencing token: a write guarded by
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
    ///
    /// First the lease's file lock beside the store (`LeaseLocks`): held by another live process (or
    /// another acquisition in this one), the lease is taken only if its row lapsed (a holder stuck past
    /// its ttl); got, every other holder of the row is dead, and an unexpired row of a holder that had
    /// the file lock too is taken over at once. The lock is kept until `releaseLease`.
    package func tryAcquireLease<L: FencedLease>(name: String, ttl: TimeInterval, as type: L.Type = L.self)
        throws(SecretStoreError) -> L?
    {
        guard ttl > 0, ttl <= 86_400 else {
            throw SecretStoreError(SecretStoreError.invalidArgument, "lease ttl must be 0…86400 s")
        }
        let lock = LeaseLocks.tryLock(store: path, lease: name)
        let descriptor: Int32? = if case .acquired(let fd) = lock { fd } else { nil }
        do throws(SecretStoreError) {
            let lease: L? = try locked { (state) throws(SecretStoreError) in
                try Leases.tryAcquire(state, name: name, ttl: ttl, fileLocked: descriptor != nil)
            }
            if let descriptor {
                if let lease { LeaseLocks.keep(descriptor, for: lease) } else { close(descriptor) }
            }
            return lease
        } catch {
            if let descriptor { close(descriptor) }
            throw error
        }
    }

    /// Takes the lease, waiting (polling with jitter) up to `timeout` while another holder has it.
    ///
    /// - Throws: `leaseTimeout` when it could not be had in time; `CancellationError` if cancelled.
    package func acquireLease<L: FencedLease>(
        name: String, ttl: TimeInterval, timeout: TimeInterval, as type: L.Type = L.self
    ) async throws -> L {
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
            } catch  where error.code == SecretStoreError.leaseLost {
                return false
            }
        }
    }

    /// Extends a held lease. Throws `leaseLost` if it lapsed or someone else took it.
    package func renewLease<L: FencedLease>(_ lease: L, ttl: TimeInterval) throws(SecretStoreError) -> L {
        try locked { (state) throws(SecretStoreError) in try Leases.renew(state, lease, ttl: ttl) }
    }

    /// Gives the lease's file lock back, then the lease (no-op if it was already lost).
    ///
    /// The file lock first: released the other way round, a waiter could find the row free while the
    /// file lock is still held, take the row without the lock, and — killed then — leave a lease that
    /// only its ttl frees. This way a waiter that gets the file lock finds this holder's row unexpired
    /// and takes it over (its holder had the lock), which is all it needs.
    package func releaseLease(_ lease: some FencedLease) throws(SecretStoreError) {
        LeaseLocks.release(lease)
        try locked { (state) throws(SecretStoreError) in try Leases.release(state, lease) }
    }
}

/// The OS file locks lease holders keep beside the store: one file per lease name
/// (`<store>.lease-<16 hex digits of SHA-256(name)>`, 0600, in the store's folder, found through the
/// store's real path so every opener of one file agrees), locked with `flock(LOCK_EX)` for as long as
/// the lease is held. The kernel drops the lock the moment the holding process dies — `kill -9`, an
/// OOM kill, a CI job cancelled — so the next process to try takes the lease over at once instead of
/// waiting for its ttl. Descriptors are close-on-exec: a child (a browser) never inherits a lock.
enum LeaseLocks {
    enum Attempt {
        case acquired(Int32)
        /// Another live holder has it.
        case busy
        /// The file cannot be made or locked here (a read-only folder…): leases fall back to their ttl.
        case unavailable
    }

    /// Held locks, by lease name and holder: the descriptor to close on release.
    private static let held = Mutex<[String: Int32]>([:])

    /// The marker a row's holder id carries when its holder has the file lock: only such rows are
    /// taken over before they lapse (a holder from an older Moose, without the lock, keeps its ttl).
    static let lockedHolderPrefix = "f"

    static func path(store: String, lease name: String) -> String {
        var resolved = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let base =
            realpath(store, &resolved) != nil
            ? String(decoding: resolved.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : store
        let digest = DigestAlgorithm.sha256.hash(Array(name.utf8)).prefix(8)
        let hex = digest.map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
        return base + ".lease-" + hex
    }

    static func tryLock(store: String, lease name: String) -> Attempt {
        let file = path(store: store, lease: name)
        let fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return .unavailable }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 { return .acquired(fd) }
        let failure = errno
        close(fd)
        return failure == EWOULDBLOCK ? .busy : .unavailable
    }

    static func key(_ lease: some FencedLease) -> String { lease.name + "\u{0}" + lease.holder }

    static func keep(_ fd: Int32, for lease: some FencedLease) {
        let previous = held.withLock { held in held.updateValue(fd, forKey: key(lease)) }
        if let previous { close(previous) }
    }

    static func release(_ lease: some FencedLease) {
        if let fd = held.withLock({ held in held.removeValue(forKey: key(lease)) }) { close(fd) }
    }
}

enum Leases {
    /// Takes the row lease unless another holder's is unexpired — or, with `fileLocked` (this caller
    /// holds the lease's file lock, so every other holder of the row is dead), unless it is unexpired
    /// and its holder did not have the file lock either.
    static func tryAcquire<L: FencedLease>(
        _ state: borrowing SecretStore.State, name: String, ttl: TimeInterval,
        fileLocked: Bool = false
    ) throws(SecretStoreError) -> L? {
        guard !name.isEmpty else { throw SecretStoreError(SecretStoreError.invalidArgument, "a lease needs a name") }
        let connection = state.connection
        var holder: String
        do { holder = try SecureRandom.bytes(count: 12).map { String($0, radix: 16) }.joined() } catch {
            throw SecretStoreError(SecretStoreError.io, "no randomness for a lease holder id")
        }
        if fileLocked { holder = LeaseLocks.lockedHolderPrefix + "-" + holder }
        return try StoreFormat.inTransaction(connection) { () throws(SecretStoreError) -> L? in
            try StoreFormat.sql {
                let now = StoreFormat.now()
                let select = try connection.statement("SELECT token, expires_at, holder FROM leases WHERE name = ?")
                try select.bind(1, name)
                var token: Int64 = 0
                if try select.step() {
                    token = select.int64(0)
                    // Held, not expired — unless its holder had the file lock and this caller has it now:
                    // then that holder is dead (the kernel released its lock), and its row is taken over.
                    let deadHolder =
                        fileLocked && (select.text(2)?.hasPrefix(LeaseLocks.lockedHolderPrefix + "-") ?? false)
                    if select.int64(1) > now, !deadHolder { return nil }
                }
                let expires = now + Int64(ttl * 1000)
                let upsert = try connection.statement(
                    """
                    INSERT INTO leases (name, holder, token, expires_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, token = excluded.token,
                    expires_at = excluded.expires_at
                    """)
                try upsert.bind(1, name)
                try upsert.bind(2, holder)
                try upsert.bind(3, token + 1)
                try upsert.bind(4, expires)
                try upsert.step()
                return L(
                    name: name, holder: holder, fencingToken: token + 1,
                    expiresAt: Date(timeIntervalSince1970: Double(expires) / 1000))
            }
        }
    }

    /// Throws `leaseLost` unless `lease` is the current, unexpired acquisition.
    static func require(_ state: borrowing SecretStore.State, _ lease: some FencedLease) throws(SecretStoreError) {
        let connection = state.connection
        let held: Bool = try StoreFormat.sql {
            let select = try connection.statement("SELECT holder, token, expires_at FROM leases WHERE name = ?")
            try select.bind(1, lease.name)
            guard try select.step() else { return false }
            return select.text(0).map { $0.utf8.elementsEqual(lease.holder.utf8) } == true
                && select.int64(1) == lease.fencingToken && select.int64(2) > StoreFormat.now()
        }
        guard held else {
            throw SecretStoreError(SecretStoreError.leaseLost, "lease \(lease.name) expired or was taken over")
        }
    }

    static func renew<L: FencedLease>(_ state: borrowing SecretStore.State, _ lease: L, ttl: TimeInterval)
        throws(SecretStoreError) -> L
    {
        let connection = state.connection
        return try StoreFormat.inTransaction(connection) { () throws(SecretStoreError) -> L in
            try require(state, lease)
            let expires = StoreFormat.now() + Int64(ttl * 1000)
            try StoreFormat.sql {
                let update = try connection.statement(
                    "UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND token = ?")
                try update.bind(1, expires)
                try update.bind(2, lease.name)
                try update.bind(3, lease.holder)
                try update.bind(4, lease.fencingToken)
                try update.step()
            }
            return L(
                name: lease.name, holder: lease.holder, fencingToken: lease.fencingToken,
                expiresAt: Date(timeIntervalSince1970: Double(expires) / 1000))
        }
    }

    static func release(_ state: borrowing SecretStore.State, _ lease: some FencedLease) throws(SecretStoreError) {
        let connection = state.connection
        try StoreFormat.sql {
            // Keep the row (and its token) so fencing tokens keep increasing; just expire it.
            let update = try connection.statement(
                "UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ? AND token = ?")
            try update.bind(1, lease.name)
            try update.bind(2, lease.holder)
            try update.bind(3, lease.fencingToken)
            try update.step()
        }
    }
}
