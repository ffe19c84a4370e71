#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseJWT

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
    public init(scheme: String = "Bearer", error: String? = nil, scopes: [String]? = nil, resourceMetadata: URL? = nil)
    {
        self.scheme = scheme
        self.error = error
        self.scopes = scopes
        self.resourceMetadata = resourceMetadata
    }

    /// The first `Bearer` (else `DPoP`) challenge in `WWW-Authenticate` values; `nil` when there is
    /// none. Total: any text gives a value or `nil`, bounded as `AuthenticationChallenge` is.
    public static func parse(_ values: [String]) -> ResourceChallenge? {
        let challenges = AuthenticationChallenge.parse(values)
        guard
            let challenge = challenges.first(where: { $0.hasScheme("Bearer") })
                ?? challenges.first(where: { $0.hasScheme("DPoP") })
        else { return nil }
        var result = ResourceChallenge(scheme: challenge.scheme)
        // RFC 6750 §3: error = 1*( %x20-21 / %x23-5B / %x5D-7E ); a short code is all we need.
        if let error = challenge["error"], error.utf8.count <= 64, ScopeToken.isValid(error) {
            result.error = error
        }
        if let scope = challenge["scope"] {
            let scopes = scope.split(separator: " ", omittingEmptySubsequences: true).prefix(64).map(String.init)
                .filter(ScopeToken.isValid)
            if !scopes.isEmpty { result.scopes = scopes }
        }
        if let text = challenge["resource_metadata"], text.utf8.count <= 2048, let url = URL(string: text),
            let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", url.fragment == nil,
            TransportSecurity.permits(url)
        {
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
