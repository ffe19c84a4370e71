#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import Logging
import MooseJWT
import HTTPTypes

/// A client registered at an authorization server: what RFC 7591 §3.2.1 answered, kept (sealed,
/// with the session) so that later logins and refreshes use the same client — including the
/// `client_secret` and the RFC 7592 `registration_access_token`, which are secrets:
/// `description` shows fingerprints only.
public struct RegisteredClient: Sendable, Codable, Hashable, CustomStringConvertible {
    /// The issuer of the server this client is registered at (a registration is good there only).
    public var issuer: String
    /// `client_id`. For a Client ID Metadata Document client, the document's `https` URL.
    public var clientID: String
    /// `client_secret`, when the server issued one.
    public var clientSecret: String?
    /// `client_secret_expires_at` (`nil`: never, or not said).
    public var clientSecretExpiresAt: Date?
    /// `client_id_issued_at`
    public var clientIDIssuedAt: Date?
    /// `registration_access_token` (RFC 7592): reads, updates and deletes this registration.
    public var registrationAccessToken: String?
    /// `registration_client_uri` (RFC 7592): where this registration is managed.
    public var registrationClientURI: URL?
    /// `token_endpoint_auth_method` as registered.
    public var tokenEndpointAuthMethod: String?
    /// `redirect_uris` as registered.
    public var redirectURIs: [String]
    /// `scope` as registered, when the server said.
    public var scopes: [String]?

    /// A registration (the registration call makes these; so may an app that registered elsewhere).
    public init(
        issuer: String, clientID: String, clientSecret: String? = nil, redirectURIs: [String] = [],
        tokenEndpointAuthMethod: String? = nil
    ) {
        self.issuer = issuer
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.redirectURIs = redirectURIs
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
    }

    /// How this client authenticates at the token endpoint: `client_secret_post` or
    /// `client_secret_basic` with its secret when it has one (basic unless registered for post),
    /// otherwise none (public).
    public var authentication: ClientAuthentication {
        guard let clientSecret, !clientSecret.isEmpty else { return .none }
        if let method = tokenEndpointAuthMethod, method.utf8.elementsEqual("client_secret_post".utf8) {
            return .clientSecretPost(clientSecret)
        }
        return .clientSecretBasic(clientSecret)
    }

    /// `true` when the secret has expired at `now` (RFC 7591 §3.2.1: 0 means never).
    public func secretHasExpired(at now: Date = Date()) -> Bool {
        guard clientSecret != nil, let clientSecretExpiresAt else { return false }
        return clientSecretExpiresAt <= now
    }

    /// How this client authenticates to renew tokens issued to it: `authentication`, unless its
    /// secret has expired — then no request is sent (it could only be refused as `invalid_client`,
    /// whose hint points at the wrong fix) and the next step is a new login, which registers anew.
    func renewalAuthentication(at now: Date = Date()) throws -> ClientAuthentication {
        guard !secretHasExpired(at: now) else {
            throw OAuthError(
                OAuthError.needsLogin,
                "the secret of the client registered for this session expired (client_secret_expires_at): "
                    + "log in again, which registers the client anew")
        }
        return authentication
    }

    /// `true` when a login may use `redirectURI` with this registration: it is registered exactly, or
    /// (RFC 8252 §7.3) it is a loopback URI and the same URI without a port is registered.
    public func allows(redirectURI: String) -> Bool {
        if redirectURIs.contains(where: { $0.utf8.elementsEqual(redirectURI.utf8) }) { return true }
        guard var components = URLComponents(string: redirectURI), let host = components.host,
            TransportSecurity.isLoopback(host: host), components.port != nil
        else { return false }
        components.port = nil
        guard let portless = components.string else { return false }
        return redirectURIs.contains { $0.utf8.elementsEqual(portless.utf8) }
    }

    /// The client id and fingerprints of the secrets.
    public var description: String {
        var parts = ["client_id \(clientID)", "issuer \(issuer)"]
        if let clientSecret { parts.append("client_secret #\(TokenSet.fingerprint(clientSecret))") }
        if let registrationAccessToken {
            parts.append("registration_access_token #\(TokenSet.fingerprint(registrationAccessToken))")
        }
        return "RegisteredClient(" + parts.joined(separator: ", ") + ")"
    }
}
