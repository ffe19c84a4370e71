#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseHTTP
public import Logging
import MooseJWT
import HTTPTypes

/// OAuth 2.0 Dynamic Client Registration (RFC 7591).
public enum ClientRegistration {
    /// Registers `request` at `metadata`'s `registration_endpoint` (with `initialAccessToken` as a
    /// bearer token when the server requires one) and returns the registered client. The endpoint
    /// must be `https` (or loopback); errors are `OAuthError.registration` (with the server's
    /// `error`, e.g. `invalid_redirect_uri`), `transient` for network failures, 5xx and 429.
    public static func register(
        _ request: ClientRegistrationRequest, with metadata: ProviderMetadata, transport: any HTTPTransport,
        initialAccessToken: String? = nil, logger: Logger? = nil
    ) async throws -> RegisteredClient {
        let endpoint = try metadata.require(metadata.registrationEndpoint, "registration endpoint")
        var headers: HTTPFields = [.contentType: MIMEType.json.value, .accept: MIMEType.json.value]
        if let initialAccessToken {
            guard TokenCharacters.isB64Token(initialAccessToken) else {
                throw OAuthError(OAuthError.unsafeValue, "the initial access token is not an RFC 6750 b64token")
            }
            headers[.authorization] = "Bearer \(initialAccessToken)"
        }
        let body = Data(JSONValue.object(request.document).serialized().utf8)
        let response = try await OAuthHTTP.send(
            APIRequest(method: .post, url: endpoint, headerFields: headers, body: body, timeout: 30),
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
            throw OAuthError(
                OAuthError.registration, "the registration response is larger than 64 KiB", status: response.status.code
            )
        }
        let object = try? JSONValue(parsing: Array(response.body))
        guard response.status.code == 200 || response.status.code == 201 else {
            let code = object?["error"]?.stringValue.flatMap {
                ScopeToken.isValid($0) && $0.utf8.count <= 64 ? $0 : nil
            }
            let description = object?["error_description"]?.stringValue.map { ProtectedResourceMetadata.shown($0) }
            let kind =
                response.status.code >= 500 || response.status.code == 429
                ? OAuthError.transient : OAuthError.registration
            throw OAuthError(
                kind,
                "the registration endpoint answered HTTP \(response.status.code)\(code == nil ? " without an OAuth error: \(Redaction.body(Array(response.body)))" : "")",
                oauthError: code, errorDescription: description, status: response.status.code)
        }
        guard case .object(let fields)? = object else {
            throw OAuthError(
                OAuthError.registration, "the registration response is not a JSON object", status: response.status.code)
        }
        guard let clientID = fields["client_id"]?.stringValue, clientID.utf8.count <= 2048,
            TokenCharacters.isVisibleASCII(clientID)
        else {
            throw OAuthError(
                OAuthError.registration, "the registration response has no usable client_id (RFC 7591 §3.2.1)")
        }
        func secret(_ name: String) throws -> String? {
            guard let value = fields[name], value != .null else { return nil }
            guard let text = value.stringValue, text.utf8.count <= maximumValueLength,
                TokenCharacters.isVisibleASCII(text)
            else {
                throw OAuthError(
                    OAuthError.registration, "the registration response's \(name) is not visible ASCII of at most 8 KiB"
                )
            }
            return text
        }
        func date(_ name: String) -> Date? {
            guard let seconds = fields[name]?.doubleValue, seconds.isFinite, seconds > 0, seconds <= 1e11 else {
                return nil
            }
            return Date(timeIntervalSince1970: seconds)
        }
        var client = RegisteredClient(issuer: issuer, clientID: clientID)
        client.clientSecret = try secret("client_secret")
        client.registrationAccessToken = try secret("registration_access_token")
        if let token = client.registrationAccessToken, !TokenCharacters.isB64Token(token) {
            throw OAuthError(
                OAuthError.registration,
                "the registration_access_token is not an RFC 6750 b64token; it could not be sent as a header")
        }
        if let text = fields["registration_client_uri"]?.stringValue, text.utf8.count <= 2048,
            let url = URL(string: text),
            TransportSecurity.permits(url)
        {
            client.registrationClientURI = url
        }
        client.clientSecretExpiresAt = date("client_secret_expires_at")
        client.clientIDIssuedAt = date("client_id_issued_at")
        if let method = fields["token_endpoint_auth_method"]?.stringValue, TokenCharacters.isHTTPToken(method),
            method.utf8.count <= 64
        {
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
