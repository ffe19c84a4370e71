#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseJWT

/// A protected resource's metadata (RFC 9728 §2): which authorization servers issue tokens for it,
/// the scopes it knows, how it takes tokens. An MCP server publishes one; so may any API.
///
/// ```swift
/// let resource = try await Discovery(transport: transport).protectedResource("https://mcp.example.com/mcp")
/// let issuer = resource.authorizationServers[0]       // then: discovery.metadata(for: issuer)
/// ```
public struct ProtectedResourceMetadata: Sendable, Codable, Hashable {
    /// `resource`: the resource identifier. Equal, byte for byte, to the one the document was
    /// fetched for (RFC 9728 §3.3) — discovery refuses any other.
    public var resource: String
    /// `authorization_servers`: issuer identifiers of the servers that issue tokens for it, each
    /// `https` (or loopback `http`). Never empty in a document discovery returned.
    public var authorizationServers: [String]
    /// `scopes_supported`: the scopes a client may ask for to use it (each an RFC 6749 scope-token).
    public var scopesSupported: [String]?
    /// `bearer_methods_supported`: `header`, `body`, `query`.
    public var bearerMethodsSupported: [String]?
    /// `resource_name`: a name to show people (untrusted text: escape it before printing).
    public var resourceName: String?
    /// `resource_documentation`
    public var resourceDocumentation: URL?
    /// `dpop_bound_access_tokens_required` (RFC 9728 §2, RFC 9449).
    public var dpopBoundAccessTokensRequired: Bool?

    enum CodingKeys: String, CodingKey {
        case resource
        case authorizationServers = "authorization_servers"
        case scopesSupported = "scopes_supported"
        case bearerMethodsSupported = "bearer_methods_supported"
        case resourceName = "resource_name"
        case resourceDocumentation = "resource_documentation"
        case dpopBoundAccessTokensRequired = "dpop_bound_access_tokens_required"
    }

    /// Metadata made by hand (tests, resources without RFC 9728 documents).
    public init(
        resource: String, authorizationServers: [String], scopesSupported: [String]? = nil,
        bearerMethodsSupported: [String]? = nil, resourceName: String? = nil
    ) {
        self.resource = resource
        self.authorizationServers = authorizationServers
        self.scopesSupported = scopesSupported
        self.bearerMethodsSupported = bearerMethodsSupported
        self.resourceName = resourceName
    }

    /// The largest document read (64 KiB), the most authorization servers and scopes believed.
    public static let maximumSize = 64 << 10
    static let maximumServers = 32
    static let maximumScopes = 256
    static let maximumTextLength = 2048

    /// Parses and validates a document fetched for `expected` (one of the spellings of the resource
    /// identifier the client used: `resource` must equal one of them byte for byte). Every byte is
    /// untrusted: a JSON object of at most 64 KiB; `resource` a string equal to an expected one;
    /// `authorization_servers` 1–32 `http(s)` URLs without query or fragment, each `https` or loopback;
    /// `scopes_supported` at most 256 RFC 6749 scope-tokens. The error names what is wrong.
    package static func parse(_ body: [UInt8], expected: [String]) throws -> ProtectedResourceMetadata {
        let what = "the protected resource metadata of \(expected.first ?? "?")"
        guard body.count <= maximumSize else { throw OAuthError(OAuthError.discovery, "\(what) is larger than 64 KiB") }
        guard case .object(let object)? = try? JSONValue(parsing: body) else {
            throw OAuthError(OAuthError.discovery, "\(what) is not a JSON object")
        }
        guard let resource = object["resource"]?.stringValue else {
            throw OAuthError(OAuthError.discovery, "\(what) lacks resource (REQUIRED by RFC 9728 §2)")
        }
        guard expected.contains(where: { $0.utf8.elementsEqual(resource.utf8) }) else {
            throw OAuthError(
                OAuthError.issuerMismatch,
                "\(what) names another resource (\(Self.shown(resource))); refusing it (RFC 9728 §3.3)")
        }
        guard case .array(let servers)? = object["authorization_servers"], !servers.isEmpty else {
            throw OAuthError(
                OAuthError.discovery, "\(what) lacks authorization_servers: no authorization server to ask for a token")
        }
        guard servers.count <= maximumServers else {
            throw OAuthError(OAuthError.discovery, "\(what) lists more than \(maximumServers) authorization servers")
        }
        var issuers: [String] = []
        for server in servers {
            guard let issuer = server.stringValue, issuer.utf8.count <= maximumTextLength,
                let url = URL(string: issuer),
                let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", url.host != nil,
                url.query == nil, url.fragment == nil
            else {
                throw OAuthError(
                    OAuthError.discovery, "\(what) lists an authorization server that is not an http(s) issuer URL")
            }
            guard TransportSecurity.permits(url) else {
                throw OAuthError(
                    OAuthError.insecureEndpoint,
                    "\(what) lists the authorization server \(url.redactedForLogs), which is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)"
                )
            }
            issuers.append(issuer)
        }
        var scopes: [String]? = nil
        if let member = object["scopes_supported"], member != .null {
            guard case .array(let items) = member, items.count <= maximumScopes else {
                throw OAuthError(
                    OAuthError.discovery,
                    "\(what) has a scopes_supported that is not an array of at most \(maximumScopes) scopes")
            }
            scopes = try items.map { item in
                guard let scope = item.stringValue, ScopeToken.isValid(scope) else {
                    throw OAuthError(OAuthError.discovery, "\(what) lists a scope that is not an RFC 6749 scope-token")
                }
                return scope
            }
        }
        var metadata = ProtectedResourceMetadata(
            resource: resource, authorizationServers: issuers, scopesSupported: scopes)
        metadata.bearerMethodsSupported = object["bearer_methods_supported"]?.arrayValue?.prefix(8).compactMap {
            $0.stringValue
        }
        .filter { $0.utf8.count <= 16 }
        if let name = object["resource_name"]?.stringValue, name.utf8.count <= maximumTextLength {
            metadata.resourceName = name
        }
        if let text = object["resource_documentation"]?.stringValue, text.utf8.count <= maximumTextLength,
            let url = URL(string: text),
            url.scheme?.lowercased() == "https"
        {
            metadata.resourceDocumentation = url
        }
        metadata.dpopBoundAccessTokensRequired = object["dpop_bound_access_tokens_required"]?.boolValue
        return metadata
    }

    /// Untrusted text for an error message: at most 200 visible ASCII characters.
    static func shown(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.prefix(200).map { $0.value >= 0x20 && $0.value < 0x7F ? $0 : "?" }))
    }
}
