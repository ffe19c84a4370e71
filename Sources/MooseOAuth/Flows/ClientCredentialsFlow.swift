#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
import MooseJWT

/// The client credentials grant (RFC 6749 §4.4): a confidential client acting for itself.
public struct ClientCredentialsFlow: OAuthClientFlow {
    /// The client.
    public let client: OAuthClient

    /// A flow.
    ///
    /// - Parameter client: a confidential client (its authentication is what the grant rests on).
    public init(client: OAuthClient) { self.client = client }

    /// Asks for tokens for the client itself: the scopes asked for (`openid` left out: this grant
    /// issues no ID token), the resources, and `parameters.extra` (an `audience`).
    ///
    /// - Parameter parameters: the scopes (none: the client's default scopes), RFC 8707 resources
    ///   (none: the client's `resource`) and extra parameters.
    /// - Returns: the tokens (no refresh token, as a rule; bound to a new DPoP key when the client asks).
    /// - Throws: `OAuthError` with `invalidConfiguration` when `openid` is the only scope asked for; the
    ///   token endpoint's refusal otherwise (`invalidClient` for refused credentials, `server` for
    ///   `invalid_scope`…), `invalidResponse`, `unsafeValue`, `transient`, `tls`, or `missingEndpoint`.
    public func authorize(_ parameters: AuthorizationParameters) async throws -> TokenSet {
        var fields = [("grant_type", "client_credentials")]
        // No ID token comes from this grant, so `openid` is not sent; asked for alone, it is refused
        // with the reason rather than silently sending no scope (whose refusal reads as a bad secret).
        let scopes = parameters.scopes.filter { $0 != "openid" }
        if scopes.isEmpty, !parameters.scopes.isEmpty {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the client credentials grant issues no ID token, so the scope openid is not sent; ask for the API's scopes "
                    + "(or none, for the client's default scopes)")
        }
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        let resources = parameters.resources(for: client)
        var tokens = try await client.tokenEndpoint().request(
            fields + resources.map { ("resource", $0) } + parameters.extra,
            requestedScopes: scopes, dpop: client.newDPoPKey())
        if resources.count == 1 { tokens.resource = resources[0] }
        return tokens
    }

    /// Client credentials have no refresh token: a "refresh" is a new grant, for the scopes granted
    /// (without `openid`, which a provider may grant but which asks for no user).
    public func renewalParameters(for tokens: TokenSet) -> AuthorizationParameters? {
        AuthorizationParameters(
            scopes: tokens.scopes.filter { $0 != "openid" }, resources: tokens.resource.map { [$0] } ?? [])
    }
}
