#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
public import MooseJWT
import HTTPTypes

/// The metadata a client registers with (RFC 7591 §2). The defaults describe a native public client
/// using the authorization code grant with PKCE and refresh tokens, as the MCP authorization
/// specification asks: `application_type: native`, `token_endpoint_auth_method: none`.
///
/// ```swift
/// let request = ClientRegistrationRequest(clientName: "My MCP client", redirectURIs: ["http://127.0.0.1/callback"])
/// let client = try await ClientRegistration.register(request, with: metadata, transport: transport)
/// ```
public struct ClientRegistrationRequest: Sendable, Hashable {
    /// `redirect_uris`. A login fills these in when left empty.
    public var redirectURIs: [String]
    /// `client_name`, shown to the user on the consent page.
    public var clientName: String?
    /// `application_type` (OIDC Dynamic Client Registration): `native` (the default) or `web`.
    public var applicationType: String?
    /// `token_endpoint_auth_method`: `none` (a public client, the default), `client_secret_basic`, `client_secret_post`.
    public var tokenEndpointAuthMethod: String
    /// `grant_types`
    public var grantTypes: [String]
    /// `response_types`
    public var responseTypes: [String]
    /// `scope`: the scopes the client may ask for (space-joined); `nil`: the server's default. A
    /// server may cap later requests (a step-up included) to what was registered here.
    public var scopes: [String]?
    /// `client_uri`, `logo_uri`, `software_id`, `software_version` and any other member (a provider's
    /// own, like Glewlwyd's `client_confidential: false`).
    public var extra: [(String, JSONValue)]

    /// A registration request; see the type's documentation for the defaults.
    public init(
        clientName: String? = nil, redirectURIs: [String] = [], applicationType: String? = "native",
        tokenEndpointAuthMethod: String = "none", grantTypes: [String] = ["authorization_code", "refresh_token"],
        responseTypes: [String] = ["code"], scopes: [String]? = nil, extra: [(String, JSONValue)] = []
    ) {
        self.clientName = clientName
        self.redirectURIs = redirectURIs
        self.applicationType = applicationType
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.grantTypes = grantTypes
        self.responseTypes = responseTypes
        self.scopes = scopes
        self.extra = extra
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.redirectURIs == b.redirectURIs && a.clientName == b.clientName && a.applicationType == b.applicationType
            && a.tokenEndpointAuthMethod == b.tokenEndpointAuthMethod && a.grantTypes == b.grantTypes
            && a.responseTypes == b.responseTypes && a.scopes == b.scopes
            && a.extra.map(\.0) == b.extra.map(\.0) && a.extra.map(\.1) == b.extra.map(\.1)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(redirectURIs)
        hasher.combine(clientName)
        hasher.combine(tokenEndpointAuthMethod)
    }

    /// The JSON document POSTed to the registration endpoint.
    public var document: JSONObject {
        var object = JSONObject()
        object["redirect_uris"] = .array(redirectURIs.map { .string($0) })
        if let clientName { object["client_name"] = .string(clientName) }
        if let applicationType { object["application_type"] = .string(applicationType) }
        object["token_endpoint_auth_method"] = .string(tokenEndpointAuthMethod)
        object["grant_types"] = .array(grantTypes.map { .string($0) })
        object["response_types"] = .array(responseTypes.map { .string($0) })
        if let scopes { object["scope"] = .string(scopes.joined(separator: " ")) }
        for (name, value) in extra { object[name] = value }
        return object
    }
}
