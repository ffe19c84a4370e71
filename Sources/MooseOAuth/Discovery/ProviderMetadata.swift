#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseJWT

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
    /// `response_types_supported` (REQUIRED in both OIDC Discovery §3 and RFC 8414 §2).
    public var responseTypesSupported: [String]?
    /// `subject_types_supported` (REQUIRED in OIDC Discovery §3).
    public var subjectTypesSupported: [String]?
    /// `authorization_response_iss_parameter_supported` (RFC 9207 §3): when `true`, every
    /// authorization response must carry `iss`, and a response without it is refused.
    public var authorizationResponseIssParameterSupported: Bool?
    /// `pushed_authorization_request_endpoint` (RFC 9126 §5): where the code flow pushes its parameters.
    public var pushedAuthorizationRequestEndpoint: URL?
    /// `require_pushed_authorization_requests` (RFC 9126 §5): the server accepts only pushed requests.
    public var requirePushedAuthorizationRequests: Bool?
    /// `dpop_signing_alg_values_supported` (RFC 9449 §5.1): the proof algorithms the server accepts.
    public var dpopSigningAlgValuesSupported: [String]?
    /// `registration_endpoint` (RFC 7591): where clients register themselves.
    public var registrationEndpoint: URL?
    /// `client_id_metadata_document_supported` (OAuth Client ID Metadata Document draft, used by MCP):
    /// the server accepts an `https` URL of the client's metadata document as its `client_id`.
    public var clientIDMetadataDocumentSupported: Bool?

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
        case responseTypesSupported = "response_types_supported"
        case subjectTypesSupported = "subject_types_supported"
        case authorizationResponseIssParameterSupported = "authorization_response_iss_parameter_supported"
        case pushedAuthorizationRequestEndpoint = "pushed_authorization_request_endpoint"
        case requirePushedAuthorizationRequests = "require_pushed_authorization_requests"
        case dpopSigningAlgValuesSupported = "dpop_signing_alg_values_supported"
        case registrationEndpoint = "registration_endpoint"
        case clientIDMetadataDocumentSupported = "client_id_metadata_document_supported"
    }

    /// Metadata configured by hand (for servers without discovery, or to fill gaps).
    ///
    /// Every endpoint defaults to `nil`: not available (an operation that needs it fails with
    /// `OAuthError.missingEndpoint`). Nothing is checked here; `checkTransportSecurity()` checks for `https`.
    public init(
        issuer: String, authorizationEndpoint: URL? = nil, tokenEndpoint: URL? = nil, userinfoEndpoint: URL? = nil,
        jwksURI: URL? = nil, revocationEndpoint: URL? = nil, introspectionEndpoint: URL? = nil,
        endSessionEndpoint: URL? = nil, deviceAuthorizationEndpoint: URL? = nil
    ) {
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
    ///
    /// - Returns: the merged metadata (this one's members win), or this one unchanged when `other`'s
    ///   issuer differs.
    public func filling(from other: ProviderMetadata) -> ProviderMetadata {
        guard other.issuer.utf8.elementsEqual(issuer.utf8) else { return self }
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
        merged.tokenEndpointAuthMethodsSupported =
            tokenEndpointAuthMethodsSupported ?? other.tokenEndpointAuthMethodsSupported
        merged.idTokenSigningAlgValuesSupported =
            idTokenSigningAlgValuesSupported ?? other.idTokenSigningAlgValuesSupported
        merged.responseTypesSupported = responseTypesSupported ?? other.responseTypesSupported
        merged.subjectTypesSupported = subjectTypesSupported ?? other.subjectTypesSupported
        merged.authorizationResponseIssParameterSupported =
            authorizationResponseIssParameterSupported
            ?? other.authorizationResponseIssParameterSupported
        merged.pushedAuthorizationRequestEndpoint =
            pushedAuthorizationRequestEndpoint ?? other.pushedAuthorizationRequestEndpoint
        merged.requirePushedAuthorizationRequests =
            requirePushedAuthorizationRequests ?? other.requirePushedAuthorizationRequests
        merged.dpopSigningAlgValuesSupported = dpopSigningAlgValuesSupported ?? other.dpopSigningAlgValuesSupported
        merged.registrationEndpoint = registrationEndpoint ?? other.registrationEndpoint
        merged.clientIDMetadataDocumentSupported =
            clientIDMetadataDocumentSupported ?? other.clientIDMetadataDocumentSupported
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

    /// An endpoint, or `missingEndpoint`; `insecureEndpoint` when it is plain `http` to another
    /// machine (every endpoint is checked again here, whether discovered or configured by hand).
    func require(_ endpoint: URL?, _ name: String) throws(OAuthError) -> URL {
        guard let endpoint else {
            throw OAuthError(OAuthError.missingEndpoint, "\(issuer) has no \(name) (neither discovered nor configured)")
        }
        guard TransportSecurity.permits(endpoint) else {
            throw OAuthError(
                OAuthError.insecureEndpoint,
                "the \(name) \(endpoint.redactedForLogs) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)"
            )
        }
        return endpoint
    }

    /// Throws `pkceNotSupported` unless `code_challenge_methods_supported` lists `S256` (compared
    /// byte for byte). The MCP authorization specification (2025-11-25) makes clients refuse an
    /// authorization server whose metadata does not say it supports PKCE with S256 — a missing member
    /// included, since it cannot be told from a server that ignores `code_challenge`.
    public func requireS256() throws(OAuthError) {
        guard let methods = codeChallengeMethodsSupported else {
            throw OAuthError(
                OAuthError.pkceNotSupported,
                "\(issuer)'s metadata has no code_challenge_methods_supported: it does not say it supports PKCE with S256, which this client requires; refusing this authorization server"
            )
        }
        guard methods.contains(where: { $0.utf8.elementsEqual("S256".utf8) }) else {
            let listed =
                methods.isEmpty
                ? "an empty list"
                : methods.prefix(8).map { ProtectedResourceMetadata.shown($0) }.joined(separator: ", ")
            throw OAuthError(
                OAuthError.pkceNotSupported,
                "\(issuer)'s code_challenge_methods_supported (\(listed)) lacks S256, which this client requires for PKCE; refusing this authorization server"
            )
        }
    }

    /// Every endpoint with its metadata name, for checks that cover them all.
    package var namedEndpoints: [(String, URL?)] {
        [
            ("authorization_endpoint", authorizationEndpoint), ("token_endpoint", tokenEndpoint),
            ("userinfo_endpoint", userinfoEndpoint), ("jwks_uri", jwksURI), ("revocation_endpoint", revocationEndpoint),
            ("introspection_endpoint", introspectionEndpoint), ("end_session_endpoint", endSessionEndpoint),
            ("device_authorization_endpoint", deviceAuthorizationEndpoint),
            ("pushed_authorization_request_endpoint", pushedAuthorizationRequestEndpoint),
            ("registration_endpoint", registrationEndpoint)
        ]
    }

    /// Throws `insecureEndpoint` unless the issuer and every endpoint are `https` (or loopback `http`).
    public func checkTransportSecurity() throws(OAuthError) {
        guard let issuerURL = URL(string: issuer), TransportSecurity.permits(issuerURL) else {
            throw OAuthError(
                OAuthError.insecureEndpoint,
                "issuer \(issuer) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)")
        }
        for (name, url) in namedEndpoints {
            if let url, !TransportSecurity.permits(url) {
                throw OAuthError(
                    OAuthError.insecureEndpoint,
                    "\(name) \(url.redactedForLogs) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)"
                )
            }
        }
    }
}
