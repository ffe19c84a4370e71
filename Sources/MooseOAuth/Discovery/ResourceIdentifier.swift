#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseJWT

/// Resource identifiers (RFC 8707 §2, RFC 9728 §1.2): absolute `http(s)` URIs without fragment.
public enum ResourceIdentifier {
    /// The canonical form of a resource URL: scheme and host in lower case, no fragment, the rest as
    /// given (a bare origin keeps no trailing `/`). Refuses anything that is not an absolute `http(s)`
    /// URL with a host, and plain `http` to another machine.
    public static func canonical(_ text: String) throws -> String {
        guard text.utf8.count <= 2048, var components = URLComponents(string: text),
            let scheme = components.scheme?.lowercased(), scheme == "https" || scheme == "http",
            let host = components.host, !host.isEmpty
        else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the resource \(ProtectedResourceMetadata.shown(text)) is not an absolute http(s) URL")
        }
        guard components.fragment == nil else {
            throw OAuthError(OAuthError.invalidConfiguration, "a resource identifier has no fragment (RFC 8707 §2)")
        }
        components.scheme = scheme
        components.host = host.lowercased()
        if components.path == "/" { components.path = "" }
        guard let url = components.url, let canonical = components.string else {
            throw OAuthError(
                OAuthError.invalidConfiguration, "the resource \(ProtectedResourceMetadata.shown(text)) is not a URL")
        }
        guard TransportSecurity.permits(url) else {
            throw OAuthError(
                OAuthError.insecureEndpoint,
                "the resource \(url.redactedForLogs) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)"
            )
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
