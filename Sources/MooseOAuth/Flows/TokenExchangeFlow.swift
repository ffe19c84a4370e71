#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
import MooseJWT

/// A token given to, or asked of, a token exchange (RFC 8693 §3): the token and its type URI.
public struct ExchangeToken: Sendable, Hashable {
    /// The token itself.
    public var token: String
    /// Its type: one of the `…Type` URIs below, or another the provider names.
    public var type: String

    /// A token of `type`.
    ///
    /// - Parameters:
    ///   - token: the token itself (checked when the grant is sent: non-empty visible ASCII, at most 64 KiB).
    ///   - type: its type URI (`ExchangeToken.idTokenType`…; `type(named:)` maps short names).
    public init(_ token: String, type: String) {
        self.token = token
        self.type = type
    }

    /// `urn:ietf:params:oauth:token-type:access_token`: an OAuth access token.
    public static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"
    /// `urn:ietf:params:oauth:token-type:refresh_token`: an OAuth refresh token.
    public static let refreshTokenType = "urn:ietf:params:oauth:token-type:refresh_token"
    /// `urn:ietf:params:oauth:token-type:id_token`: an OpenID Connect ID token (what CI platforms
    /// and Kubernetes issue to workloads; some providers take outside tokens only as this type).
    public static let idTokenType = "urn:ietf:params:oauth:token-type:id_token"
    /// `urn:ietf:params:oauth:token-type:jwt`: any JWT.
    public static let jwtType = "urn:ietf:params:oauth:token-type:jwt"

    /// The type URI for a short name (`access_token`, `refresh_token`, `id_token`, `jwt`), or `name`
    /// itself when it already is a URI (contains a colon); `nil` for an unknown short name.
    public static func type(named name: String) -> String? {
        switch name {
        case "access_token": accessTokenType
        case "refresh_token": refreshTokenType
        case "id_token": idTokenType
        case "jwt": jwtType
        default: name.utf8.contains(UInt8(ascii: ":")) ? name : nil
        }
    }

    /// Refuses a token that cannot be what a token endpoint is sent: empty, over 64 KiB, or with
    /// characters outside visible ASCII (a token file with a stray byte, the wrong file).
    func checked(as role: String) throws -> ExchangeToken {
        guard !token.isEmpty, token.utf8.count <= TokenCharacters.maximumTokenLength,
            TokenCharacters.isVisibleASCII(token),
            !token.utf8.contains(0x20)
        else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the \(role) token is empty, over 64 KiB, or has characters a token cannot have; nothing was sent")
        }
        guard !type.isEmpty, type.utf8.count <= 256, TokenCharacters.isVisibleASCII(type) else {
            throw OAuthError(OAuthError.invalidConfiguration, "the \(role) token's type is not a URI")
        }
        return self
    }
}

/// The OAuth 2.0 token exchange grant (RFC 8693): trades a token the caller holds — a workload's
/// own identity token, another service's access token — for an access token at this provider.
///
/// The subject (and actor) token is asked for on every grant, so a source that rotates (a projected
/// service-account token file, a CI platform's short-lived token) is read afresh. A session made
/// with it is renewed by exchanging again when no refresh token came back.
///
/// ```swift
/// let flow = TokenExchangeFlow(client: client, audiences: ["https://api.example.com"]) {
///     ExchangeToken(try await workload.token(audience: issuer), type: ExchangeToken.idTokenType)
/// }
/// let tokens = try await flow.authorize(AuthorizationParameters(scopes: ["read"]))
/// ```
///
/// Strict where it matters: when `requestedTokenType` is set the response's `issued_token_type`
/// must be it; without one, only an access token (or a JWT sent as one) is accepted as the result,
/// since that is what a session sends. A response without `issued_token_type` (required by §2.2.1;
/// some servers leave it out) is read as an access token when its `token_type` is `Bearer` or `DPoP`.
public struct TokenExchangeFlow: OAuthClientFlow {
    /// `urn:ietf:params:oauth:grant-type:token-exchange`.
    public static let grantType = "urn:ietf:params:oauth:grant-type:token-exchange"

    /// The client (its authentication, if any, is sent as for every grant).
    public let client: OAuthClient
    /// Yields the subject token, on every grant.
    public let subject: @Sendable () async throws -> ExchangeToken
    /// Yields the actor token (delegation, RFC 8693 §1.1), on every grant; `nil`: none.
    public var actor: (@Sendable () async throws -> ExchangeToken)?
    /// The `requested_token_type`; `nil` leaves it to the provider (an access token).
    public var requestedTokenType: String?
    /// The `audience` values (logical names of the target services).
    public var audiences: [String]

    /// A flow exchanging what `subject` yields.
    ///
    /// - Parameters:
    ///   - client: the client (its authentication, if any, is sent as for every grant).
    ///   - requestedTokenType: the `requested_token_type`; `nil` (the default): none is sent, and only
    ///     an access token (or a JWT) is accepted back.
    ///   - audiences: the `audience` values (logical names of the target services); default: none.
    ///   - actor: yields the actor token on every grant (delegation); `nil` (the default): none.
    ///   - subject: yields the subject token on every grant (a rotating source is read afresh).
    public init(
        client: OAuthClient, requestedTokenType: String? = nil, audiences: [String] = [],
        actor: (@Sendable () async throws -> ExchangeToken)? = nil,
        subject: @escaping @Sendable () async throws -> ExchangeToken
    ) {
        self.client = client
        self.subject = subject
        self.actor = actor
        self.requestedTokenType = requestedTokenType
        self.audiences = audiences
    }

    /// Exchanges a fresh subject (and actor) token for tokens (RFC 8693 §2.1).
    ///
    /// - Parameter parameters: the scopes (none: no `scope` sent), RFC 8707 resources (none: the
    ///   client's `resource`) and extra parameters.
    /// - Returns: the issued tokens, checked to be what was asked for (see the type's documentation).
    /// - Throws: `OAuthError` with `invalidConfiguration` for a subject or actor token that cannot be
    ///   sent (empty, over 64 KiB, not visible ASCII) or a provider that does not offer token exchange
    ///   (`unsupported_grant_type`, or its metadata does not list it); `invalidResponse` when the issued
    ///   token is not what was asked for; the token endpoint's `invalidGrant`, `invalidClient`, `server`,
    ///   `invalidResponse`, `unsafeValue`, `transient`, `tls`; whatever `subject` or `actor` throws
    ///   (`OAuthError.workloadIdentity` from a `WorkloadIdentity`).
    public func authorize(_ parameters: AuthorizationParameters) async throws -> TokenSet {
        let subject = try await self.subject().checked(as: "subject")
        var fields = [
            ("grant_type", Self.grantType), ("subject_token", subject.token), ("subject_token_type", subject.type)
        ]
        if let actor {
            let token = try await actor().checked(as: "actor")
            fields += [("actor_token", token.token), ("actor_token_type", token.type)]
        }
        if let requestedTokenType { fields.append(("requested_token_type", requestedTokenType)) }
        fields += audiences.map { ("audience", $0) }
        let resources = parameters.resources(for: client)
        fields += resources.map { ("resource", $0) }
        if !parameters.scopes.isEmpty { fields.append(("scope", parameters.scopes.joined(separator: " "))) }
        var tokens = try await GrantOffer.request(Self.grantType, name: "token exchange (RFC 8693)", client: client) {
            try await client.tokenEndpoint().request(
                fields + parameters.extra, requestedScopes: parameters.scopes, dpop: client.newDPoPKey())
        }
        try Self.check(tokens, requested: requestedTokenType)
        if resources.count == 1 { tokens.resource = resources[0] }
        return tokens
    }

    /// The issued token is what was asked for (see the type's documentation).
    static func check(_ tokens: TokenSet, requested: String?) throws {
        let issued = tokens.issuedTokenType
        if let requested {
            guard let issued, issued.utf8.elementsEqual(requested.utf8) else {
                throw OAuthError(
                    OAuthError.invalidResponse,
                    "the token exchange asked for \(requested) and the provider issued \(issued ?? "no issued_token_type")"
                )
            }
            return
        }
        let sendable = tokens.tokenType.lowercased() == "bearer" || tokens.tokenType.lowercased() == "dpop"
        let usable =
            issued.map { type in
                [ExchangeToken.accessTokenType, ExchangeToken.jwtType].contains { $0.utf8.elementsEqual(type.utf8) }
            } ?? true
        guard sendable, usable else {
            throw OAuthError(
                OAuthError.invalidResponse,
                "the token exchange issued \(issued ?? "a token") of token_type \(tokens.tokenType): not an access token to send"
            )
        }
    }
}
