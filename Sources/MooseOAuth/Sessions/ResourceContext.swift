#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseJWT

/// What a `ResourceTokenManager` found out about its resource: the RFC 9728 metadata, the
/// authorization server it chose, the storage key of the session and the coordinator of its tokens.
public struct ResourceContext: Sendable {
    /// The resource identifier, as its metadata spells it: sent as RFC 8707 `resource`.
    public let resource: String
    /// The resource's RFC 9728 metadata.
    public let protectedResource: ProtectedResourceMetadata
    /// Where that metadata came from.
    public let metadataURL: URL
    /// The authorization server's metadata (its `issuer` is the first of `authorization_servers`).
    public let authorizationServer: ProviderMetadata
    /// The storage key of the session: `OAuthSession.storageKey(issuer:resource:)` unless the
    /// manager was given its own.
    public let key: String
    /// The coordinator every token for this resource goes through.
    public let coordinator: RefreshCoordinator
}
