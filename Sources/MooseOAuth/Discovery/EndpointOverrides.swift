#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP

/// Endpoints given by configuration, next to (and winning over) discovered ones — for providers
/// that list some endpoints nowhere (django-oauth-toolkit's device endpoint, for one).
public struct EndpointOverrides: Sendable, Hashable, Codable {
    public var authorizationEndpoint: URL?
    public var tokenEndpoint: URL?
    public var userinfoEndpoint: URL?
    public var jwksURI: URL?
    public var revocationEndpoint: URL?
    public var introspectionEndpoint: URL?
    public var endSessionEndpoint: URL?
    public var deviceAuthorizationEndpoint: URL?

    /// Overrides; unset ones leave the discovered endpoint.
    public init(
        authorizationEndpoint: URL? = nil, tokenEndpoint: URL? = nil, userinfoEndpoint: URL? = nil, jwksURI: URL? = nil,
        revocationEndpoint: URL? = nil, introspectionEndpoint: URL? = nil, endSessionEndpoint: URL? = nil,
        deviceAuthorizationEndpoint: URL? = nil
    ) {
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.userinfoEndpoint = userinfoEndpoint
        self.jwksURI = jwksURI
        self.revocationEndpoint = revocationEndpoint
        self.introspectionEndpoint = introspectionEndpoint
        self.endSessionEndpoint = endSessionEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
    }
}
