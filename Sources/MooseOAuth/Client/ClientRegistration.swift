#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import Logging
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
    public init(clientName: String? = nil, redirectURIs: [String] = [], applicationType: String? = "native",
                tokenEndpointAuthMethod: String = "none", grantTypes: [String] = ["authorization_code", "refresh_token"],
                responseTypes: [String] = ["code"], scopes: [String]? = nil, extra: [(String, JSONValue)] = []) {
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

/// A client registered at an authorization server: what RFC 7591 §3.2.1 answered, kept (sealed,
/// with the session) so that later logins and refreshes use the same client — including the
/// `client_secret` and the RFC 7592 `registration_access_token`, which are secrets:
/// `description` shows fingerprints only.
public struct RegisteredClient: Sendable, Codable, Hashable, CustomStringConvertible {
    /// The issuer of the server this client is registered at (a registration is good there only).
    public var issuer: String
    /// `client_id`. For a Client ID Metadata Document client, the document's `https` URL.
    public var clientID: String
    /// `client_secret`, when the server issued one.
    public var clientSecret: String?
    /// `client_secret_expires_at` (`nil`: never, or not said).
    public var clientSecretExpiresAt: Date?
    /// `client_id_issued_at`
    public var clientIDIssuedAt: Date?
    /// `registration_access_token` (RFC 7592): reads, updates and deletes this registration.
    public var registrationAccessToken: String?
    /// `registration_client_uri` (RFC 7592): where this registration is managed.
    public var registrationClientURI: URL?
    /// `token_endpoint_auth_method` as registered.
    public var tokenEndpointAuthMethod: String?
    /// `redirect_uris` as registered.
    public var redirectURIs: [String]
    /// `scope` as registered, when the server said.
    public var scopes: [String]?

    /// A registration (the registration call makes these; so may an app that registered elsewhere).
    public init(issuer: String, clientID: String, clientSecret: String? = nil, redirectURIs: [String] = [],
                tokenEndpointAuthMethod: String? = nil) {
        self.issuer = issuer
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.redirectURIs = redirectURIs
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
    }

    /// How this client authenticates at the token endpoint: `client_secret_post` or
    /// `client_secret_basic` with its secret when it has one (basic unless registered for post),
    /// otherwise none (public).
    public var authentication: ClientAuthentication {
        guard let clientSecret, !clientSecret.isEmpty else { return .none }
        if let method = tokenEndpointAuthMethod, method.utf8.elementsEqual("client_secret_post".utf8) { return .clientSecretPost(clientSecret) }
        return .clientSecretBasic(clientSecret)
    }

    /// `true` when the secret has expired at `now` (RFC 7591 §3.2.1: 0 means never).
    public func secretHasExpired(at now: Date = Date()) -> Bool {
        guard clientSecret != nil, let clientSecretExpiresAt else { return false }
        return clientSecretExpiresAt <= now
    }

    /// `true` when a login may use `redirectURI` with this registration: it is registered exactly, or
    /// (RFC 8252 §7.3) it is a loopback URI and the same URI without a port is registered.
    public func allows(redirectURI: String) -> Bool {
        if redirectURIs.contains(where: { $0.utf8.elementsEqual(redirectURI.utf8) }) { return true }
        guard var components = URLComponents(string: redirectURI), let host = components.host,
              TransportSecurity.isLoopback(host: host), components.port != nil else { return false }
        components.port = nil
        guard let portless = components.string else { return false }
        return redirectURIs.contains { $0.utf8.elementsEqual(portless.utf8) }
    }

    /// The client id and fingerprints of the secrets.
    public var description: String {
        var parts = ["client_id \(clientID)", "issuer \(issuer)"]
        if let clientSecret { parts.append("client_secret #\(TokenSet.fingerprint(clientSecret))") }
        if let registrationAccessToken { parts.append("registration_access_token #\(TokenSet.fingerprint(registrationAccessToken))") }
        return "RegisteredClient(" + parts.joined(separator: ", ") + ")"
    }
}

/// OAuth 2.0 Dynamic Client Registration (RFC 7591).
public enum ClientRegistration {
    /// Registers `request` at `metadata`'s `registration_endpoint` (with `initialAccessToken` as a
    /// bearer token when the server requires one) and returns the registered client. The endpoint
    /// must be `https` (or loopback); errors are `OAuthError.registration` (with the server's
    /// `error`, e.g. `invalid_redirect_uri`), `transient` for network failures, 5xx and 429.
    public static func register(_ request: ClientRegistrationRequest, with metadata: ProviderMetadata, transport: any HTTPTransport,
                                initialAccessToken: String? = nil, logger: Logger? = nil) async throws -> RegisteredClient {
        let endpoint = try metadata.require(metadata.registrationEndpoint, "registration endpoint")
        var headers: HTTPFields = [.contentType: MIMEType.json.value, .accept: MIMEType.json.value]
        if let initialAccessToken {
            guard TokenCharacters.isB64Token(initialAccessToken) else {
                throw OAuthError(OAuthError.unsafeValue, "the initial access token is not an RFC 6750 b64token")
            }
            headers[.authorization] = "Bearer \(initialAccessToken)"
        }
        let body = Data(JSONValue.object(request.document).serialized().utf8)
        let response = try await OAuthHTTP.send(APIRequest(method: .post, url: endpoint, headerFields: headers, body: body, timeout: 30),
                                                over: transport, logger: logger, what: "the registration endpoint")
        return try parseResponse(response, issuer: metadata.issuer)
    }

    /// The longest secret, token or URI believed from a registration response.
    static let maximumValueLength = 8192

    /// Parses a registration response (RFC 7591 §3.2). Every byte is untrusted: at most 64 KiB of
    /// JSON object; 200 or 201; `client_id` 1–2048 bytes of visible ASCII; `client_secret` and
    /// `registration_access_token` visible ASCII of at most 8 KiB (the access token an RFC 6750
    /// `b64token`, since it is sent as a header); `registration_client_uri` only when `https` or
    /// loopback; dates only within ±1e11 s of 1970.
    package static func parseResponse(_ response: APIResponse, issuer: String) throws -> RegisteredClient {
        guard response.body.count <= 64 << 10 else {
            throw OAuthError(OAuthError.registration, "the registration response is larger than 64 KiB", status: response.status.code)
        }
        let object = try? JSONValue(parsing: Array(response.body))
        guard response.status.code == 200 || response.status.code == 201 else {
            let code = object?["error"]?.stringValue.flatMap { ScopeToken.isValid($0) && $0.utf8.count <= 64 ? $0 : nil }
            let description = object?["error_description"]?.stringValue.map { ProtectedResourceMetadata.shown($0) }
            let kind = response.status.code >= 500 || response.status.code == 429 ? OAuthError.transient : OAuthError.registration
            throw OAuthError(kind, "the registration endpoint answered HTTP \(response.status.code)\(code == nil ? " without an OAuth error: \(Redaction.body(Array(response.body)))" : "")",
                             oauthError: code, errorDescription: description, status: response.status.code)
        }
        guard case .object(let fields)? = object else {
            throw OAuthError(OAuthError.registration, "the registration response is not a JSON object", status: response.status.code)
        }
        guard let clientID = fields["client_id"]?.stringValue, clientID.utf8.count <= 2048, TokenCharacters.isVisibleASCII(clientID) else {
            throw OAuthError(OAuthError.registration, "the registration response has no usable client_id (RFC 7591 §3.2.1)")
        }
        func secret(_ name: String) throws -> String? {
            guard let value = fields[name], value != .null else { return nil }
            guard let text = value.stringValue, text.utf8.count <= maximumValueLength, TokenCharacters.isVisibleASCII(text) else {
                throw OAuthError(OAuthError.registration, "the registration response's \(name) is not visible ASCII of at most 8 KiB")
            }
            return text
        }
        func date(_ name: String) -> Date? {
            guard let seconds = fields[name]?.doubleValue, seconds.isFinite, seconds > 0, seconds <= 1e11 else { return nil }
            return Date(timeIntervalSince1970: seconds)
        }
        var client = RegisteredClient(issuer: issuer, clientID: clientID)
        client.clientSecret = try secret("client_secret")
        client.registrationAccessToken = try secret("registration_access_token")
        if let token = client.registrationAccessToken, !TokenCharacters.isB64Token(token) {
            throw OAuthError(OAuthError.registration, "the registration_access_token is not an RFC 6750 b64token; it could not be sent as a header")
        }
        if let text = fields["registration_client_uri"]?.stringValue, text.utf8.count <= 2048, let url = URL(string: text),
           TransportSecurity.permits(url) {
            client.registrationClientURI = url
        }
        client.clientSecretExpiresAt = date("client_secret_expires_at")
        client.clientIDIssuedAt = date("client_id_issued_at")
        if let method = fields["token_endpoint_auth_method"]?.stringValue, TokenCharacters.isHTTPToken(method), method.utf8.count <= 64 {
            client.tokenEndpointAuthMethod = method
        }
        client.redirectURIs = (fields["redirect_uris"]?.arrayValue ?? []).prefix(64).compactMap { $0.stringValue }
            .filter { $0.utf8.count <= 2048 }
        if let scope = fields["scope"]?.stringValue {
            client.scopes = scope.split(separator: " ").prefix(256).map(String.init).filter(ScopeToken.isValid)
        }
        return client
    }
}

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
