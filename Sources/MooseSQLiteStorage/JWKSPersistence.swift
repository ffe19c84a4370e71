#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth
public import MooseSecretStore

extension JWKSCache.Persistence {
    /// A provider's last JWKS document kept in `store` (encrypted like every value there), so a new
    /// process — each `moose token` is one — validates ID tokens without fetching the keys again while
    /// they are younger than their maximum age and know the token's `kid`.
    ///
    /// Each document is a value under `namespace` named by its `jwks_uri` (the URL it was fetched
    /// from, so a document is never used for another URL): 8 bytes of the fetch time
    /// (seconds since 1970, big-endian) and the document as fetched. The set's maximum age is a second
    /// value, written in the same transaction, named `max-age ` and the `jwks_uri`: the same 8 bytes of
    /// fetch time, then 8 of seconds; it counts only beside the document of that fetch time (else, and for
    /// a value written by an older version, the cache's default maximum age applies). A value that is
    /// shorter or cannot be read counts as none (the keys are fetched); a save that fails is dropped (the
    /// next run fetches).
    ///
    /// ```swift
    /// let manager = try await TokenManager.open(
    ///     key: "work", storage: EncryptedSessionStorage(store: store), transport: CurlTransport(),
    ///     idTokenKeys: { .secretStore(store, for: $0) })
    /// ```
    ///
    /// - Parameters:
    ///   - store: the encrypted store (the sessions' own, or another).
    ///   - url: the provider's `jwks_uri`; its absolute string names the value.
    ///   - namespace: where the documents are kept (default `moose.jwks`, the `moose` CLI's).
    /// - Returns: a persistence for `JWKSCache` and `SessionEngine.idTokenValidator(for:persistence:)`.
    public static func secretStore(_ store: SecretStore, for url: URL, namespace: String = "moose.jwks") -> Self {
        let name = url.absoluteString
        // A space never appears in a URL: this name cannot be another jwks_uri's.
        let maximumAgeName = "max-age " + name
        return JWKSCache.Persistence(
            loadRecord: {
                guard let bytes = try? store.get(namespace: namespace, name: name), bytes.count > 8 else { return nil }
                let stamp = Array(bytes.prefix(8))
                var maximumAge: TimeInterval? = nil
                if let kept = try? store.get(namespace: namespace, name: maximumAgeName), kept.count == 16,
                    Array(kept.prefix(8)) == stamp
                {
                    // Bounded again by the cache (its cooldown…one day).
                    maximumAge = TimeInterval(integer(kept.suffix(8)))
                }
                return JWKSCache.Persistence.Record(
                    document: Array(bytes.dropFirst(8)),
                    fetchedAt: Date(timeIntervalSince1970: TimeInterval(integer(stamp))), maximumAge: maximumAge)
            },
            saveRecord: { record in
                let stamp = bytes(seconds(record.fetchedAt.timeIntervalSince1970))
                try? store.transaction { (tx) throws(SecretStoreError) in
                    try tx.put(stamp + record.document, namespace: namespace, name: name)
                    if let maximumAge = record.maximumAge {
                        try tx.put(stamp + bytes(seconds(maximumAge)), namespace: namespace, name: maximumAgeName)
                    } else {
                        _ = try tx.delete(namespace: namespace, name: maximumAgeName)
                    }
                }
            })
    }
}

/// Whole seconds of `time`, 0 when it is not a number a kept value can hold.
private func seconds(_ time: TimeInterval) -> Int64 {
    time.isFinite && abs(time) < 1e15 ? Int64(time) : 0
}

/// `value` as 8 bytes, big-endian.
private func bytes(_ value: Int64) -> [UInt8] {
    (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
}

/// 8 bytes, big-endian, as a number.
private func integer(_ bytes: some Collection<UInt8>) -> Int64 {
    bytes.prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
}
