#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
package import MooseHTTP
import MooseCrypto
import MooseJWT

/// RFC 9126: pushing authorization parameters to the server.
package enum PushedAuthorization {
    /// The longest `expires_in` believed for a `request_uri` (RFC 9126 suggests 5–600 s).
    static let maximumLifetime: Double = 3600

    /// POSTs `items` with the client's authentication to `endpoint` and returns the `request_uri`
    /// (RFC 9126 §2.2: 201 with `request_uri` and `expires_in`; errors as at the token endpoint).
    static func push(_ items: [(String, String)], to endpoint: URL, client: OAuthClient) async throws -> String {
        // client_id goes in once, by the client authentication (it is also in the items).
        let fields = items.filter { !$0.0.utf8.elementsEqual("client_id".utf8) }
        var request = try client.tokenEndpoint().authenticatedRequest(url: endpoint, parameters: fields)
        request.headerFields[.accept] = MIMEType.json.value
        let response = try await OAuthHTTP.send(
            request, over: client.transport, logger: client.logger,
            what: "the pushed authorization request endpoint")
        return try requestURI(from: response, publicClient: client.authentication.isNone)
    }

    /// The `request_uri` of a PAR response, or the error it carries. Every byte is untrusted.
    package static func requestURI(from response: APIResponse, publicClient: Bool = false) throws -> String {
        guard (200..<300).contains(response.status.code) else {
            throw TokenResponse.error(
                from: response, object: try? JSONValue(parsing: Array(response.body)),
                endpoint: "the pushed authorization request endpoint", publicClient: publicClient)
        }
        guard case .object(let object)? = try? JSONValue(parsing: Array(response.body)),
            let requestURI = object["request_uri"]?.stringValue, !requestURI.isEmpty, requestURI.utf8.count <= 2048,
            TokenCharacters.isVisibleASCII(requestURI)
        else {
            throw OAuthError(
                OAuthError.invalidResponse,
                "the pushed authorization response has no usable request_uri (RFC 9126 §2.2)")
        }
        return requestURI
    }
}
