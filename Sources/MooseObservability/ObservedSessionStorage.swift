#if MooseObservability
public import CoreMetrics
public import MooseOAuth
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A `SessionStorage` that counts and times every operation on the storage it wraps, in
/// swift-metrics: `moose_store_operations_total` by `operation` (`load`, `save`, `replace`, `delete`,
/// `keys`, `acquire_lease`, `renew_lease`, `release_lease`, `await_release`) and `outcome` (`ok`,
/// `conflict` for a compare-and-set or lease that lost, `busy` for a lease held elsewhere, `error`),
/// and `moose_store_operation_duration_seconds` by `operation`. Keys, sessions and lease names never become
/// dimensions.
///
/// ```swift
/// let storage = ObservedSessionStorage.wrapping(try EncryptedSessionStorage(store: store))
/// ```
///
/// Use `wrapping(_:metrics:)`: it keeps PostgreSQL's release notifications (`LeaseReleaseNotifying`)
/// when the wrapped storage has them, so a coordinator still adopts a holder's tokens the moment it
/// releases. No-op until the app bootstraps a metrics backend.
public enum ObservedSessionStorage {
    /// `storage`, observed; `LeaseReleaseNotifying` when `storage` is.
    public static func wrapping(_ storage: any SessionStorage, metrics: (any MetricsFactory)? = nil)
        -> any SessionStorage
    {
        if let notifying = storage as? any LeaseReleaseNotifying {
            return ObservedNotifyingStorage(base: notifying, probe: StoreProbe(metrics: metrics))
        }
        return ObservedStorage(base: storage, probe: StoreProbe(metrics: metrics))
    }
}

/// Records one operation's outcome and duration.
struct StoreProbe: Sendable {
    let metrics: (any MetricsFactory)?

    func measure<T>(_ operation: String, _ body: () async throws -> T) async throws -> T {
        let factory = metrics ?? MetricsSystem.factory
        let started = ContinuousClock.now
        var outcome = "error"
        defer {
            Counter(
                label: "moose_store_operations_total", dimensions: [("operation", operation), ("outcome", outcome)],
                factory: factory
            )
            .increment()
            let elapsed = ContinuousClock.now - started
            CoreMetrics.Timer(
                label: "moose_store_operation_duration_seconds", dimensions: [("operation", operation)],
                factory: factory
            )
            .recordNanoseconds(
                elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
        }
        do {
            let value = try await body()
            outcome = "ok"
            return value
        } catch let error as OAuthError {
            outcome =
                switch error.code {
                case OAuthError.storageConflict, OAuthError.leaseLost: "conflict"
                case OAuthError.leaseBusy: "busy"
                default: "error"
                }
            throw error
        }
    }
}

/// The wrapper for a storage without release notifications.
final class ObservedStorage: SessionStorage {
    let base: any SessionStorage
    let probe: StoreProbe

    init(base: any SessionStorage, probe: StoreProbe) {
        self.base = base
        self.probe = probe
    }

    func load(_ key: String) async throws -> StoredSession? {
        try await probe.measure("load") { try await base.load(key) }
    }
    func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?, lease: SessionLease?) async throws
        -> Int64
    {
        try await probe.measure("save") {
            try await base.save(session, key: key, expectedGeneration: expectedGeneration, lease: lease)
        }
    }
    func replace(_ session: OAuthSession, key: String) async throws -> Int64 {
        try await probe.measure("replace") { try await base.replace(session, key: key) }
    }
    func delete(_ key: String) async throws -> Bool { try await probe.measure("delete") { try await base.delete(key) } }
    func keys() async throws -> [String] { try await probe.measure("keys") { try await base.keys() } }
    func acquireLease(_ name: String, ttl: TimeInterval, timeout: TimeInterval) async throws -> SessionLease {
        try await probe.measure("acquire_lease") { try await base.acquireLease(name, ttl: ttl, timeout: timeout) }
    }
    func renewLease(_ lease: SessionLease, ttl: TimeInterval) async throws -> SessionLease {
        try await probe.measure("renew_lease") { try await base.renewLease(lease, ttl: ttl) }
    }
    func releaseLease(_ lease: SessionLease) async throws {
        try await probe.measure("release_lease") { try await base.releaseLease(lease) }
    }
    var leaseLifetime: TimeInterval? { base.leaseLifetime }
}

/// The wrapper for a storage that announces lease releases (PostgreSQL).
final class ObservedNotifyingStorage: LeaseReleaseNotifying {
    let base: any LeaseReleaseNotifying
    let plain: ObservedStorage

    init(base: any LeaseReleaseNotifying, probe: StoreProbe) {
        self.base = base
        plain = ObservedStorage(base: base, probe: probe)
    }

    func load(_ key: String) async throws -> StoredSession? { try await plain.load(key) }
    func save(_ session: OAuthSession, key: String, expectedGeneration: Int64?, lease: SessionLease?) async throws
        -> Int64
    {
        try await plain.save(session, key: key, expectedGeneration: expectedGeneration, lease: lease)
    }
    func replace(_ session: OAuthSession, key: String) async throws -> Int64 {
        try await plain.replace(session, key: key)
    }
    func delete(_ key: String) async throws -> Bool { try await plain.delete(key) }
    func keys() async throws -> [String] { try await plain.keys() }
    func acquireLease(_ name: String, ttl: TimeInterval, timeout: TimeInterval) async throws -> SessionLease {
        try await plain.acquireLease(name, ttl: ttl, timeout: timeout)
    }
    func renewLease(_ lease: SessionLease, ttl: TimeInterval) async throws -> SessionLease {
        try await plain.renewLease(lease, ttl: ttl)
    }
    func releaseLease(_ lease: SessionLease) async throws { try await plain.releaseLease(lease) }
    var leaseLifetime: TimeInterval? { base.leaseLifetime }
    func acquireLeaseOrAwaitRelease(_ name: String, ttl: TimeInterval, wait: TimeInterval) async throws -> SessionLease?
    {
        try await plain.probe.measure("await_release") {
            try await base.acquireLeaseOrAwaitRelease(name, ttl: ttl, wait: wait)
        }
    }
}
#endif
