#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import Logging
public import MooseJWT
import MooseCrypto
import HTTPTypes

/// How the client proves its identity at the token endpoint (RFC 6749 §2.3, RFC 7523).
public enum ClientAuthentication: Sendable {
    /// A public client: `client_id` in the body, no secret (native apps, CLIs — with PKCE).
    case none
    /// `client_secret_basic`: HTTP Basic with the form-encoded id and secret (RFC 6749 §2.3.1).
    case clientSecretBasic(String)
    /// `client_secret_post`: id and secret in the body.
    case clientSecretPost(String)
    /// `private_key_jwt`: a signed assertion (RFC 7523 §2.2) made with this key and algorithm.
    case privateKeyJWT(JWTKey, JWTAlgorithm)
}

/// Talks to a token endpoint: sends a grant with client authentication and turns the answer into a
/// `TokenSet` or a typed `OAuthError` (RFC 6749 §5.1, §5.2).
public struct TokenEndpoint: Sendable {
    /// The endpoint.
    public let url: URL
    /// The client.
    public let clientID: String
    /// How the client authenticates.
    public let authentication: ClientAuthentication
    /// The transport.
    public let transport: any HTTPTransport
    /// The clock (for `expires_in` and assertions).
    public var clock: @Sendable () -> Date = { Date() }
    /// Where request lines go (debug, redacted); `nil`: nowhere.
    public var logger: Logger? = nil

    /// A token endpoint client.
    public init(url: URL, clientID: String, authentication: ClientAuthentication, transport: any HTTPTransport) {
        self.url = url
        self.clientID = clientID
        self.authentication = authentication
        self.transport = transport
    }

    /// Sends `parameters` (a grant) and parses the answer. `requestedScopes` stand in when the
    /// response has no `scope` (RFC 6749 §5.1: then the granted scope is the requested one).
    ///
    /// With `dpop`, every request carries a DPoP proof (RFC 9449 §5) signed by that key — with the
    /// server's nonce after one `use_dpop_nonce` retry (§8) — and the tokens come back holding the key.
    public func request(_ parameters: [(String, String)], requestedScopes: [String], dpop: DPoPKey? = nil) async throws -> TokenSet {
        var request = try authenticatedRequest(url: url, parameters: parameters)
        request.headerFields[.accept] = MIMEType.json.value
        let sentAt = clock()
        let transport = self.transport, logger = self.logger
        let response: APIResponse
        if let dpop {
            response = try await dpop.send(request) { request in
                try await OAuthHTTP.send(request, over: transport, logger: logger, what: "the token endpoint")
            }
        } else {
            response = try await OAuthHTTP.send(request, over: transport, logger: logger, what: "the token endpoint")
        }
        var tokens = try TokenResponse.parse(response, requestedAt: sentAt, requestedScopes: requestedScopes)
        tokens.serverClockOffset = ClockSkew(response: response, receivedAt: clock())?.offset
        tokens.dpopKey = dpop
        return tokens
    }

    /// A form POST to `url` with the client's authentication applied (token, revocation, device endpoints).
    public func authenticatedRequest(url: URL, parameters: [(String, String)]) throws -> APIRequest {
        var fields = parameters
        var headers = HTTPFields()
        headers[.contentType] = MIMEType.formURLEncoded.value
        switch authentication {
        case .none:
            fields.append(("client_id", clientID))
        case .clientSecretPost(let secret):
            fields.append(("client_id", clientID))
            fields.append(("client_secret", secret))
        case .clientSecretBasic(let secret):
            // RFC 6749 §2.3.1: form-encode id and secret before joining them with ":" and base64.
            let credentials = "\(Self.formEncode(clientID)):\(Self.formEncode(secret))"
            headers[.authorization] = AuthScheme.basic.credentials(Data(credentials.utf8).base64EncodedString())
        case .privateKeyJWT(let key, let algorithm):
            let now = Int64(clock().timeIntervalSince1970)
            let jti = (try? SecureRandom.bytes(count: 16)).map { Base64URL.encode($0) } ?? UUID().uuidString
            let claims: JSONObject = ["iss": .string(clientID), "sub": .string(clientID), "aud": .string(self.url.absoluteString),
                                      "jti": .string(jti), "iat": .number(JSONNumber(now)), "exp": .number(JSONNumber(now + 60))]
            let assertion = try JWTSigner(key: key, algorithm: algorithm).sign(claims)
            fields.append(("client_id", clientID))
            fields.append(("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"))
            fields.append(("client_assertion", assertion))
        }
        return APIRequest(method: .post, url: url, headerFields: headers, body: Data(RequestBuilder.encodeForm(fields).utf8), timeout: 30)
    }

    static func formEncode(_ text: String) -> String {
        String(RequestBuilder.encodeForm([(text, "")]).dropLast())
    }
}

/// RFC 6749 §5.1/§5.2 parsing, liberal where it is safe.
package enum TokenResponse {
    /// Parses a token endpoint response (RFC 6749 §5.1/§5.2). Every byte of `response` is untrusted.
    package static func parse(_ response: APIResponse, requestedAt: Date, requestedScopes: [String]) throws -> TokenSet {
        let object = try? JSONValue(parsing: Array(response.body))
        guard (200..<300).contains(response.status.code) else {
            throw error(from: response, object: object)
        }
        guard case .object(let fields)? = object else {
            throw OAuthError(OAuthError.invalidResponse, "the token endpoint answered HTTP \(response.status.code) with no JSON object: \(excerpt(response))",
                             status: response.status.code)
        }
        guard let accessToken = fields["access_token"]?.stringValue, !accessToken.isEmpty else {
            throw OAuthError(OAuthError.invalidResponse, "the token response has no access_token", status: response.status.code)
        }
        // RFC 6749 Appendix A.12: access_token = 1*VSCHAR. Control characters (and anything beyond
        // ASCII) are refused here; whether it may become a header or shell text is decided there.
        guard TokenCharacters.isVisibleASCII(accessToken), accessToken.utf8.count <= TokenCharacters.maximumTokenLength else {
            throw OAuthError(OAuthError.unsafeValue,
                             "the token response's access_token has characters outside RFC 6749's VSCHAR set (or is over 64 KiB); refusing it")
        }
        let refreshToken = fields["refresh_token"]?.stringValue
        if let refreshToken, !TokenCharacters.isVisibleASCII(refreshToken) || refreshToken.utf8.count > TokenCharacters.maximumTokenLength {
            throw OAuthError(OAuthError.unsafeValue,
                             "the token response's refresh_token has characters outside RFC 6749's VSCHAR set (or is over 64 KiB); refusing it")
        }
        // token_type is case-insensitive (RFC 6749 §5.1); a missing one is read as Bearer (liberal).
        // It becomes an Authorization scheme: it must be an RFC 9110 token.
        let rawType = fields["token_type"]?.stringValue ?? "Bearer"
        guard TokenCharacters.isHTTPToken(rawType), rawType.utf8.count <= 64 else {
            throw OAuthError(OAuthError.unsafeValue, "the token response's token_type is not an HTTP token (RFC 9110 §5.6.2); refusing it")
        }
        let tokenType = rawType.lowercased() == "bearer" ? "Bearer" : rawType.lowercased() == "dpop" ? "DPoP" : rawType
        var expiresAt: Date? = nil
        // expires_in: a number, or (liberally) a numeric string; missing means "not said". Bounded
        // to 0…1 year before it becomes a date (1e300 would trap later arithmetic and formatting).
        if let seconds = fields["expires_in"]?.doubleValue ?? fields["expires_in"]?.stringValue.flatMap(Double.init) {
            expiresAt = requestedAt.addingTimeInterval(TokenSet.clampedLifetime(seconds))
        }
        let scopes = fields["scope"]?.stringValue.map { $0.split(separator: " ").map(String.init) } ?? requestedScopes
        return TokenSet(accessToken: accessToken, tokenType: tokenType, refreshToken: refreshToken,
                        idToken: fields["id_token"]?.stringValue, expiresAt: expiresAt, scopes: scopes, requestedAt: requestedAt)
    }

    static func error(from response: APIResponse, object: JSONValue?) -> OAuthError {
        let code = object?["error"]?.stringValue
        let description = object?["error_description"]?.stringValue
        let uri = object?["error_uri"]?.stringValue
        if response.status.code >= 500 || response.status.code == 429 {
            return OAuthError(OAuthError.transient, "the token endpoint answered HTTP \(response.status.code)", oauthError: code,
                              errorDescription: description, errorURI: uri, status: response.status.code)
        }
        guard let code else {
            return OAuthError(OAuthError.invalidResponse,
                              "the token endpoint answered HTTP \(response.status.code) without an OAuth error: \(excerpt(response))",
                              status: response.status.code)
        }
        let kind: OAuthError.Code = switch code {
        case "invalid_grant": OAuthError.invalidGrant
        case "invalid_client", "unauthorized_client": OAuthError.invalidClient
        case "access_denied": OAuthError.accessDenied
        case "expired_token": OAuthError.expiredToken
        default: OAuthError.server
        }
        return OAuthError(kind, "the token endpoint refused the request", oauthError: code, errorDescription: description,
                          errorURI: uri, status: response.status.code)
    }

    /// What an error message may quote of a response body: never a value that could be a secret.
    static func excerpt(_ response: APIResponse) -> String {
        Redaction.body(Array(response.body))
    }
}
