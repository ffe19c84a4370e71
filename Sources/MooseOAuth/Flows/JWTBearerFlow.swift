#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
import MooseJWT

/// The JWT bearer grant (RFC 7523 §2.1): a signed assertion — a workload's identity token, or one
/// the caller signs — is the grant itself. The assertion is asked for on every grant (short-lived
/// assertions rotate); a session made with it is renewed by a new grant when no refresh token came.
///
/// ```swift
/// let flow = JWTBearerFlow(client: client) { try await workload.token(audience: tokenEndpoint) }
/// let tokens = try await flow.authorize(AuthorizationParameters(scopes: ["read"]))
/// ```
public struct JWTBearerFlow: OAuthClientFlow {
    /// `urn:ietf:params:oauth:grant-type:jwt-bearer`.
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    /// The client (its authentication, if any, is sent too: RFC 7523 §3.1 makes it optional).
    public let client: OAuthClient
    /// Yields the assertion (a compact JWS), on every grant.
    public let assertion: @Sendable () async throws -> String

    /// A flow granting on what `assertion` yields.
    ///
    /// - Parameters:
    ///   - client: the client (its authentication, if any, is sent too).
    ///   - assertion: yields the assertion, a compact JWS, on every grant (short-lived ones rotate).
    public init(client: OAuthClient, assertion: @escaping @Sendable () async throws -> String) {
        self.client = client
        self.assertion = assertion
    }

    /// Presents a fresh assertion as the grant (RFC 7523 §2.1).
    ///
    /// - Parameter parameters: the scopes (none: no `scope` sent), RFC 8707 resources (none: the
    ///   client's `resource`) and extra parameters.
    /// - Returns: the tokens.
    /// - Throws: `OAuthError` with `invalidConfiguration` for an assertion that cannot be sent (empty,
    ///   over 64 KiB, not visible ASCII) or a provider that does not offer the JWT bearer grant; the
    ///   token endpoint's `invalidGrant`, `invalidClient`, `server`, `invalidResponse`, `unsafeValue`,
    ///   `transient`, `tls`; whatever `assertion` throws.
    public func authorize(_ parameters: AuthorizationParameters) async throws -> TokenSet {
        let assertion = try ExchangeToken(try await self.assertion(), type: ExchangeToken.jwtType).checked(
            as: "assertion"
        ).token
        var fields = [("grant_type", Self.grantType), ("assertion", assertion)]
        let resources = parameters.resources(for: client)
        fields += resources.map { ("resource", $0) }
        if !parameters.scopes.isEmpty { fields.append(("scope", parameters.scopes.joined(separator: " "))) }
        var tokens = try await GrantOffer.request(
            Self.grantType, name: "the JWT bearer grant (RFC 7523)", client: client
        ) {
            try await client.tokenEndpoint().request(
                fields + parameters.extra, requestedScopes: parameters.scopes, dpop: client.newDPoPKey())
        }
        if resources.count == 1 { tokens.resource = resources[0] }
        return tokens
    }

}

/// A grant's refusal because the provider does not offer the grant at all, said so: an
/// `unsupported_grant_type` answer, or any refusal from a provider whose metadata lists its grant
/// types without this one. Nothing is refused before sending (metadata may be incomplete).
enum GrantOffer {
    static func request(
        _ grantType: String, name: String, client: OAuthClient,
        _ send: () async throws -> TokenSet
    ) async throws -> TokenSet {
        do {
            return try await send()
        } catch let error as OAuthError
            where error.code != OAuthError.transient && error.code != OAuthError.timedOut
            && error.code != OAuthError.tls && error.code != OAuthError.unsafeValue
        {
            let unsupported = error.oauthError.map { $0.utf8.elementsEqual("unsupported_grant_type".utf8) } ?? false
            let unlisted =
                client.metadata.grantTypesSupported.map { !$0.contains { $0.utf8.elementsEqual(grantType.utf8) } }
                ?? false
            guard unsupported || (unlisted && error.status.map { (400..<500).contains($0) } == true) else {
                throw error
            }
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the provider does not offer \(name)"
                    + (unsupported
                        ? " (it answered unsupported_grant_type)"
                        : " (its metadata's grant_types_supported lacks \(grantType))")
                    + ": enable it there, or use a provider that does",
                oauthError: error.oauthError, errorDescription: error.errorDescription, errorURI: error.errorURI,
                status: error.status, underlying: error)
        }
    }
}
