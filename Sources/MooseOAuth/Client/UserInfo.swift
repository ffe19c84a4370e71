#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
public import MooseJWT

extension OAuthClient {
    /// The UserInfo response (OIDC Core §5.3), checked against the ID token's subject: a `sub` that
    /// differs means the response must not be used (§5.3.2).
    ///
    /// ```swift
    /// let info = try await client.userInfo(accessToken: tokens.accessToken, expectedSubject: "248289761001")
    /// info["email"]?.stringValue
    /// ```
    ///
    /// - Parameters:
    ///   - accessToken: a bearer access token (sent as `Authorization: Bearer`).
    ///   - expectedSubject: the ID token's `sub`, compared byte for byte; `nil`: not checked.
    /// - Returns: the UserInfo claims as the provider sent them.
    /// - Throws: `OAuthError` with `missingEndpoint` or `insecureEndpoint` (the UserInfo endpoint),
    ///   `subjectMismatch` when the response's `sub` is not `expectedSubject`, `invalidResponse` for a
    ///   body that is not a JSON object with a `sub` (a signed UserInfo response included), `server` for
    ///   a 4xx answer, `transient` for a 5xx one or an unreachable endpoint, `tls`; `unsafeValue` for a
    ///   token that cannot be a header; `needsLogin` for a DPoP-bound token without its key.
    public func userInfo(accessToken: String, expectedSubject: String?) async throws -> JSONObject {
        try await userInfo(token: AccessToken(value: accessToken), expectedSubject: expectedSubject)
    }

    /// The UserInfo response for `tokens`' access token — with a DPoP proof when they are DPoP-bound.
    ///
    /// - Parameters:
    ///   - tokens: the tokens whose access token (and DPoP key) is presented.
    ///   - expectedSubject: the ID token's `sub`, compared byte for byte; `nil`: not checked.
    /// - Returns: the UserInfo claims as the provider sent them.
    /// - Throws: `OAuthError` with `missingEndpoint` or `insecureEndpoint` (the UserInfo endpoint),
    ///   `subjectMismatch` when the response's `sub` is not `expectedSubject`, `invalidResponse` for a
    ///   body that is not a JSON object with a `sub` (a signed UserInfo response included), `server` for
    ///   a 4xx answer, `transient` for a 5xx one or an unreachable endpoint, `tls`; `unsafeValue` for a
    ///   token that cannot be a header; `needsLogin` for a DPoP-bound token without its key.
    public func userInfo(tokens: TokenSet, expectedSubject: String?) async throws -> JSONObject {
        try await userInfo(token: AccessToken(tokens, generation: 0), expectedSubject: expectedSubject)
    }

    /// The UserInfo response for a coordinator's token (Bearer, or DPoP with a proof per request).
    ///
    /// - Parameters:
    ///   - token: the access token to present, as a coordinator hands it out.
    ///   - expectedSubject: the ID token's `sub`, compared byte for byte; `nil`: not checked.
    /// - Returns: the UserInfo claims as the provider sent them.
    /// - Throws: `OAuthError` with `missingEndpoint` or `insecureEndpoint` (the UserInfo endpoint),
    ///   `subjectMismatch` when the response's `sub` is not `expectedSubject`, `invalidResponse` for a
    ///   body that is not a JSON object with a `sub` (a signed UserInfo response included), `server` for
    ///   a 4xx answer, `transient` for a 5xx one or an unreachable endpoint, `tls`; `unsafeValue` for a
    ///   token that cannot be a header; `needsLogin` for a DPoP-bound token without its key.
    public func userInfo(token: AccessToken, expectedSubject: String?) async throws -> JSONObject {
        let url = try metadata.require(metadata.userinfoEndpoint, "userinfo endpoint")
        var request = APIRequest(url: url, timeout: 20)
        request.headerFields[.accept] = MIMEType.json.value
        let transport = self.transport, logger = self.logger
        let response = try await token.send(request) { request in
            try await OAuthHTTP.send(request, over: transport, logger: logger, what: "the userinfo endpoint")
        }
        guard response.status.code == 200 else {
            throw OAuthError(
                response.status.code >= 500 ? OAuthError.transient : OAuthError.server,
                "the userinfo endpoint answered HTTP \(response.status.code)", status: response.status.code)
        }
        return try Self.parseUserInfo(Array(response.body), expectedSubject: expectedSubject)
    }

    /// Parses a UserInfo response body and checks its `sub` exactly (byte for byte) against `expectedSubject`.
    package static func parseUserInfo(_ body: [UInt8], expectedSubject: String?) throws -> JSONObject {
        guard case .object(let claims)? = try? JSONValue(parsing: body) else {
            throw OAuthError(
                OAuthError.invalidResponse,
                "the userinfo response is not a JSON object (signed UserInfo is not supported)")
        }
        guard let subject = claims["sub"]?.stringValue else {
            throw OAuthError(OAuthError.invalidResponse, "the userinfo response has no sub")
        }
        if let expectedSubject, !subject.utf8.elementsEqual(expectedSubject.utf8) {
            throw OAuthError(
                OAuthError.subjectMismatch, "the userinfo response is about another subject than the ID token")
        }
        return claims
    }
}
