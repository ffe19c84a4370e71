#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
package import MooseHTTP
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
    public init(resource: String, authorizationServers: [String], scopesSupported: [String]? = nil,
                bearerMethodsSupported: [String]? = nil, resourceName: String? = nil) {
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
            throw OAuthError(OAuthError.issuerMismatch,
                             "\(what) names another resource (\(Self.shown(resource))); refusing it (RFC 9728 §3.3)")
        }
        guard case .array(let servers)? = object["authorization_servers"], !servers.isEmpty else {
            throw OAuthError(OAuthError.discovery, "\(what) lacks authorization_servers: no authorization server to ask for a token")
        }
        guard servers.count <= maximumServers else {
            throw OAuthError(OAuthError.discovery, "\(what) lists more than \(maximumServers) authorization servers")
        }
        var issuers: [String] = []
        for server in servers {
            guard let issuer = server.stringValue, issuer.utf8.count <= maximumTextLength, let url = URL(string: issuer),
                  let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", url.host != nil,
                  url.query == nil, url.fragment == nil else {
                throw OAuthError(OAuthError.discovery, "\(what) lists an authorization server that is not an http(s) issuer URL")
            }
            guard TransportSecurity.permits(url) else {
                throw OAuthError(OAuthError.insecureEndpoint,
                                 "\(what) lists the authorization server \(url.redactedForLogs), which is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)")
            }
            issuers.append(issuer)
        }
        var scopes: [String]? = nil
        if let member = object["scopes_supported"], member != .null {
            guard case .array(let items) = member, items.count <= maximumScopes else {
                throw OAuthError(OAuthError.discovery, "\(what) has a scopes_supported that is not an array of at most \(maximumScopes) scopes")
            }
            scopes = try items.map { item in
                guard let scope = item.stringValue, ScopeToken.isValid(scope) else {
                    throw OAuthError(OAuthError.discovery, "\(what) lists a scope that is not an RFC 6749 scope-token")
                }
                return scope
            }
        }
        var metadata = ProtectedResourceMetadata(resource: resource, authorizationServers: issuers, scopesSupported: scopes)
        metadata.bearerMethodsSupported = object["bearer_methods_supported"]?.arrayValue?.prefix(8).compactMap { $0.stringValue }
            .filter { $0.utf8.count <= 16 }
        if let name = object["resource_name"]?.stringValue, name.utf8.count <= maximumTextLength { metadata.resourceName = name }
        if let text = object["resource_documentation"]?.stringValue, text.utf8.count <= maximumTextLength, let url = URL(string: text),
           url.scheme?.lowercased() == "https" {
            metadata.resourceDocumentation = url
        }
        metadata.dpopBoundAccessTokensRequired = object["dpop_bound_access_tokens_required"]?.boolValue
        return metadata
    }

    /// Untrusted text for an error message: at most 200 visible ASCII characters.
    static func shown(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(200).map { $0.value >= 0x20 && $0.value < 0x7F ? $0 : "?" }))
    }
}

/// RFC 6749 §3.3 `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )`, at most 256 bytes here.
package enum ScopeToken {
    package static func isValid(_ scope: String) -> Bool {
        !scope.isEmpty && scope.utf8.count <= 256
            && scope.utf8.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }

    /// `a` followed by every scope of `b` that `a` lacks (byte-for-byte comparison), order kept.
    package static func union(_ a: [String], _ b: [String]) -> [String] {
        var result = a
        for scope in b where !result.contains(where: { $0.utf8.elementsEqual(scope.utf8) }) { result.append(scope) }
        return result
    }

    /// `true` when every scope of `needed` is in `granted` (byte for byte).
    package static func covers(_ granted: [String], _ needed: [String]) -> Bool {
        needed.allSatisfy { scope in granted.contains { $0.utf8.elementsEqual(scope.utf8) } }
    }
}

/// What a resource server's `WWW-Authenticate` challenge (RFC 6750 §3, RFC 9728 §5.1) tells a client:
/// the error, the scopes the request needs, and where the resource's metadata is.
///
/// ```swift
/// let challenge = ResourceChallenge.parse(response.headerFields[values: .wwwAuthenticate])
/// if challenge?.error == "insufficient_scope" { … authorize again with challenge?.scopes … }
/// ```
public struct ResourceChallenge: Sendable, Hashable {
    /// The scheme, as sent (`Bearer` or `DPoP`).
    public var scheme: String
    /// `error` (`invalid_token`, `insufficient_scope`…), when it is an RFC 6750 error code.
    public var error: String?
    /// `scope`: the scopes the request needs (each an RFC 6749 scope-token; at most 64).
    public var scopes: [String]?
    /// `resource_metadata` (RFC 9728 §5.1): where the resource's metadata is — only an `http(s)` URL
    /// without fragment that is `https` or loopback; anything else is dropped.
    public var resourceMetadata: URL?

    /// A challenge (tests, servers).
    public init(scheme: String = "Bearer", error: String? = nil, scopes: [String]? = nil, resourceMetadata: URL? = nil) {
        self.scheme = scheme
        self.error = error
        self.scopes = scopes
        self.resourceMetadata = resourceMetadata
    }

    /// The first `Bearer` (else `DPoP`) challenge in `WWW-Authenticate` values; `nil` when there is
    /// none. Total: any text gives a value or `nil`, bounded as `AuthenticationChallenge` is.
    public static func parse(_ values: [String]) -> ResourceChallenge? {
        let challenges = AuthenticationChallenge.parse(values)
        guard let challenge = challenges.first(where: { $0.hasScheme("Bearer") }) ?? challenges.first(where: { $0.hasScheme("DPoP") })
        else { return nil }
        var result = ResourceChallenge(scheme: challenge.scheme)
        // RFC 6750 §3: error = 1*( %x20-21 / %x23-5B / %x5D-7E ); a short code is all we need.
        if let error = challenge["error"], error.utf8.count <= 64, ScopeToken.isValid(error) {
            result.error = error
        }
        if let scope = challenge["scope"] {
            let scopes = scope.split(separator: " ", omittingEmptySubsequences: true).prefix(64).map(String.init).filter(ScopeToken.isValid)
            if !scopes.isEmpty { result.scopes = scopes }
        }
        if let text = challenge["resource_metadata"], text.utf8.count <= 2048, let url = URL(string: text),
           let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", url.fragment == nil, TransportSecurity.permits(url) {
            result.resourceMetadata = url
        }
        return result
    }

    /// The challenge of `headers` given as a dictionary (an `HTTPURLResponse`'s `allHeaderFields`,
    /// any case of the name); `nil` without one.
    public static func parse(headers: [String: String]) -> ResourceChallenge? {
        let values = headers.filter { $0.key.lowercased().utf8.elementsEqual("www-authenticate".utf8) }.map(\.value)
        return values.isEmpty ? nil : parse(values)
    }
}

/// Resource identifiers (RFC 8707 §2, RFC 9728 §1.2): absolute `http(s)` URIs without fragment.
public enum ResourceIdentifier {
    /// The canonical form of a resource URL: scheme and host in lower case, no fragment, the rest as
    /// given (a bare origin keeps no trailing `/`). Refuses anything that is not an absolute `http(s)`
    /// URL with a host, and plain `http` to another machine.
    public static func canonical(_ text: String) throws -> String {
        guard text.utf8.count <= 2048, var components = URLComponents(string: text),
              let scheme = components.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = components.host, !host.isEmpty else {
            throw OAuthError(OAuthError.invalidConfiguration, "the resource \(ProtectedResourceMetadata.shown(text)) is not an absolute http(s) URL")
        }
        guard components.fragment == nil else {
            throw OAuthError(OAuthError.invalidConfiguration, "a resource identifier has no fragment (RFC 8707 §2)")
        }
        components.scheme = scheme
        components.host = host.lowercased()
        if components.path == "/" { components.path = "" }
        guard let url = components.url, let canonical = components.string else {
            throw OAuthError(OAuthError.invalidConfiguration, "the resource \(ProtectedResourceMetadata.shown(text)) is not a URL")
        }
        guard TransportSecurity.permits(url) else {
            throw OAuthError(OAuthError.insecureEndpoint,
                             "the resource \(url.redactedForLogs) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)")
        }
        return canonical
    }

    /// The RFC 9728 §3.1 well-known URLs of `resource`'s metadata, in the order the MCP authorization
    /// specification tries them: the path-aware one (`/.well-known/oauth-protected-resource/<path>`),
    /// then the root one (only when the resource has a path).
    public static func metadataURLs(for resource: String) -> [URL] {
        guard let components = URLComponents(string: resource) else { return [] }
        var path = components.path
        if path.hasSuffix("/") { path.removeLast() }
        var urls: [URL] = []
        var inserted = components
        inserted.path = "/.well-known/oauth-protected-resource" + path
        inserted.fragment = nil
        if let url = inserted.url { urls.append(url) }
        if !path.isEmpty {
            var root = components
            root.path = "/.well-known/oauth-protected-resource"
            root.query = nil
            root.fragment = nil
            if let url = root.url { urls.append(url) }
        }
        return urls
    }
}

extension Discovery {
    /// The RFC 9728 metadata of `resource`, from `metadataURL` (a `resource_metadata` from a
    /// challenge) when given, else (or when it answers 404) from the well-known URLs in the order
    /// the MCP specification gives. The document's `resource` must be `resource` (as given or in
    /// canonical form) byte for byte; every URL must be `https` or loopback.
    public nonisolated func protectedResource(_ resource: String, metadataURL: URL? = nil) async throws -> ProtectedResourceMetadata {
        try await Self.fetchProtectedResource(resource, metadataURL: metadataURL, transport: transport)
    }

    /// `protectedResource(_:metadataURL:)` with the URL the document came from.
    package static func fetchProtectedResource(_ resource: String, metadataURL: URL?,
                                               transport: any HTTPTransport) async throws -> ProtectedResourceMetadata {
        try await locateProtectedResource(resource, metadataURL: metadataURL, transport: transport).metadata
    }

    /// Fetches the first document that answers (404 means "try the next URL").
    package static func locateProtectedResource(_ resource: String, metadataURL: URL?,
                                                transport: any HTTPTransport) async throws -> (metadata: ProtectedResourceMetadata, url: URL) {
        let canonical = try ResourceIdentifier.canonical(resource)
        var expected = [canonical]
        if !canonical.utf8.elementsEqual(resource.utf8) { expected.append(resource) }
        var candidates = ResourceIdentifier.metadataURLs(for: canonical)
        if let metadataURL {
            guard TransportSecurity.permits(metadataURL) else {
                throw OAuthError(OAuthError.insecureEndpoint,
                                 "resource_metadata \(metadataURL.redactedForLogs) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)")
            }
            candidates.removeAll { $0.absoluteString.utf8.elementsEqual(metadataURL.absoluteString.utf8) }
            candidates.insert(metadataURL, at: 0)
        }
        for url in candidates {
            let response = try await OAuthHTTP.send(APIRequest(url: url, headerFields: [.accept: "application/json"], timeout: 15),
                                                    over: transport, logger: nil, what: url.redactedForLogs)
            if response.status.code == 404 { continue }
            guard response.status.code == 200 else {
                throw OAuthError(response.status.code >= 500 || response.status.code == 429 ? OAuthError.transient : OAuthError.discovery,
                                 "\(url.redactedForLogs) answered HTTP \(response.status.code)", status: response.status.code)
            }
            return (try ProtectedResourceMetadata.parse(Array(response.body), expected: expected), url)
        }
        throw OAuthError(OAuthError.discovery,
                         "\(ProtectedResourceMetadata.shown(canonical)) publishes no protected resource metadata (RFC 9728) at \(candidates.map(\.redactedForLogs).joined(separator: " or "))")
    }
}
