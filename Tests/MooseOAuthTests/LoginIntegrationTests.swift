import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseOAuthSystem
import MooseCrypto
import MooseTestSupport
import MooseURLSession
import Testing

/// Authorization code + PKCE against the real provider, through its own login form.
struct LoginIntegrationTests {
    static func validator(_ metadata: ProviderMetadata, clientID: String = "moose-cli") throws -> IDTokenValidator {
        IDTokenValidator(
            issuer: metadata.issuer, clientID: clientID,
            jwks: JWKSCache(url: try #require(metadata.jwksURI), transport: TestIdP.transport))
    }

    /// Logs alice in; returns the flow and the tokens.
    static func login(scopes: [String] = ["openid", "profile", "email"]) async throws -> (
        AuthorizationCodeFlow, TokenSet, HeadlessBrowser
    ) {
        let client = try await TestIdP.client("moose-cli")
        let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: TestIdP.transport)
        let agent = try LoopbackUserAgent(timeout: 30) { url in
            // Stop at the redirect URI the request names (the IdP lives on 127.0.0.1 too).
            let redirect =
                URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?
                .first { $0.name == "redirect_uri" }?.value ?? "http://127.0.0.1:0/callback"
            try await browser.visit(url, stopAt: redirect)
        }
        let flow = AuthorizationCodeFlow(
            client: client, redirectURI: agent.redirectURI, userAgent: agent,
            idTokens: try validator(client.metadata))
        let tokens = try await flow.authorize(AuthorizationParameters(scopes: scopes))
        return (flow, tokens, browser)
    }

    @Test func fullCodePKCELoginWithAValidatedIDToken() async throws {
        let (flow, tokens, browser) = try await Self.login()
        #expect(!tokens.accessToken.isEmpty && tokens.refreshToken != nil && tokens.tokenType == "Bearer")
        let idToken = try #require(tokens.idToken)
        let claims = try await flow.idTokens!.validate(idToken, nonce: nil)
        #expect(claims.issuer == TestIdP.issuer && claims.audience == ["moose-cli"])
        // The browser went through the provider's login form, then back to our loopback receiver.
        let paths = await browser.visited.map(\.path)
        // (URL.path drops a trailing slash on Linux.)
        #expect(paths.contains { $0.hasPrefix("/accounts/login") } && paths.last == "/callback")
        // The authorization request carried PKCE S256, state and nonce.
        let authorize = try #require(await browser.visited.first)
        let query = authorize.query ?? ""
        for name in [
            "code_challenge_method=S256", "code_challenge=", "state=", "nonce=", "redirect_uri=http://127.0.0.1:"
        ] {
            #expect(query.contains(name), "authorization request lacks \(name)")
        }
    }

    @Test func refreshRotatesAndTheOldRefreshTokenIsThenRejected() async throws {
        let (flow, first, _) = try await Self.login()
        let second = try await flow.refresh(first)
        #expect(second.refreshToken != nil && second.refreshToken != first.refreshToken)
        #expect(second.accessToken != first.accessToken)
        let third = try await flow.refresh(second)
        #expect(third.refreshToken != second.refreshToken)
        do {
            _ = try await flow.refresh(first)
            Issue.record("a rotated-away refresh token still worked")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.invalidGrant, "\(error)")
        }
    }

    @Test func logoutRevokesAndBuildsTheEndSessionURL() async throws {
        let (flow, tokens, _) = try await Self.login()
        let result = try await flow.logout(tokens)
        #expect(result.refreshTokenRevoked == true && result.accessTokenRevoked == true)
        let endSession = try #require(result.endSessionURL)
        #expect(endSession.path.hasPrefix("/logout") && (endSession.query ?? "").contains("id_token_hint="))
        do {
            _ = try await flow.refresh(tokens)
            Issue.record("a revoked refresh token still worked")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.invalidGrant, "\(error)")
        }
    }

    @Test func wrongStateIsRefusedBeforeTheCodeIsUsed() async throws {
        let client = try await TestIdP.client("moose-cli")
        let receiver = try LoopbackReceiver()
        let flow = AuthorizationCodeFlow(
            client: client, redirectURI: receiver.redirectURI,
            userAgent: try LoopbackUserAgent { _ in }, idTokens: try Self.validator(client.metadata))
        let request = try flow.makeRequest(AuthorizationParameters())
        // With the provider's own iss (it promises one, RFC 9207): the state check is what refuses these.
        let iss = "&iss=" + (client.metadata.issuer.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let forged = URL(string: "\(receiver.redirectURI.absoluteString)?code=stolen&state=\(request.state)x\(iss)")!
        do {
            _ = try await flow.complete(request, callback: forged)
            Issue.record("a wrong state was accepted")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.stateMismatch)
        }
        let denied = URL(
            string: "\(receiver.redirectURI.absoluteString)?error=access_denied&state=\(request.state)\(iss)")!
        do {
            _ = try await flow.complete(request, callback: denied)
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.accessDenied && error.oauthError == "access_denied")
        }
    }
}

struct UserInfoAndClientAuthTests {
    @Test func userInfoWithTheSubjectCheck() async throws {
        let (_, tokens, _) = try await LoginIntegrationTests.login()
        let client = try await TestIdP.client("moose-cli")
        let subject = try JWT(compact: try #require(tokens.idToken)).claims.subject
        let info = try await client.userInfo(accessToken: tokens.accessToken, expectedSubject: subject)
        #expect(info["sub"]?.stringValue == subject)
        do {
            _ = try await client.userInfo(accessToken: tokens.accessToken, expectedSubject: "someone-else")
            Issue.record("a different sub was accepted")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.subjectMismatch)
        }
    }

    @Test func clockSkewFromTheDateHeader() throws {
        let ahead = APIResponse(status: 200, headerFields: [.date: HTTPDate.format(Date().addingTimeInterval(600))])
        let skew = try #require(ClockSkew(response: ahead))
        #expect(abs(skew.offset - 600) < 2 && skew.isSignificant(leeway: 60))
        #expect(ClockSkew(response: APIResponse(status: 200)) == nil)
    }

    @Test func clientSecretBasicFormEncodesIdAndSecret() throws {
        // RFC 6749 §2.3.1: id and secret are form-encoded before "id:secret" is base64-encoded.
        let endpoint = TokenEndpoint(
            url: URL(string: "https://id.example.com/token")!, clientID: "my client:1",
            authentication: .clientSecretBasic("p@ss wörd+/="), transport: TestIdP.transport)
        let request = try endpoint.authenticatedRequest(
            url: endpoint.url, parameters: [("grant_type", "client_credentials")])
        let header = try #require(request.headerFields[.authorization])
        #expect(header.hasPrefix("Basic "))
        let decoded = String(decoding: try #require(Data(base64Encoded: String(header.dropFirst(6)))), as: UTF8.self)
        #expect(decoded == "my+client%3A1:p%40ss+w%C3%B6rd%2B%2F%3D")
        #expect(String(decoding: request.body ?? Data(), as: UTF8.self) == "grant_type=client_credentials")
    }

    @Test func privateKeyJWTAssertion() throws {
        let key = try JWTKey(privateKey: .generate(.es256Curve), keyID: "k")
        let endpoint = TokenEndpoint(
            url: URL(string: "https://id.example.com/token")!, clientID: "svc",
            authentication: .privateKeyJWT(key, .es256), transport: TestIdP.transport)
        let request = try endpoint.authenticatedRequest(
            url: endpoint.url, parameters: [("grant_type", "client_credentials")])
        let form = String(decoding: request.body ?? Data(), as: UTF8.self)
        #expect(form.contains("client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"))
        let assertion = try #require(
            form.split(separator: "&").first { $0.hasPrefix("client_assertion=") }?.dropFirst(17))
        let jwt = try JWTVerifier(
            keys: [key], allowedAlgorithms: [.es256],
            validation: ClaimValidation(
                issuer: "svc", audiences: ["https://id.example.com/token"],
                requiredClaims: ["jti", "exp", "sub"])
        ).verify(String(assertion))
        #expect(jwt.claims.subject == "svc")
        #expect(request.headerFields[.authorization] == nil)
    }

    @Test func confidentialClientLogsInWithClientSecretBasic() async throws {
        let client = try await TestIdP.client("moose-confidential", .clientSecretBasic("moose-confidential-secret"))
        let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: TestIdP.transport)
        let agent = try LoopbackUserAgent(timeout: 30) { url in
            let redirect =
                URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?
                .first { $0.name == "redirect_uri" }?.value ?? ""
            try await browser.visit(url, stopAt: redirect)
        }
        let flow = AuthorizationCodeFlow(
            client: client, redirectURI: agent.redirectURI, userAgent: agent,
            idTokens: try LoginIntegrationTests.validator(client.metadata, clientID: "moose-confidential"))
        let tokens = try await flow.authorize(AuthorizationParameters(scopes: ["openid"]))
        #expect(tokens.idToken != nil && tokens.refreshToken != nil)
    }
}

extension PrivateKey.GenerationSpec {
    static var es256Curve: PrivateKey.GenerationSpec { .ec(.p256) }
}
