#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
package import MooseHTTP
import Logging
import MooseJWT
import MooseCrypto
import HTTPTypes

/// RFC 6749 §5.1/§5.2 parsing, liberal where it is safe.
package enum TokenResponse {
    /// Parses a token endpoint response (RFC 6749 §5.1/§5.2). Every byte of `response` is untrusted.
    package static func parse(_ response: APIResponse, requestedAt: Date, requestedScopes: [String]) throws -> TokenSet
    {
        let object = try? JSONValue(parsing: Array(response.body))
        guard (200..<300).contains(response.status.code) else {
            throw error(from: response, object: object)
        }
        guard case .object(let fields)? = object else {
            throw OAuthError(
                OAuthError.invalidResponse,
                "the token endpoint answered HTTP \(response.status.code) with no JSON object: \(excerpt(response))",
                status: response.status.code)
        }
        guard let accessToken = fields["access_token"]?.stringValue, !accessToken.isEmpty else {
            throw OAuthError(
                OAuthError.invalidResponse, "the token response has no access_token", status: response.status.code)
        }
        // RFC 6749 Appendix A.12: access_token = 1*VSCHAR. Control characters (and anything beyond
        // ASCII) are refused here; whether it may become a header or shell text is decided there.
        guard TokenCharacters.isVisibleASCII(accessToken), accessToken.utf8.count <= TokenCharacters.maximumTokenLength
        else {
            throw OAuthError(
                OAuthError.unsafeValue,
                "the token response's access_token has characters outside RFC 6749's VSCHAR set (or is over 64 KiB); refusing it"
            )
        }
        let refreshToken = fields["refresh_token"]?.stringValue
        if let refreshToken,
            !TokenCharacters.isVisibleASCII(refreshToken)
                || refreshToken.utf8.count > TokenCharacters.maximumTokenLength
        {
            throw OAuthError(
                OAuthError.unsafeValue,
                "the token response's refresh_token has characters outside RFC 6749's VSCHAR set (or is over 64 KiB); refusing it"
            )
        }
        // token_type is case-insensitive (RFC 6749 §5.1); a missing one is read as Bearer (liberal).
        // It becomes an Authorization scheme: it must be an RFC 9110 token.
        let rawType = fields["token_type"]?.stringValue ?? "Bearer"
        guard TokenCharacters.isHTTPToken(rawType), rawType.utf8.count <= 64 else {
            throw OAuthError(
                OAuthError.unsafeValue,
                "the token response's token_type is not an HTTP token (RFC 9110 §5.6.2); refusing it")
        }
        let tokenType = rawType.lowercased() == "bearer" ? "Bearer" : rawType.lowercased() == "dpop" ? "DPoP" : rawType
        var expiresAt: Date? = nil
        // expires_in: a number, or (liberally) a numeric string; missing means "not said". Bounded
        // to 0…1 year before it becomes a date (1e300 would trap later arithmetic and formatting).
        if let seconds = fields["expires_in"]?.doubleValue ?? fields["expires_in"]?.stringValue.flatMap(Double.init) {
            expiresAt = requestedAt.addingTimeInterval(TokenSet.clampedLifetime(seconds))
        }
        let scopes = fields["scope"]?.stringValue.map { $0.split(separator: " ").map(String.init) } ?? requestedScopes
        var tokens = TokenSet(
            accessToken: accessToken, tokenType: tokenType, refreshToken: refreshToken,
            idToken: fields["id_token"]?.stringValue, expiresAt: expiresAt, scopes: scopes, requestedAt: requestedAt)
        // RFC 8693 §2.2.1 (token exchange): a URI; kept only when it is short visible ASCII.
        if let issued = fields["issued_token_type"]?.stringValue, issued.utf8.count <= 256,
            TokenCharacters.isVisibleASCII(issued)
        {
            tokens.issuedTokenType = issued
        }
        return tokens
    }

    /// The error of a refused or failed answer from `endpoint` (the token endpoint, or another that
    /// answers in RFC 6749 §5.2's shape: revocation, RFC 7009 §2.2.1), named in the message.
    ///   - publicClient: whether the client has no secret or key: a refusal of it at an endpoint before the
    ///     token endpoint (PAR, device) then says first that its client id or registered redirect URI
    ///     (port) may be wrong — a secret is not what it lacks.
    static func error(
        from response: APIResponse, object: JSONValue?, endpoint: String = "the token endpoint",
        publicClient: Bool = false
    ) -> OAuthError {
        let publicHint =
            publicClient && endpoint != "the token endpoint"
            ? "; this public client may have a wrong client id, or a redirect URI (or port) the provider has not registered for it"
            : ""
        let code = object?["error"]?.stringValue
        let description = object?["error_description"]?.stringValue
        let uri = object?["error_uri"]?.stringValue
        if response.status.code >= 500 || response.status.code == 429 {
            return OAuthError(
                OAuthError.transient, "\(endpoint) answered HTTP \(response.status.code)", oauthError: code,
                errorDescription: description, errorURI: uri, status: response.status.code)
        }
        guard let code else {
            let status = response.status.code
            let body = response.body.isEmpty ? "an empty body" : excerpt(response)
            // Some providers (Glewlwyd) refuse every bad client authentication with a bare 401/403:
            // the client was refused, not the answer malformed (RFC 6749 §5.2 would say invalid_client).
            if status == 401 || status == 403, !publicHint.isEmpty {
                return OAuthError(
                    OAuthError.invalidClient,
                    "\(endpoint) answered HTTP \(status) without an OAuth error (\(body))" + publicHint, status: status)
            }
            if status == 401 || status == 403 {
                let next =
                    endpoint == "the token endpoint"
                    ? "the client's credentials were refused: check the client id and its secret or key (and the key's kid)"
                    : "it refused this client's authentication there (a provider may take other client authentication methods "
                        + "at this endpoint than at its token endpoint: see its metadata)"
                return OAuthError(
                    OAuthError.invalidClient,
                    "\(endpoint) answered HTTP \(status) without an OAuth error (\(body)): " + next,
                    status: status)
            }
            // Glewlwyd answers a dead or replayed refresh token with a 400 and an empty body (issue 33 §5):
            // a refusal of the grant. A 400 that says something else (a proxy's page, JSON that is not
            // an OAuth error) stays a malformed answer: invalid_grant ends a session.
            if status == 400, Self.isBlank(response) {
                return OAuthError(
                    OAuthError.invalidGrant,
                    "\(endpoint) refused the grant (HTTP 400) without an OAuth error body (\(body))",
                    status: status)
            }
            return OAuthError(
                OAuthError.invalidResponse,
                "\(endpoint) answered HTTP \(status) without an OAuth error (\(body))",
                status: status)
        }
        let kind: OAuthError.Code =
            switch code {
            case "invalid_grant": OAuthError.invalidGrant
            case "invalid_client", "unauthorized_client": OAuthError.invalidClient
            case "access_denied": OAuthError.accessDenied
            case "expired_token": OAuthError.expiredToken
            default: OAuthError.server
            }
        let hint =
            ["invalid_client", "unauthorized_client", "invalid_request", "invalid_redirect_uri"].contains(code)
            ? publicHint : ""
        return OAuthError(
            kind, "\(endpoint) refused the request" + hint, oauthError: code, errorDescription: description,
            errorURI: uri, status: response.status.code)
    }

    /// Whether an answer's body says nothing: empty, or only white space.
    static func isBlank(_ response: APIResponse) -> Bool {
        response.body.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
    }

    /// What an error message may quote of a response body: never a value that could be a secret.
    static func excerpt(_ response: APIResponse) -> String {
        Redaction.body(Array(response.body))
    }
}
