#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP

/// An authorization server's metadata (OpenID Connect Discovery 1.0 §3, RFC 8414 §2).
public struct ProviderMetadata: Sendable, Codable, Hashable {
    /// The issuer identifier.
    public var issuer: String
    /// `authorization_endpoint`
    public var authorizationEndpoint: URL?
    /// `token_endpoint`
    public var tokenEndpoint: URL?
    /// `userinfo_endpoint`
    public var userinfoEndpoint: URL?
    /// `jwks_uri`
    public var jwksURI: URL?
    /// `revocation_endpoint` (RFC 7009)
    public var revocationEndpoint: URL?
    /// `introspection_endpoint` (RFC 7662)
    public var introspectionEndpoint: URL?
    /// `end_session_endpoint` (RP-Initiated Logout)
    public var endSessionEndpoint: URL?
    /// `device_authorization_endpoint` (RFC 8628)
    public var deviceAuthorizationEndpoint: URL?
    /// `scopes_supported`
    public var scopesSupported: [String]?
    /// `grant_types_supported`
    public var grantTypesSupported: [String]?
    /// `code_challenge_methods_supported`
    public var codeChallengeMethodsSupported: [String]?
    /// `token_endpoint_auth_methods_supported`
    public var tokenEndpointAuthMethodsSupported: [String]?
    /// `id_token_signing_alg_values_supported`
    public var idTokenSigningAlgValuesSupported: [String]?

    enum CodingKeys: String, CodingKey {
        case issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case userinfoEndpoint = "userinfo_endpoint"
        case jwksURI = "jwks_uri"
        case revocationEndpoint = "revocation_endpoint"
        case introspectionEndpoint = "introspection_endpoint"
        case endSessionEndpoint = "end_session_endpoint"
        case deviceAuthorizationEndpoint = "device_authorization_endpoint"
        case scopesSupported = "scopes_supported"
        case grantTypesSupported = "grant_types_supported"
        case codeChallengeMethodsSupported = "code_challenge_methods_supported"
        case tokenEndpointAuthMethodsSupported = "token_endpoint_auth_methods_supported"
        case idTokenSigningAlgValuesSupported = "id_token_signing_alg_values_supported"
    }

    /// Metadata configured by hand (for servers without discovery, or to fill gaps).
    public init(issuer: String, authorizationEndpoint: URL? = nil, tokenEndpoint: URL? = nil, userinfoEndpoint: URL? = nil,
                jwksURI: URL? = nil, revocationEndpoint: URL? = nil, introspectionEndpoint: URL? = nil,
                endSessionEndpoint: URL? = nil, deviceAuthorizationEndpoint: URL? = nil) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.userinfoEndpoint = userinfoEndpoint
        self.jwksURI = jwksURI
        self.revocationEndpoint = revocationEndpoint
        self.introspectionEndpoint = introspectionEndpoint
        self.endSessionEndpoint = endSessionEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
    }

    /// This metadata with every endpoint `other` has and this one lacks filled in (same issuer only).
    public func filling(from other: ProviderMetadata) -> ProviderMetadata {
        guard other.issuer == issuer else { return self }
        var merged = self
        merged.authorizationEndpoint = authorizationEndpoint ?? other.authorizationEndpoint
        merged.tokenEndpoint = tokenEndpoint ?? other.tokenEndpoint
        merged.userinfoEndpoint = userinfoEndpoint ?? other.userinfoEndpoint
        merged.jwksURI = jwksURI ?? other.jwksURI
        merged.revocationEndpoint = revocationEndpoint ?? other.revocationEndpoint
        merged.introspectionEndpoint = introspectionEndpoint ?? other.introspectionEndpoint
        merged.endSessionEndpoint = endSessionEndpoint ?? other.endSessionEndpoint
        merged.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint ?? other.deviceAuthorizationEndpoint
        merged.scopesSupported = scopesSupported ?? other.scopesSupported
        merged.grantTypesSupported = grantTypesSupported ?? other.grantTypesSupported
        merged.codeChallengeMethodsSupported = codeChallengeMethodsSupported ?? other.codeChallengeMethodsSupported
        merged.tokenEndpointAuthMethodsSupported = tokenEndpointAuthMethodsSupported ?? other.tokenEndpointAuthMethodsSupported
        merged.idTokenSigningAlgValuesSupported = idTokenSigningAlgValuesSupported ?? other.idTokenSigningAlgValuesSupported
        return merged
    }

    /// This metadata with the endpoints set in `overrides` replacing discovered ones.
    public func overridden(by overrides: EndpointOverrides) -> ProviderMetadata {
        var merged = self
        merged.authorizationEndpoint = overrides.authorizationEndpoint ?? authorizationEndpoint
        merged.tokenEndpoint = overrides.tokenEndpoint ?? tokenEndpoint
        merged.userinfoEndpoint = overrides.userinfoEndpoint ?? userinfoEndpoint
        merged.jwksURI = overrides.jwksURI ?? jwksURI
        merged.revocationEndpoint = overrides.revocationEndpoint ?? revocationEndpoint
        merged.introspectionEndpoint = overrides.introspectionEndpoint ?? introspectionEndpoint
        merged.endSessionEndpoint = overrides.endSessionEndpoint ?? endSessionEndpoint
        merged.deviceAuthorizationEndpoint = overrides.deviceAuthorizationEndpoint ?? deviceAuthorizationEndpoint
        return merged
    }

    /// An endpoint, or `missingEndpoint`.
    func require(_ endpoint: URL?, _ name: String) throws(OAuthError) -> URL {
        guard let endpoint else {
            throw OAuthError(OAuthError.missingEndpoint, "\(issuer) has no \(name) (neither discovered nor configured)")
        }
        return endpoint
    }
}

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
    public init(authorizationEndpoint: URL? = nil, tokenEndpoint: URL? = nil, userinfoEndpoint: URL? = nil, jwksURI: URL? = nil,
                revocationEndpoint: URL? = nil, introspectionEndpoint: URL? = nil, endSessionEndpoint: URL? = nil,
                deviceAuthorizationEndpoint: URL? = nil) {
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

/// Fetches and validates provider metadata, and caches it.
///
/// Reads the OpenID Connect document and, liberally, the RFC 8414 document too: some providers
/// list revocation and introspection only in the latter. The `issuer` in each document must equal
/// the requested issuer exactly (OIDC Discovery §4.3, RFC 8414 §3.3), or discovery fails.
///
/// ```swift
/// let discovery = Discovery(transport: URLSessionTransport())
/// let metadata = try await discovery.metadata(for: "https://id.example.com")
/// ```
public actor Discovery {
    private let transport: any HTTPTransport
    private let timeToLive: TimeInterval
    private var cache: [String: (metadata: ProviderMetadata, fetched: Date)] = [:]
    private var inFlight: [String: Task<ProviderMetadata, any Error>] = [:]

    /// A discovery client; documents are cached for `timeToLive` seconds.
    public init(transport: any HTTPTransport, timeToLive: TimeInterval = 3600) {
        self.transport = transport
        self.timeToLive = timeToLive
    }

    /// The metadata of `issuer`, from the cache or the network (one fetch for concurrent callers).
    public func metadata(for issuer: String, overrides: EndpointOverrides = EndpointOverrides()) async throws -> ProviderMetadata {
        if let cached = cache[issuer], Date().timeIntervalSince(cached.fetched) < timeToLive {
            return cached.metadata.overridden(by: overrides)
        }
        if let running = inFlight[issuer] { return try await running.value.overridden(by: overrides) }
        let transport = self.transport
        let task = Task { try await Discovery.fetch(issuer: issuer, transport: transport) }
        inFlight[issuer] = task
        defer { inFlight[issuer] = nil }
        let metadata = try await task.value
        cache[issuer] = (metadata, Date())
        return metadata.overridden(by: overrides)
    }

    /// Forgets a cached document (after a key rotation the JWKS URI may change, for instance).
    public func invalidate(_ issuer: String) { cache[issuer] = nil }

    /// Fetches and validates both documents.
    public static func fetch(issuer: String, transport: any HTTPTransport) async throws -> ProviderMetadata {
        guard let base = URL(string: issuer), let scheme = base.scheme?.lowercased(), scheme == "https" || scheme == "http",
              base.host != nil, base.query == nil, base.fragment == nil else {
            throw OAuthError(OAuthError.invalidConfiguration, "issuer \(issuer) must be an http(s) URL without query or fragment")
        }
        // OIDC Discovery §4: issuer + "/.well-known/openid-configuration" (a trailing "/" on the issuer removed).
        let trimmed = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        let oidc = try await document(trimmed + "/.well-known/openid-configuration", issuer: issuer, transport: transport)
        // RFC 8414 §3: the well-known segment goes between host and path.
        var components = URLComponents(string: trimmed)
        let path = components?.path ?? ""
        components?.path = "/.well-known/oauth-authorization-server" + path
        var metadata = oidc
        if let url = components?.string, let rfc8414 = try? await document(url, issuer: issuer, transport: transport) {
            metadata = (metadata ?? rfc8414).filling(from: rfc8414)
        }
        guard let metadata else {
            throw OAuthError(OAuthError.discovery, "\(issuer) publishes no discovery document")
        }
        return metadata
    }

    /// One document; `nil` for a 404 (so the other may stand in), an error for anything else wrong.
    static func document(_ text: String, issuer: String, transport: any HTTPTransport) async throws -> ProviderMetadata? {
        guard let url = URL(string: text) else { throw OAuthError(OAuthError.discovery, "bad discovery URL \(text)") }
        let response: HTTPResponse
        do {
            response = try await transport.send(HTTPRequest(url: url, headers: ["Accept": "application/json"], timeout: 15))
        } catch let error as HTTPError {
            throw OAuthError(OAuthError.transient, "cannot fetch \(url.redactedForLogs): \(error.message)", underlying: error)
        }
        if response.status == 404 { return nil }
        guard response.status == 200 else {
            throw OAuthError(response.status >= 500 ? OAuthError.transient : OAuthError.discovery,
                             "\(url.redactedForLogs) answered HTTP \(response.status)", status: response.status)
        }
        let metadata: ProviderMetadata
        do {
            metadata = try JSONDecoder().decode(ProviderMetadata.self, from: response.body)
        } catch {
            throw OAuthError(OAuthError.discovery, "\(url.redactedForLogs) is not a valid metadata document: \(error)")
        }
        guard metadata.issuer == issuer else {
            throw OAuthError(OAuthError.issuerMismatch,
                             "the discovery document of \(issuer) names issuer \(metadata.issuer); refusing it")
        }
        return metadata
    }
}
