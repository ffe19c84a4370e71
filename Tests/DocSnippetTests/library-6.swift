// docs/library.md, ```swift block 6: the region is quoted there word for word (DocSnippetTests).
import MooseOAuth
import MooseOAuthSystem
import MooseURLSession

enum Library6 {
    enum MyError: Error { case noKeys }

    static func snippet() async throws {
        // snippet begins
        let transport = URLSessionTransport()
        let metadata = try await Discovery(transport: transport).metadata(for: "https://id.example.com")
        let client = OAuthClient(
            metadata: metadata, clientID: "my-native-app", authentication: .none, transport: transport)
        // Discovery refuses an OpenID Connect document without jwks_uri (and every other REQUIRED member).
        guard let jwksURI = metadata.jwksURI else { throw MyError.noKeys }
        let idTokens = IDTokenValidator(
            issuer: metadata.issuer, clientID: client.clientID,
            jwks: JWKSCache(url: jwksURI, transport: transport))

        // Authorization code + PKCE (S256, always), state and nonce, loopback redirect (RFC 8252).
        let agent = try LoopbackUserAgent { url in SystemBrowser().open(url) } // http://127.0.0.1:<random>/callback
        // Over ssh (the browser elsewhere): PasteUserAgent(loopback: agent) { print($0) } also takes the pasted address.
        let login = AuthorizationCodeFlow(
            client: client, redirectURI: agent.redirectURI, userAgent: agent, idTokens: idTokens)
        var tokens = try await login.authorize(AuthorizationParameters(scopes: ["openid", "profile", "offline_access"]))

        // "Edit profile" / step-up: the same call with extra parameters.
        let stepUp = AuthorizationParameters(
            scopes: ["openid"], prompt: "login", maxAge: 0, extra: [("kc_action", "UPDATE_PROFILE")])
        _ = try await login.authorize(stepUp)

        tokens = try await login.refresh(tokens) // a rotated refresh token replaces the old one
        let result = try await login.logout(tokens) // revokes (RFC 7009); result.endSessionURL for RP-initiated logout
        // snippet ends
        _ = result
    }
}
