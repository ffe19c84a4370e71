public import MooseJWT

/// The protected-resource metadata document (RFC 9728 §2) a resource server publishes (MooseOAuth's
/// `ProtectedResourceMetadata` is the client's reading of one), served as JSON at `wellKnownPath` so that
/// clients find the authorization server(s) and the token rules of this resource.
///
/// ```swift
/// let metadata = ProtectedResourceDocument(resource: "https://api.example.com",
///                                          authorizationServers: ["https://id.example.com"],
///                                          scopesSupported: ["api.read"])
/// // GET /.well-known/oauth-protected-resource → metadata.json, Content-Type: application/json
/// ```
public struct ProtectedResourceDocument: Sendable {
    /// `resource`: this resource's identifier (an https URL without fragment), the `aud` of its tokens.
    public var resource: String
    /// `authorization_servers`: issuers whose tokens are accepted.
    public var authorizationServers: [String]
    /// `scopes_supported`.
    public var scopesSupported: [String]?
    /// `bearer_methods_supported`: only `header` here (no form body or query tokens).
    public var bearerMethodsSupported: [String]
    /// `dpop_signing_alg_values_supported` (RFC 9728 §2), when DPoP is accepted.
    public var dpopSigningAlgorithms: [String]?
    /// `dpop_bound_access_tokens_required`.
    public var dpopBoundAccessTokensRequired: Bool
    /// `resource_name`, for people.
    public var resourceName: String?
    /// `resource_documentation`: a page for developers.
    public var resourceDocumentation: String?
    /// `authorization_details_types_supported` (RFC 9396).
    public var authorizationDetailsTypesSupported: [String]?

    /// A document for `resource`, trusting `authorizationServers`.
    public init(
        resource: String, authorizationServers: [String], scopesSupported: [String]? = nil,
        bearerMethodsSupported: [String] = ["header"], dpopSigningAlgorithms: [String]? = nil,
        dpopBoundAccessTokensRequired: Bool = false, resourceName: String? = nil, resourceDocumentation: String? = nil,
        authorizationDetailsTypesSupported: [String]? = nil
    ) {
        self.resource = resource
        self.authorizationServers = authorizationServers
        self.scopesSupported = scopesSupported
        self.bearerMethodsSupported = bearerMethodsSupported
        self.dpopSigningAlgorithms = dpopSigningAlgorithms
        self.dpopBoundAccessTokensRequired = dpopBoundAccessTokensRequired
        self.resourceName = resourceName
        self.resourceDocumentation = resourceDocumentation
        self.authorizationDetailsTypesSupported = authorizationDetailsTypesSupported
    }

    /// The document of the resource `configuration` verifies tokens for, its token rules taken from that
    /// configuration so that the two cannot disagree: `resource`, the DPoP proof algorithms the verifier
    /// accepts (none when DPoP is disabled) and whether DPoP-bound tokens are required.
    ///
    /// ```swift
    /// let document = ProtectedResourceDocument(for: server.configuration, scopesSupported: ["api.read"])
    /// ```
    ///
    /// - Parameters:
    ///   - configuration: the verifier's rules (`ResourceServer.configuration`).
    ///   - authorizationServers: the issuers to advertise; `nil` (the default): the configuration's issuer.
    ///   - scopesSupported: `scopes_supported`; `nil`: not published.
    ///   - resourceName: `resource_name`, for people.
    ///   - resourceDocumentation: `resource_documentation`, a page for developers.
    ///   - authorizationDetailsTypesSupported: `authorization_details_types_supported` (RFC 9396).
    public init(
        for configuration: ResourceServerConfiguration, authorizationServers: [String]? = nil,
        scopesSupported: [String]? = nil, resourceName: String? = nil, resourceDocumentation: String? = nil,
        authorizationDetailsTypesSupported: [String]? = nil
    ) {
        self.init(
            resource: configuration.resource, authorizationServers: authorizationServers ?? [configuration.issuer],
            scopesSupported: scopesSupported,
            dpopSigningAlgorithms: configuration.dpop == .disabled ? nil : configuration.dpopProofAlgorithmNames,
            dpopBoundAccessTokensRequired: configuration.dpop == .required, resourceName: resourceName,
            resourceDocumentation: resourceDocumentation,
            authorizationDetailsTypesSupported: authorizationDetailsTypesSupported)
    }

    /// The document of the resource `server` verifies tokens for: `init(for: server.configuration, …)`.
    ///
    /// ```swift
    /// let document = ProtectedResourceDocument(for: server, scopesSupported: ["api.read"])
    /// ```
    ///
    /// - Parameters:
    ///   - server: the verifier whose rules the document states.
    ///   - authorizationServers: the issuers to advertise; `nil` (the default): the configuration's issuer.
    ///   - scopesSupported: `scopes_supported`; `nil`: not published.
    ///   - resourceName: `resource_name`, for people.
    ///   - resourceDocumentation: `resource_documentation`, a page for developers.
    ///   - authorizationDetailsTypesSupported: `authorization_details_types_supported` (RFC 9396).
    public init(
        for server: ResourceServer, authorizationServers: [String]? = nil, scopesSupported: [String]? = nil,
        resourceName: String? = nil, resourceDocumentation: String? = nil,
        authorizationDetailsTypesSupported: [String]? = nil
    ) {
        self.init(
            for: server.configuration, authorizationServers: authorizationServers, scopesSupported: scopesSupported,
            resourceName: resourceName, resourceDocumentation: resourceDocumentation,
            authorizationDetailsTypesSupported: authorizationDetailsTypesSupported)
    }

    /// The document's members, in RFC 9728 §2's order; optional ones only when set.
    public var object: JSONObject {
        var object: JSONObject = [
            "resource": .string(resource),
            "authorization_servers": .array(authorizationServers.map { .string($0) })
        ]
        if let scopesSupported { object["scopes_supported"] = .array(scopesSupported.map { .string($0) }) }
        object["bearer_methods_supported"] = .array(bearerMethodsSupported.map { .string($0) })
        if let resourceName { object["resource_name"] = .string(resourceName) }
        if let resourceDocumentation { object["resource_documentation"] = .string(resourceDocumentation) }
        if let authorizationDetailsTypesSupported {
            object["authorization_details_types_supported"] = .array(
                authorizationDetailsTypesSupported.map { .string($0) })
        }
        if let dpopSigningAlgorithms {
            object["dpop_signing_alg_values_supported"] = .array(dpopSigningAlgorithms.map { .string($0) })
        }
        if dpopBoundAccessTokensRequired { object["dpop_bound_access_tokens_required"] = .bool(true) }
        return object
    }

    /// The document as compact JSON (serve with `Content-Type: application/json`).
    public var json: String { JSONValue.object(object).serialized() }

    /// The path to serve it at (RFC 9728 §3.1): `/.well-known/oauth-protected-resource`, followed by
    /// the resource identifier's path when it has one (`https://api.example.com/v1` →
    /// `/.well-known/oauth-protected-resource/v1`). `nil` when `resource` is not an absolute http(s) URL.
    public var wellKnownPath: String? { Self.split(resource)?.path }

    /// The URL of the document (`resource_metadata` in challenges, RFC 9728 §5.1).
    public var url: String? { Self.url(for: resource) }

    /// The URL of the document of `resource` (RFC 9728 §3.1): what `url` is for a document of that
    /// resource, known before the document is made (`configuration.resourceMetadataURL`). `nil` when
    /// `resource` is not an absolute http(s) URL without query or fragment.
    ///
    /// ```swift
    /// ProtectedResourceDocument.url(for: "https://api.example.com/v1")
    /// // "https://api.example.com/.well-known/oauth-protected-resource/v1"
    /// ```
    public static func url(for resource: String) -> String? { split(resource).map { $0.origin + $0.path } }

    static func split(_ resource: String) -> (origin: String, path: String)? {
        let lower = resource.lowercased()
        guard lower.hasPrefix("https://") || lower.hasPrefix("http://"),
            !resource.contains("#"), !resource.contains("?")
        else { return nil }
        let afterScheme = resource.index(resource.startIndex, offsetBy: lower.hasPrefix("https://") ? 8 : 7)
        let rest = resource[afterScheme...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        guard slash > rest.startIndex else { return nil }
        let origin = String(resource[..<slash])
        var path = String(rest[slash...])
        if path == "/" { path = "" }
        return (origin, "/.well-known/oauth-protected-resource" + path)
    }
}
