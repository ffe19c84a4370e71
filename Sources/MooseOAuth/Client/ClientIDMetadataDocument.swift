#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseJWT
import HTTPTypes

/// An OAuth Client ID Metadata Document (the IETF draft MCP uses): the JSON a client publishes at an
/// `https` URL that is also its `client_id`, for authorization servers that advertise
/// `client_id_metadata_document_supported`.
///
/// ```swift
/// let document = ClientIDMetadataDocument(clientID: URL(string: "https://app.example.com/oauth/client.json")!,
///                                         clientName: "Example MCP client", redirectURIs: ["http://127.0.0.1/callback"])
/// // Serve document.json at that URL, then use the URL as the client id.
/// ```
public struct ClientIDMetadataDocument: Sendable, Hashable {
    /// The document's own URL (`https`, with a path): the `client_id`.
    public var clientID: URL
    /// `client_name`
    public var clientName: String?
    /// `redirect_uris`
    public var redirectURIs: [String]

    /// A document.
    public init(clientID: URL, clientName: String? = nil, redirectURIs: [String]) {
        self.clientID = clientID
        self.clientName = clientName
        self.redirectURIs = redirectURIs
    }

    /// The JSON to serve at `clientID`: a public client (`token_endpoint_auth_method: none`) with the
    /// authorization code and refresh token grants.
    public var json: String {
        var object = JSONObject()
        object["client_id"] = .string(clientID.absoluteString)
        if let clientName { object["client_name"] = .string(clientName) }
        object["redirect_uris"] = .array(redirectURIs.map { .string($0) })
        object["grant_types"] = .array([.string("authorization_code"), .string("refresh_token")])
        object["response_types"] = .array([.string("code")])
        object["token_endpoint_auth_method"] = .string("none")
        return JSONValue.object(object).serialized()
    }

    /// `true` for a URL that can be a client id: `https`, a host, a path other than `/`, no fragment.
    public static func isValidClientID(_ url: URL) -> Bool {
        url.scheme?.lowercased() == "https" && url.host?.isEmpty == false && url.path.count > 1 && url.fragment == nil
    }
}
