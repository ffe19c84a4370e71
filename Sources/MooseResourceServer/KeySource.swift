public import MooseJWT
public import MooseOAuth

/// Where the issuer's signing keys come from. `JWKSCache` (MooseOAuth) is one: the issuer's
/// `jwks_uri`, cached for its maximum age, and refetched — at most once per cooldown — when a token names
/// an unknown `kid` or its signature fails with the cached keys (key rotation).
///
/// ```swift
/// let keys = JWKSCache(url: jwksURL, transport: CurlTransport())      // from the issuer's metadata
/// let fixed = StaticAccessTokenKeys([try JWTKey(pem: pem, keyID: "k1")])
/// ```
public protocol AccessTokenKeySource: Sendable {
    /// Keys that may verify a token whose header names `kid`. Throws when they cannot be had now
    /// (the refusal is then `temporarilyUnavailable`, not `invalid_token`).
    func keys(for kid: String?) async throws -> [JWTKey]

    /// Keys to try once more after a token whose header names `kid` failed its signature check with the
    /// keys `keys(for:)` gave (the issuer may have replaced a key under the same `kid`). `ResourceServer`
    /// asks once per such token, then verifies once more. Throws as `keys(for:)`.
    ///
    /// The default answers `keys(for:)`: a source that cannot fetch again (fixed keys) needs nothing more.
    func keysAfterFailedVerification(for kid: String?) async throws -> [JWTKey]
}

extension AccessTokenKeySource {
    /// `keys(for: kid)`: no fresher keys than those.
    public func keysAfterFailedVerification(for kid: String?) async throws -> [JWTKey] {
        try await keys(for: kid)
    }
}

extension JWKSCache: AccessTokenKeySource {}

/// A fixed set of keys (configuration files, tests).
public struct StaticAccessTokenKeys: AccessTokenKeySource {
    /// The keys.
    public let keys: [JWTKey]

    /// A source that always answers `keys`.
    public init(_ keys: [JWTKey]) { self.keys = keys }

    /// `keys`, whatever the `kid`.
    public func keys(for kid: String?) async throws -> [JWTKey] { keys }
}
