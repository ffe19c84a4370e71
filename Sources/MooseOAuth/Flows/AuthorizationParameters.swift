#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP

/// Extra authorization parameters (OIDC Core 3.1.2.1). An "edit profile" or "step-up" call is
/// `authorize` with some of these set.
public struct AuthorizationParameters: Sendable {
    /// Scopes to request.
    public var scopes: [String]
    /// `prompt` (`login`, `consent`, `select_account`, `none`).
    public var prompt: String?
    /// `login_hint`
    public var loginHint: String?
    /// `acr_values`
    public var acrValues: [String]?
    /// `max_age` in seconds.
    public var maxAge: Int?
    /// Anything else, sent as is (`ui_locales`, a provider's own parameter…).
    public var extra: [(String, String)]
    /// RFC 8707 resource indicators: the resources the tokens are for (absolute URIs, no fragment),
    /// sent as `resource` on the authorization request and again on the token request. Empty: the
    /// client's own `OAuthClient.resource`, if any.
    public var resources: [String]

    /// Parameters.
    public init(
        scopes: [String] = ["openid"], prompt: String? = nil, loginHint: String? = nil, acrValues: [String]? = nil,
        maxAge: Int? = nil, extra: [(String, String)] = [], resources: [String] = []
    ) {
        self.scopes = scopes
        self.prompt = prompt
        self.loginHint = loginHint
        self.acrValues = acrValues
        self.maxAge = maxAge
        self.extra = extra
        self.resources = resources
    }

    /// The resources to send: these parameters' own, else `client`'s.
    func resources(for client: OAuthClient) -> [String] {
        resources.isEmpty ? (client.resource.map { [$0] } ?? []) : resources
    }

    var queryItems: [(String, String)] {
        var items: [(String, String)] = []
        if let prompt { items.append(("prompt", prompt)) }
        if let loginHint { items.append(("login_hint", loginHint)) }
        if let acrValues { items.append(("acr_values", acrValues.joined(separator: " "))) }
        if let maxAge { items.append(("max_age", String(maxAge))) }
        return items + extra
    }
}
