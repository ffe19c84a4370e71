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
    /// they still know the token's `kid`.
    ///
    /// Each document is a value under `namespace` named by its `jwks_uri` (the URL it was fetched
    /// from, so a document is never used for another URL): 8 bytes of the fetch time
    /// (seconds since 1970, big-endian) and the document as fetched. A value that is shorter or cannot
    /// be read counts as none (the keys are fetched); a save that fails is dropped (the next run fetches).
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
        return JWKSCache.Persistence(
            load: {
                guard let bytes = try? store.get(namespace: namespace, name: name), bytes.count > 8 else { return nil }
                let seconds = bytes.prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
                return (Array(bytes.dropFirst(8)), Date(timeIntervalSince1970: TimeInterval(seconds)))
            },
            save: { document, fetchedAt in
                let time = fetchedAt.timeIntervalSince1970
                let seconds = time.isFinite && abs(time) < 1e15 ? Int64(time) : 0
                let stamp = (0..<8).map { UInt8(truncatingIfNeeded: seconds >> (56 - 8 * $0)) }
                try? store.put(stamp + document, namespace: namespace, name: name)
            })
    }
}
