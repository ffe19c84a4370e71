public import MooseSealing
public import MooseSecretStore

/// The upkeep of the store file the sessions live in. It covers the whole file — every value in it,
/// sessions and whatever else an app keeps there — as one data key seals them all. Each method runs
/// in the calling thread (the store's own calls are synchronous) and throws the store's `SecretStoreError`.
extension EncryptedSessionStorage: SessionStoreMaintenance {
    /// The store file is made (and a file of an older Moose migrated) and its master key checked when the
    /// `SecretStore` is opened: an open store is ready, and this only says so.
    ///
    /// - Returns: `store PATH is ready; key OK`.
    public func prepareStore() async throws(SecretStoreError) -> String {
        "store \(store.path) is ready; key OK"
    }

    /// Opens every value of the store file (`SecretStore.check()`) and runs SQLite's integrity check.
    ///
    /// - Returns: `BAD  NAMESPACE/NAME: CODE` for each value that does not open, then `file: ok` (or
    ///   `file: corrupt (…)` with SQLite's words) and `N values open, M do not`.
    public func checkStore() async throws(SecretStoreError) -> SessionStoreCheck {
        let report = try store.check()
        var lines = report.bad.map { entry, error in "BAD  \(entry.namespace)/\(entry.name): \(error.code)" }
        lines.append("file: \(report.integrity == "ok" ? "ok" : "corrupt (\(report.integrity))")")
        lines.append("\(report.good) values open, \(report.bad.count) do not")
        return SessionStoreCheck(lines: lines, isHealthy: report.isHealthy)
    }

    /// Seals every value of the store file again under a fresh data key (`SecretStore.rotateDataKey()`).
    ///
    /// - Returns: `data key rotated; every value re-encrypted`.
    public func rotateStoreDataKey() async throws(SecretStoreError) -> String {
        try store.rotateDataKey()
        return "data key rotated; every value re-encrypted"
    }

    /// Rewraps the store's data key under `newKey` (`SecretStore.rotateMasterKey(to:scryptParameters:)`,
    /// the default scrypt cost for a passphrase); every process that opens the file needs `newKey` from now on.
    ///
    /// - Parameter newKey: the master key the store uses from now on.
    /// - Returns: `master key rotated`.
    public func rotateStoreMasterKey(to newKey: MasterKeySource) async throws(SecretStoreError) -> String {
        try store.rotateMasterKey(to: newKey)
        return "master key rotated"
    }
}
