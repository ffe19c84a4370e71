#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
package import MooseHTTP
import MooseJWT

extension Discovery {
    /// The RFC 9728 metadata of `resource`, from `metadataURL` (a `resource_metadata` from a
    /// challenge) when given, else (or when it answers 404) from the well-known URLs in the order
    /// the MCP specification gives. The document's `resource` must be `resource` (as given or in
    /// canonical form) byte for byte; every URL must be `https` or loopback.
    public nonisolated func protectedResource(_ resource: String, metadataURL: URL? = nil) async throws
        -> ProtectedResourceMetadata
    {
        try await Self.fetchProtectedResource(resource, metadataURL: metadataURL, transport: transport)
    }

    /// `protectedResource(_:metadataURL:)` with the URL the document came from.
    package static func fetchProtectedResource(
        _ resource: String, metadataURL: URL?,
        transport: any HTTPTransport
    ) async throws -> ProtectedResourceMetadata {
        try await locateProtectedResource(resource, metadataURL: metadataURL, transport: transport).metadata
    }

    /// Fetches the first document that answers (404 means "try the next URL").
    package static func locateProtectedResource(
        _ resource: String, metadataURL: URL?,
        transport: any HTTPTransport
    ) async throws -> (metadata: ProtectedResourceMetadata, url: URL) {
        let canonical = try ResourceIdentifier.canonical(resource)
        var expected = [canonical]
        if !canonical.utf8.elementsEqual(resource.utf8) { expected.append(resource) }
        var candidates = ResourceIdentifier.metadataURLs(for: canonical)
        if let metadataURL {
            guard TransportSecurity.permits(metadataURL) else {
                throw OAuthError(
                    OAuthError.insecureEndpoint,
                    "resource_metadata \(metadataURL.redactedForLogs) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)"
                )
            }
            candidates.removeAll { $0.absoluteString.utf8.elementsEqual(metadataURL.absoluteString.utf8) }
            candidates.insert(metadataURL, at: 0)
        }
        for url in candidates {
            let response = try await OAuthHTTP.send(
                APIRequest(url: url, headerFields: [.accept: "application/json"], timeout: 15),
                over: transport, logger: nil, what: url.redactedForLogs)
            if response.status.code == 404 { continue }
            guard response.status.code == 200 else {
                throw OAuthError(
                    response.status.code >= 500 || response.status.code == 429
                        ? OAuthError.transient : OAuthError.discovery,
                    "\(url.redactedForLogs) answered HTTP \(response.status.code)", status: response.status.code)
            }
            return (try ProtectedResourceMetadata.parse(Array(response.body), expected: expected), url)
        }
        throw OAuthError(
            OAuthError.discovery,
            "\(ProtectedResourceMetadata.shown(canonical)) publishes no protected resource metadata (RFC 9728) at \(candidates.map(\.redactedForLogs).joined(separator: " or "))"
        )
    }
}
