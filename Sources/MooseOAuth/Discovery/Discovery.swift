#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
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
        merged.tokenEndpointAuthMethodsSupported = tokenEndpointAuthMethodsSupported ?? other.tokenEndpointAuthMethodsSupported
        merged.idTokenSigningAlgValuesSupported = idTokenSigningAlgValuesSupported ?? other.idTokenSigningAlgValuesSupported
        merged.responseTypesSupported = responseTypesSupported ?? other.responseTypesSupported
        merged.subjectTypesSupported = subjectTypesSupported ?? other.subjectTypesSupported
        merged.authorizationResponseIssParameterSupported = authorizationResponseIssParameterSupported
            ?? other.authorizationResponseIssParameterSupported
        merged.pushedAuthorizationRequestEndpoint = pushedAuthorizationRequestEndpoint ?? other.pushedAuthorizationRequestEndpoint
        merged.requirePushedAuthorizationRequests = requirePushedAuthorizationRequests ?? other.requirePushedAuthorizationRequests
        merged.dpopSigningAlgValuesSupported = dpopSigningAlgValuesSupported ?? other.dpopSigningAlgValuesSupported
        merged.registrationEndpoint = registrationEndpoint ?? other.registrationEndpoint
        merged.clientIDMetadataDocumentSupported = clientIDMetadataDocumentSupported ?? other.clientIDMetadataDocumentSupported
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
            throw OAuthError(OAuthError.insecureEndpoint,
                             "the \(name) \(endpoint.redactedForLogs) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)")
        }
        return endpoint
    }

    /// Throws `pkceNotSupported` unless `code_challenge_methods_supported` lists `S256` (compared
    /// byte for byte). The MCP authorization specification (2025-11-25) makes clients refuse an
    /// authorization server whose metadata does not say it supports PKCE with S256 — a missing member
    /// included, since it cannot be told from a server that ignores `code_challenge`.
    public func requireS256() throws(OAuthError) {
        guard let methods = codeChallengeMethodsSupported else {
            throw OAuthError(OAuthError.pkceNotSupported,
                             "\(issuer)'s metadata has no code_challenge_methods_supported: it does not say it supports PKCE with S256, which this client requires; refusing this authorization server")
        }
        guard methods.contains(where: { $0.utf8.elementsEqual("S256".utf8) }) else {
            let listed = methods.isEmpty ? "an empty list" : methods.prefix(8).map { ProtectedResourceMetadata.shown($0) }.joined(separator: ", ")
            throw OAuthError(OAuthError.pkceNotSupported,
                             "\(issuer)'s code_challenge_methods_supported (\(listed)) lacks S256, which this client requires for PKCE; refusing this authorization server")
        }
    }

    /// Every endpoint with its metadata name, for checks that cover them all.
    package var namedEndpoints: [(String, URL?)] {
        [("authorization_endpoint", authorizationEndpoint), ("token_endpoint", tokenEndpoint),
         ("userinfo_endpoint", userinfoEndpoint), ("jwks_uri", jwksURI), ("revocation_endpoint", revocationEndpoint),
         ("introspection_endpoint", introspectionEndpoint), ("end_session_endpoint", endSessionEndpoint),
         ("device_authorization_endpoint", deviceAuthorizationEndpoint),
         ("pushed_authorization_request_endpoint", pushedAuthorizationRequestEndpoint),
         ("registration_endpoint", registrationEndpoint)]
    }

    /// Throws `insecureEndpoint` unless the issuer and every endpoint are `https` (or loopback `http`).
    public func checkTransportSecurity() throws(OAuthError) {
        guard let issuerURL = URL(string: issuer), TransportSecurity.permits(issuerURL) else {
            throw OAuthError(OAuthError.insecureEndpoint,
                             "issuer \(issuer) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)")
        }
        for (name, url) in namedEndpoints {
            if let url, !TransportSecurity.permits(url) {
                throw OAuthError(OAuthError.insecureEndpoint,
                                 "\(name) \(url.redactedForLogs) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)")
            }
        }
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
    let transport: any HTTPTransport
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
            let merged = cached.metadata.overridden(by: overrides)
            try merged.checkTransportSecurity()
            return merged
        }
        if let running = inFlight[issuer] {
            let merged = try await running.value.overridden(by: overrides)
            try merged.checkTransportSecurity()
            return merged
        }
        let transport = self.transport
        let task = Task { try await Discovery.fetch(issuer: issuer, transport: transport) }
        inFlight[issuer] = task
        defer { inFlight[issuer] = nil }
        let metadata = try await task.value
        cache[issuer] = (metadata, Date())
        let merged = metadata.overridden(by: overrides)
        try merged.checkTransportSecurity()
        return merged
    }

    /// Forgets a cached document (after a key rotation the JWKS URI may change, for instance).
    public func invalidate(_ issuer: String) { cache[issuer] = nil }

    /// Fetches and validates both documents.
    public static func fetch(issuer: String, transport: any HTTPTransport) async throws -> ProviderMetadata {
        guard let base = URL(string: issuer), let scheme = base.scheme?.lowercased(), scheme == "https" || scheme == "http",
              base.host != nil, base.query == nil, base.fragment == nil else {
            throw OAuthError(OAuthError.invalidConfiguration, "issuer \(issuer) must be an http(s) URL without query or fragment")
        }
        // RFC 8414 §2, OIDC Discovery §3: the issuer uses https; RFC 8252 §8.3 allows loopback http.
        guard TransportSecurity.permits(base) else {
            throw OAuthError(OAuthError.insecureEndpoint,
                             "issuer \(issuer) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)")
        }
        // The order of RFC 8414 §3.1 / §5 and the MCP authorization specification (2025-11-25): the
        // RFC 8414 document (well-known segment between host and path), then OpenID Connect's — for an
        // issuer with a path first with the segment inserted the same way, then appended (OIDC
        // Discovery §4). Both kinds are read and merged (OpenID Connect's members win; the RFC 8414
        // document fills the gaps: some providers list revocation and introspection only there).
        let trimmed = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        let path = URLComponents(string: trimmed)?.path ?? ""
        func inserted(_ segment: String) -> String? {
            var components = URLComponents(string: trimmed)
            components?.path = "/.well-known/" + segment + path
            return components?.string
        }
        var rfc8414: ProviderMetadata? = nil
        var rfc8414Failure: (any Error)? = nil
        if let url = inserted("oauth-authorization-server") {
            do { rfc8414 = try await document(url, issuer: issuer, kind: .authorizationServer, transport: transport) } catch {
                rfc8414Failure = error
            }
        }
        var oidc: ProviderMetadata? = nil
        var insertedFailure: (any Error)? = nil
        if !path.isEmpty, let url = inserted("openid-configuration") {
            // A provider that does not know this (newer) location may answer anything there: only a
            // valid document counts, anything else is remembered and the appended location is asked.
            do { oidc = try await document(url, issuer: issuer, kind: .openIDConnect, transport: transport) } catch {
                insertedFailure = error
            }
        }
        if oidc == nil {
            oidc = try await document(trimmed + "/.well-known/openid-configuration", issuer: issuer, kind: .openIDConnect,
                                      transport: transport)
        }
        var metadata = oidc
        if let rfc8414 { metadata = (metadata ?? rfc8414).filling(from: rfc8414) }
        guard let metadata else {
            if let failure = rfc8414Failure ?? insertedFailure { throw failure }
            throw OAuthError(OAuthError.discovery, "\(issuer) publishes no discovery document")
        }
        try metadata.checkTransportSecurity()
        return metadata
    }

    /// The two metadata documents, each with its own REQUIRED members.
    public enum DocumentKind: Sendable {
        /// `/.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §3).
        case openIDConnect
        /// `/.well-known/oauth-authorization-server` (RFC 8414 §2).
        case authorizationServer
    }

    /// Parses and validates one metadata document: a JSON object (at most 256 KiB) whose `issuer`
    /// equals `issuer` exactly (byte for byte; OIDC Discovery §4.3, RFC 8414 §3.3) and which has
    /// every member its kind makes REQUIRED. The error names each missing member.
    package static func parseDocument(_ body: [UInt8], issuer: String, kind: DocumentKind) throws -> ProviderMetadata {
        guard body.count <= 256 << 10 else {
            throw OAuthError(OAuthError.discovery, "the discovery document of \(issuer) is larger than 256 KiB")
        }
        guard case .object(let object)? = try? JSONValue(parsing: body) else {
            throw OAuthError(OAuthError.discovery, "the discovery document of \(issuer) is not a JSON object")
        }
        let metadata: ProviderMetadata
        do {
            metadata = try JSONDecoder().decode(ProviderMetadata.self, from: Data(body))
        } catch {
            throw OAuthError(OAuthError.discovery, "the discovery document of \(issuer) has a member of the wrong type or a malformed URL")
        }
        guard metadata.issuer.utf8.elementsEqual(issuer.utf8) else {
            throw OAuthError(OAuthError.issuerMismatch,
                             "the discovery document of \(issuer) names another issuer (\(metadata.issuer)); refusing it")
        }
        var missing: [String] = []
        func need(_ name: String) { if object[name] == nil || object[name] == .null { missing.append(name) } }
        let responseTypes = metadata.responseTypesSupported ?? []
        let implicitOnly = !responseTypes.isEmpty && responseTypes.allSatisfy { !$0.split(separator: " ").contains("code") }
        switch kind {
        case .openIDConnect:
            need("authorization_endpoint")
            if !implicitOnly { need("token_endpoint") }
            for name in ["jwks_uri", "response_types_supported", "subject_types_supported", "id_token_signing_alg_values_supported"] {
                need(name)
            }
        case .authorizationServer:
            need("response_types_supported")
            // authorization_endpoint: REQUIRED unless no grant type uses it (RFC 8414 §2).
            let grants = metadata.grantTypesSupported ?? ["authorization_code", "implicit"]
            if grants.contains("authorization_code") || grants.contains("implicit") { need("authorization_endpoint") }
            if !implicitOnly { need("token_endpoint") }
        }
        guard missing.isEmpty else {
            let which = kind == .openIDConnect ? "OpenID Connect Discovery §3" : "RFC 8414 §2"
            throw OAuthError(OAuthError.discovery,
                             "the discovery document of \(issuer) lacks \(missing.joined(separator: ", ")) (REQUIRED by \(which))")
        }
        return metadata
    }

    /// One document; `nil` for a 404 (so the other may stand in), an error for anything else wrong.
    static func document(_ text: String, issuer: String, kind: DocumentKind, transport: any HTTPTransport) async throws -> ProviderMetadata? {
        guard let url = URL(string: text) else { throw OAuthError(OAuthError.discovery, "bad discovery URL \(text)") }
        let response = try await OAuthHTTP.send(APIRequest(url: url, headerFields: [.accept: "application/json"], timeout: 15),
                                                 over: transport, logger: nil, what: url.redactedForLogs)
        if response.status.code == 404 { return nil }
        guard response.status.code == 200 else {
            throw OAuthError(response.status.code >= 500 ? OAuthError.transient : OAuthError.discovery,
                             "\(url.redactedForLogs) answered HTTP \(response.status.code)", status: response.status.code)
        }
        return try parseDocument(Array(response.body), issuer: issuer, kind: kind)
    }
}
