#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP

/// One way to obtain tokens: authorization code + PKCE, device authorization, client credentials.
///
/// ```swift
/// let flow: any Authorizable = ClientCredentialsFlow(client: client)
/// var tokens = try await flow.authorize(AuthorizationParameters(scopes: ["read"]))
/// tokens = try await flow.refresh(tokens)
/// let result = try await flow.logout(tokens)
/// ```
public protocol Authorizable: Sendable {
    /// Runs the grant and returns fresh tokens.
    func authorize(_ parameters: AuthorizationParameters) async throws -> TokenSet
    /// Exchanges the refresh token (RFC 6749 §6). The old refresh token is kept when the response
    /// carries none; a rotated one replaces it. `invalid_grant` is final (`OAuthError.invalidGrant`).
    func refresh(_ tokens: TokenSet) async throws -> TokenSet
    /// Revokes what can be revoked (RFC 7009) and builds the RP-initiated logout URL.
    func logout(_ tokens: TokenSet) async throws -> LogoutResult
}
