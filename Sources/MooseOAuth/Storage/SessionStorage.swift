#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Where sessions live: the one contract a `RefreshCoordinator` depends on.
///
/// Implementations: `EncryptedSessionStorage` (AES-256-GCM in the SQLite secret store, the
/// default, in MooseSQLiteStorage), `InMemorySessionStorage` (tests, short-lived tools), and
/// `MoosePostgres` for several machines. Any storage of an app's own (the Keychain, a database) conforms the same way and can
/// prove it with `SessionStorageContract` from `MooseTesting`.
///
/// The rules every implementation keeps:
/// - `save(_:key:expectedGeneration:lease:)` is a compare-and-set: it writes only when the stored
///   generation is `expectedGeneration` (`nil`: nothing stored) and, given a lease, only while that
///   exact acquisition is still current (fencing) — in one atomic step. Every write returns a new
///   generation, larger than any this key ever had — also across a `delete` and a new `replace`
///   (keep the last generation of a deleted key), so a save prepared before a logout can never land
///   on the next login's session.
/// - A lease is held by one holder at a time; every acquisition has a larger `fencingToken`; it
///   lapses at `expiresAt` by the storage's own clock unless renewed, so a crashed holder never
///   blocks the others for longer than its ttl.
/// - A damaged row — one whose sealed bytes do not authenticate or do not decode — never locks a
///   person out: `load` throws `sessionDamaged` for that key only (never `nil`, never
///   `storeUnavailable`), `keys` still lists it, `replace` writes over it and `delete` removes it,
///   both keeping generations growing. Every other key keeps working.
/// - Errors are `OAuthError`: `storageConflict` (compare-and-set lost), `leaseLost`, `leaseBusy`
///   (not acquired in time), `sessionDamaged` (that one row cannot be opened), `storeUnavailable`
///   (the storage cannot be reached or written).
public protocol SessionStorage: Sendable {
    /// The session under `key` and its generation; `nil` when there is none.
    ///
    /// - Throws: `OAuthError.sessionDamaged` when a row exists under `key` but cannot be opened;
    ///   `OAuthError.storeUnavailable` when the storage cannot be read at all.
    func load(_ key: String) async throws -> StoredSession?

    /// Compare-and-set: writes `session` under `key` only if the stored generation is
    /// `expectedGeneration` (`nil`: only if nothing is stored) and, with `lease`, only while it is
    /// held. Returns the new generation. Throws `storageConflict` or `leaseLost` otherwise.
    @discardableResult
    func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?, lease: SessionLease?) async throws
        -> Int64

    /// Writes `session` under `key` whatever is stored (a new login) — a damaged row included.
    /// Returns the new generation.
    @discardableResult
    func replace(_ session: OAuthSession, key: String) async throws -> Int64

    /// Removes the session under `key`; `true` if there was one. Always allowed (logout wipes), a
    /// damaged row included.
    @discardableResult
    func delete(_ key: String) async throws -> Bool

    /// Every key with a session, sorted — damaged rows included (`load` then says `sessionDamaged`).
    func keys() async throws -> [String]

    /// Takes the lease `name`, waiting up to `timeout` while another holder has it.
    func acquireLease(_ name: String, ttl: TimeInterval, timeout: TimeInterval) async throws -> SessionLease

    /// Extends a held lease by `ttl` from now. Throws `leaseLost` if it lapsed or was taken over.
    func renewLease(_ lease: SessionLease, ttl: TimeInterval) async throws -> SessionLease

    /// Gives the lease back; a lease already lost is no error.
    func releaseLease(_ lease: SessionLease) async throws

    /// The longest a lease of this storage should live between two renewals, when that is shorter
    /// than a coordinator's `leaseTTL`: the time a holder that vanished without releasing (a lost
    /// machine, a killed replica) blocks the others. `nil` (the default): the coordinator's `leaseTTL`.
    /// PostgreSQL's storage says 5 s — a replica renews every ~1.7 s while it refreshes — where the
    /// SQLite file store needs none (its holders keep a file lock the kernel frees with the process).
    var leaseLifetime: TimeInterval? { get }
}

extension SessionStorage {
    /// No preference: the coordinator's `leaseTTL`.
    public var leaseLifetime: TimeInterval? { nil }
}

/// A storage that can wake a lease waiter when the holder releases the lease (PostgreSQL's
/// LISTEN/NOTIFY does). A `RefreshCoordinator` then re-reads the session without the lease and
/// adopts what the holder wrote — tokens valid for what the caller asked — instead of queueing for
/// the lease behind every other waiter only to find the same answer; when they do not answer, it
/// takes the lease and re-reads inside it as always. Optional: other storages are waited on with
/// `acquireLease(_:ttl:timeout:)`.
public protocol LeaseReleaseNotifying: SessionStorage {
    /// One attempt to take the lease `name`; if another holder has it, waits until it is released
    /// or lapses (at most `wait` seconds), then returns `nil` without taking it.
    func acquireLeaseOrAwaitRelease(_ name: String, ttl: TimeInterval, wait: TimeInterval) async throws -> SessionLease?
}

/// A session as stored, with the generation a compare-and-set must name.
public struct StoredSession: Sendable, Hashable {
    /// The session.
    public var session: OAuthSession
    /// Its generation: larger after every write.
    public var generation: Int64

    /// A stored session.
    public init(session: OAuthSession, generation: Int64) {
        self.session = session
        self.generation = generation
    }
}

/// One acquisition of a named lease: who holds it, its fencing token, and when it lapses.
///
/// The one lease type in Moose: every storage hands out and checks these, the SQLite file store's
/// lease rows included — MooseSecretStore's lease functions are generic over `FencedLease`, a
/// protocol of these four members that this type meets (declared in MooseSQLiteStorage), so no
/// second struct repeats the fields and nothing converts between two. The store cannot name this
/// type because it sits below MooseOAuth (MooseOAuth links no SQLite, the store no OAuth).
public struct SessionLease: Sendable, Hashable, CustomStringConvertible {
    /// The lease's name (`refresh:<key>` for a coordinator).
    public let name: String
    /// This holder's random identity.
    public let holder: String
    /// Strictly increasing across acquisitions of `name`: a write fenced by it commits only while
    /// this acquisition is current.
    public let fencingToken: Int64
    /// When it lapses unless renewed (by the storage's clock).
    public let expiresAt: Date

    /// A lease (storages make these).
    public init(name: String, holder: String, fencingToken: Int64, expiresAt: Date) {
        self.name = name
        self.holder = holder
        self.fencingToken = fencingToken
        self.expiresAt = expiresAt
    }

    /// Name and fencing token.
    public var description: String { "SessionLease(\(name), #\(fencingToken))" }

    /// `true` when `other` is the same acquisition (byte-for-byte holder, same name and token).
    public func isSameAcquisition(as other: SessionLease) -> Bool {
        name.utf8.elementsEqual(other.name.utf8) && holder.utf8.elementsEqual(other.holder.utf8)
            && fencingToken == other.fencingToken
    }
}
