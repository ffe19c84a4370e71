#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The one grant dispatcher: every login — `TokenManager.login(with:)` and a protected resource's or
/// MCP server's login (`ResourceTokenManager`) — runs its grant here, so a flow is started, and its
/// tokens checked, in one place.
extension TokenManager.LoginMethod {
    /// The grant this method runs (what a session's plan records).
    var grantKind: SessionPlan.Grant.Kind {
        switch self {
        case .prepared, .userAgent: .authorizationCode
        case .device: .deviceCode
        case .clientCredentials: .clientCredentials
        case .workload: .workload
        }
    }

    /// A browser login's user agent made ready — a loopback listener binds now, before anything is
    /// sent — with the redirect URIs to register (RFC 8252 §7.3); `nil` for the grants without one.
    func readyUserAgent() async throws -> PreparedUserAgent? {
        switch self {
        case .prepared(let preparation): try await preparation.prepare()
        case .userAgent(let agent, let redirectURI): PreparedUserAgent(agent: agent, redirectURI: redirectURI)
        case .device, .clientCredentials, .workload: nil
        }
    }

    /// Runs this login's grant and returns its tokens, checked by its flow.
    ///
    /// - Parameters:
    ///   - client: the client that logs in (its endpoints, authentication, DPoP, resource, PAR policy).
    ///   - validator: checks the ID token of a browser or device login; `nil`: none is checked.
    ///   - parameters: the scopes, resources and extra request parameters.
    ///   - audience: the plan's `audience`, named by a client-credentials grant (a workload's is in its
    ///     `WorkloadGrant`; a person's login names it in `parameters`).
    ///   - workload: how a workload logs in; `nil` makes `.workload` an `invalidConfiguration`.
    ///   - ready: the user agent `readyUserAgent()` made ready already (a caller that registers its
    ///     redirect URI first); `nil`: made ready here.
    func tokens(
        client: OAuthClient, validator: IDTokenValidator?, parameters: AuthorizationParameters, audience: String?,
        workload: WorkloadGrant?, ready: PreparedUserAgent? = nil
    ) async throws -> TokenSet {
        switch self {
        case .prepared, .userAgent:
            let made: PreparedUserAgent? = if let ready { ready } else { try await readyUserAgent() }
            guard let agent = made else {
                throw OAuthError(OAuthError.invalidConfiguration, "a browser login needs a user agent")
            }
            return try await AuthorizationCodeFlow(
                client: client, redirectURI: agent.redirectURI, userAgent: agent.agent, idTokens: validator
            )
            .authorize(parameters)
        case .device(let present):
            return try await DeviceAuthorizationFlow(client: client, idTokens: validator, present: present)
                .authorize(parameters)
        case .clientCredentials:
            var parameters = parameters
            if let audience { parameters.extra.append(("audience", audience)) }
            return try await ClientCredentialsFlow(client: client).authorize(parameters)
        case .workload:
            guard let workload else {
                throw OAuthError(
                    OAuthError.invalidConfiguration,
                    "a workload login needs the manager's workload: TokenManager(…, workload: WorkloadGrant(…))")
            }
            return try await workload.tokens(client: client, scopes: parameters.scopes)
        }
    }
}
