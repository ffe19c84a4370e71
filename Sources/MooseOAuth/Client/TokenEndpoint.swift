#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import Logging
import MooseJWT
import MooseCrypto
import HTTPTypes

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
    ///
    /// - Parameters:
    ///   - url: the token endpoint (also the `aud` of a `private_key_jwt` assertion); not checked here
    ///     for `https` (`OAuthClient` checks its endpoints).
    ///   - clientID: the client id sent with every request.
    ///   - authentication: how the client authenticates (`.none`: `client_id` alone).
    ///   - transport: what sends the requests.
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
    ///
    /// - Parameters:
    ///   - parameters: the grant's form fields (`grant_type` and the rest), in order; the client's
    ///     authentication is added.
    ///   - requestedScopes: the scopes asked for, recorded as granted when the response names none.
    ///   - dpop: the key to prove possession of; `nil` (the default): bearer tokens.
    /// - Returns: the tokens, with `expiresAt` from `expires_in` counted from the request's sending and
    ///   the server's clock offset (from its `Date` header).
    /// - Throws: `OAuthError` for the answer: `invalidGrant`, `invalidClient` (also a bare 401 or 403),
    ///   `accessDenied`, `expiredToken`, `server` (any other OAuth error), `transient` (5xx, 429, or
    ///   unreachable), `tls`, `invalidResponse` (no JSON object, no `access_token`), `unsafeValue` (a
    ///   token or token type that cannot be used safely); `JWTError` when a `private_key_jwt` key
    ///   cannot sign its assertion.
    public func request(_ parameters: [(String, String)], requestedScopes: [String], dpop: DPoPKey? = nil) async throws
        -> TokenSet
    {
        var request = try authenticatedRequest(url: url, parameters: parameters)
        request.headerFields[.accept] = MIMEType.json.value
        let sentAt = clock()
        let transport = self.transport, logger = self.logger
        let response: APIResponse
        if let dpop {
            response = try await dpop.send(request, clock: clock) { request in
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
    ///
    /// - Parameters:
    ///   - url: where the request goes (the assertion's `aud` stays the token endpoint's `url`).
    ///   - parameters: the form fields; `client_id`, and a secret or assertion, are appended.
    /// - Returns: the request (30 s timeout), not sent.
    /// - Throws: `JWTError` when a `private_key_jwt` key cannot sign the assertion (a public key, a
    ///   key of another family than the algorithm's, a weak key).
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
            let credentials = "\(RequestBuilder.formEncode(clientID)):\(RequestBuilder.formEncode(secret))"
            headers[.authorization] = AuthScheme.basic.credentials(Data(credentials.utf8).base64EncodedString())
        case .privateKeyJWT(let key, let algorithm):
            let now = Int64(clock().timeIntervalSince1970)
            let jti = (try? SecureRandom.bytes(count: 16)).map { Base64URL.encode($0) } ?? UUID().uuidString
            let claims: JSONObject = [
                "iss": .string(clientID), "sub": .string(clientID), "aud": .string(self.url.absoluteString),
                "jti": .string(jti), "iat": .number(JSONNumber(now)), "exp": .number(JSONNumber(now + 60))
            ]
            let assertion = try JWTSigner(key: key, algorithm: algorithm).sign(claims)
            fields.append(("client_id", clientID))
            fields.append(("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"))
            fields.append(("client_assertion", assertion))
        }
        return APIRequest(
            method: .post, url: url, headerFields: headers, body: Data(RequestBuilder.encodeForm(fields).utf8),
            timeout: 30)
    }
}
