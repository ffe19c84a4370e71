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

/// A flow that speaks to its provider through an `OAuthClient` — every flow Moose has. Such a flow
/// only authorizes: `refresh` and `logout` are written once, here, from two answers the flow gives.
///
/// A session with a refresh token is refreshed with it (RFC 6749 §6), a new ID token validated as
/// `refreshIDTokens` says (OIDC Core §12.2). A session without one is renewed by a new grant when
/// `renewalParameters(for:)` gives its parameters (client credentials, token exchange, JWT bearer:
/// nobody needs to be asked); otherwise the refresh fails with `invalidGrant` (log in again).
public protocol OAuthClientFlow: Authorizable {
    /// The client every request of the flow goes through.
    var client: OAuthClient { get }
    /// The validator of an ID token a refresh returns; `nil` when the flow has none.
    var refreshIDTokens: IDTokenValidator? { get }
    /// The parameters of a new grant renewing `tokens` when they have no refresh token; `nil` when only
    /// a person can renew them (the interactive flows).
    func renewalParameters(for tokens: TokenSet) -> AuthorizationParameters?
}

extension OAuthClientFlow {
    /// No ID tokens to validate (the grants without a person).
    public var refreshIDTokens: IDTokenValidator? { nil }

    /// A new grant for the same scopes and resource (the grants without a person).
    public func renewalParameters(for tokens: TokenSet) -> AuthorizationParameters? {
        AuthorizationParameters(scopes: tokens.scopes, resources: tokens.resource.map { [$0] } ?? [])
    }

    /// The refresh token when there is one, else a new grant (`renewalParameters(for:)`).
    ///
    /// - Parameter tokens: the current tokens (with their DPoP key when they are bound to one).
    /// - Returns: the new tokens; a rotated refresh token replaces the old one, which is kept otherwise.
    /// - Throws: `OAuthError` with `invalidGrant` when the refresh token is refused or there is neither
    ///   a refresh token nor a new grant to make; `needsLogin` for DPoP-bound tokens without their key;
    ///   the errors of `authorize(_:)` for a new grant; the token endpoint's other errors.
    public func refresh(_ tokens: TokenSet) async throws -> TokenSet {
        if tokens.refreshToken == nil, let parameters = renewalParameters(for: tokens) {
            return try await authorize(parameters)
        }
        return try await client.refresh(tokens, validatingWith: refreshIDTokens)
    }

    /// Revokes the refresh and access tokens (RFC 7009) and builds the end-session URL
    /// (`OAuthClient.logout`); a failed revocation is in the result, never thrown.
    public func logout(_ tokens: TokenSet) async throws -> LogoutResult { await client.logout(tokens) }
}
