import Foundation
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseOAuthSystem
import MooseTestSupport
import Testing

/// MooseTesting's `TestProvider`, in process, driven by Moose's own managers and flows: what an app's
/// tests of sign-in, renewal and failure would do with it. Time is a `TestClock` shared by the
/// provider and the manager; nothing here opens a socket except the loopback login.
@Suite("TestProvider, in process")
struct TestProviderTests {
    let clock = TestClock(now: Date(timeIntervalSince1970: 1_800_000_000))

    func provider(_ configuration: TestProvider.Configuration = TestProvider.Configuration()) -> TestProvider {
        TestProvider(configuration: configuration, clock: clock.read)
    }

    func manager(
        _ provider: TestProvider, clientID: String = TestProvider.Client.defaultPublic.id,
        authentication: ClientAuthentication = .none, storage: any SessionStorage = InMemorySessionStorage(),
        scopes: [String] = ["openid", "profile", "offline_access"], dpop: JWTAlgorithm? = nil,
        transientAttempts: Int = 3
    ) -> TokenManager {
        var configuration = RefreshCoordinator.Configuration()
        configuration.transientAttempts = transientAttempts
        configuration.clock = clock.read
        // Waits (backoffs, lease renewals) end when the test moves the clock, never by real time passing.
        configuration.sleep = clock.sleep(for:)
        return TokenManager(
            issuer: provider.issuer, clientID: clientID, authentication: authentication, storage: storage,
            transport: provider, scopes: scopes, dpop: dpop, configuration: configuration)
    }

    /// Runs `body` while the test clock moves a second every 5 ms of real time, so the waits it makes
    /// (a retry's backoff, a `Retry-After`) end.
    func ticking<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        let ticker = Task { [clock] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 5_000_000)
                clock.advance(by: 1)
            }
        }
        defer { ticker.cancel() }
        return try await body()
    }

    func signIn(_ manager: TokenManager, _ provider: TestProvider) async throws -> SessionSummary {
        try await manager.login(with: .userAgent(provider.browser, redirectURI: TestProvider.Client.defaultRedirect))
    }

    @Test("a browser login: PKCE S256, state, iss and nonce checked; an RFC 9068 access token the JWKS verifies")
    func browserLogin() async throws {
        let provider = provider()
        let manager = manager(provider)
        let summary = try await signIn(manager, provider)
        #expect(summary.subject == "alice" && summary.email == "alice@example.com")
        // PAR is advertised, so the request is pushed (RFC 9126) and the browser carries its request_uri only.
        let authorization = try #require(provider.requests(to: .pushedAuthorization).first)
        #expect(authorization.field("code_challenge_method") == "S256" && authorization.field("nonce") != nil)
        let exchange = try #require(provider.requests(to: .token).first)
        #expect(exchange.grantType == "authorization_code" && exchange.field("code_verifier") != nil)

        let token = try await manager.accessToken()
        let keys = try JWKS(json: provider.jwks).keys.map { try $0.verificationKey() }
        let verifier = JWTVerifier(
            keys: keys, allowedAlgorithms: [.rs256],
            validation: ClaimValidation(
                issuer: provider.issuer, audiences: ["test-app"], clock: clock.read), expectedType: "at+jwt")
        let jwt = try verifier.verify(token.value)
        #expect(jwt.claims.subject == "alice" && jwt.claims["client_id"]?.stringValue == "test-app")
    }

    @Test("one refresh for 50 callers across an expiry; the refresh token rotates and the old one is spent")
    func renewsAcrossExpiry() async throws {
        let provider = provider()
        let manager = manager(provider)
        _ = try await signIn(manager, provider)
        let first = try await manager.accessToken()
        clock.advance(by: 3600)
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 { group.addTask { try await manager.accessToken().value } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1 && !tokens.contains(first.value))
        #expect(provider.requests(to: .refresh).count == 1)
        let issued = provider.refreshTokens
        #expect(issued.count == 2 && issued[0].spent && !issued[1].spent && !issued[1].revoked)
    }

    @Test("a spent refresh token presented again revokes the family; the app is told to sign in")
    func reuseRevokesTheFamily() async throws {
        let provider = provider()
        let manager = manager(provider)
        _ = try await signIn(manager, provider)
        let original = try #require(provider.refreshTokens.first).token
        _ = try await manager.refreshNow()
        // An attacker replays the rotated token.
        let replay = try await provider.send(
            APIRequest(
                method: .post, url: URL(string: provider.url(of: .token))!,
                headerFields: [.contentType: "application/x-www-form-urlencoded"],
                body: Data(
                    RequestBuilder.encodeForm([
                        ("grant_type", "refresh_token"), ("refresh_token", original), ("client_id", "test-app")
                    ]).utf8)))
        #expect(replay.status.code == 400 && String(decoding: replay.body, as: UTF8.self).contains("invalid_grant"))
        #expect(provider.refreshTokens.allSatisfy { $0.revoked })
        clock.advance(by: 3600)
        let error = await #expect(throws: OAuthError.self) { try await manager.accessToken() }
        #expect(error?.errorClass == .needsLogin)
    }

    @Test("a grace window answers a spent refresh token presented again in time, and revokes nothing")
    func graceWindow() async throws {
        var configuration = TestProvider.Configuration()
        configuration.reuseGraceWindow = 30
        let provider = provider(configuration)
        let client = try await OAuthClient(
            metadata: Discovery(transport: provider).metadata(for: provider.issuer), clientID: "test-confidential",
            authentication: .clientSecretBasic("test-secret"), transport: provider)
        let manager = manager(
            provider, clientID: "test-confidential", authentication: .clientSecretBasic("test-secret"))
        _ = try await signIn(manager, provider)
        let original = try #require(provider.refreshTokens.first).token
        _ = try await manager.refreshNow()
        clock.advance(by: 10)
        _ = try await client.refresh(TokenSet(accessToken: "x", refreshToken: original))
        #expect(!provider.refreshTokens.contains { $0.revoked })
        clock.advance(by: 30)
        await #expect(throws: OAuthError.self) {
            _ = try await client.refresh(TokenSet(accessToken: "x", refreshToken: original))
        }
        #expect(provider.refreshTokens.allSatisfy { $0.revoked })
    }

    @Test("each scripted fault reaches the app as its documented class, and no fault logs the user out")
    func faultsHaveTheirClass() async throws {
        let provider = provider()
        let storage = InMemorySessionStorage()
        let manager = manager(provider, storage: storage)
        _ = try await signIn(manager, provider)
        let cases: [(TestProvider.Fault, OAuthError.Class)] = [
            (.status(500), .retryable), (.htmlPage(502), .retryable), (.tooManyRequests(retryAfter: 1), .retryable),
            (.dropConnection, .retryable), (.status(400), .needsLogin),
            (.oauthError("invalid_grant", status: 400), .needsLogin)
        ]
        for (fault, expected) in cases {
            provider.inject(fault, at: .refresh, count: .max)
            let error = await #expect(throws: OAuthError.self, "\(fault)") {
                try await ticking { try await manager.refreshNow() }
            }
            #expect(error?.errorClass == expected, "\(fault): \(error?.code.description ?? "none")")
            provider.clearFaults()
            clock.advance(by: 31) // past the coordinator's refresh-loop window (5 futile refreshes in 30 s)
            if expected == .retryable {
                // An outage is not a logout: the session is there and renews once the provider is back.
                #expect(try await storage.load("default") != nil)
                _ = try await manager.refreshNow()
            }
        }
    }

    @Test("a provider outage keeps the user signed in and the token they have, until it expires")
    func outageKeepsTheSession() async throws {
        let provider = provider()
        let manager = manager(provider)
        _ = try await signIn(manager, provider)
        let token = try await manager.accessToken()
        provider.inject(.status(503), at: .token, count: .max)
        clock.advance(by: 3600 - 40) // inside the refresh margin: a refresh is tried and fails
        let still = try? await manager.accessToken(minimumValidity: 1)
        #expect(still?.value == token.value, "the valid token is served while the refresh fails")
        let summary = try #require(try await manager.summary())
        #expect(summary.subject == "alice")
        provider.clearFaults()
        clock.advance(by: 100)
        #expect(try await manager.accessToken().value != token.value)
    }

    @Test("a token response without refresh_token, an expires_in of 1 s or none")
    func shortAndMissingLifetimes() async throws {
        let provider = provider()
        let manager = manager(provider)
        provider.inject(.expiresIn(1), at: .token)
        _ = try await signIn(manager, provider)
        clock.advance(by: 2)
        _ = try await manager.accessToken()
        #expect(provider.requests(to: .refresh).count == 1, "a 1 s token is renewed once it lapses")
        provider.inject(.withoutRefreshToken, at: .refresh)
        clock.advance(by: 3600)
        _ = try await manager.accessToken()
        clock.advance(by: 3600)
        _ = try await manager.accessToken()
        #expect(provider.requests(to: .refresh).count == 3, "the refresh token is kept when none comes back")
        let presented = provider.requests(to: .refresh).map { $0.field("refresh_token") }
        #expect(presented[2] == presented[1], "the token a refresh did not replace is presented again, and answered")
    }

    @Test("the user denies consent, or closes the browser")
    func consent() async throws {
        let provider = provider()
        let manager = manager(provider)
        provider.consent = .deny
        let denied = await #expect(throws: OAuthError.self) { try await signIn(manager, provider) }
        #expect(denied?.code == OAuthError.accessDenied)
        provider.consent = .closeBrowser
        await #expect(throws: CancellationError.self) { try await signIn(manager, provider) }
        #expect(try await manager.summary() == nil)
    }

    @Test("a redirect URI that is not registered is never redirected to")
    func unregisteredRedirect() async throws {
        let provider = provider()
        let manager = manager(provider)
        let wrong = URL(string: "com.example.app:/oauth/callback2")!
        // Pushed (PAR is advertised): the PAR endpoint refuses it, and the error names that endpoint.
        let pushed = await #expect(throws: OAuthError.self) {
            try await manager.login(with: .userAgent(provider.browser, redirectURI: wrong))
        }
        #expect(pushed?.message.contains("the pushed authorization request endpoint refused") == true)
        #expect(pushed?.message.contains("redirect URI") == true, "a public client is told what may be wrong")
        // Not pushed: the provider shows an error page and never redirects.
        await #expect(throws: TestProvider.BrowserStopped.self) {
            try await manager.login(
                with: .userAgent(provider.browser, redirectURI: wrong), pushedAuthorization: .never)
        }
        #expect(provider.requests(to: .token).isEmpty)
    }

    @Test("the provider's error pages escape what they quote of a request")
    func errorPagesEscape() async throws {
        let provider = provider()
        let hostile = "<script>alert(1)</script>"
        let query = RequestBuilder.encodeForm([("client_id", "test-app"), (hostile, "1"), (hostile, "2")])
        let page = try await provider.send(
            APIRequest(url: URL(string: provider.url(of: .authorization) + "?" + query)!))
        let text = String(decoding: page.body, as: UTF8.self)
        #expect(page.status.code == 400 && text.contains("&lt;script&gt;") && !text.contains(hostile))
    }

    @Test("a loopback login: the provider redirects to the app's listener over a real connection")
    func loopbackLogin() async throws {
        let provider = TestProvider() // real time: the loopback listener waits in it
        let manager = TokenManager(
            issuer: provider.issuer, clientID: "test-app", storage: InMemorySessionStorage(), transport: provider)
        let summary = try await manager.login(with: .loopback(timeout: 20, open: provider.browser.open))
        #expect(summary.subject == "alice")
        let redirect = try #require(provider.requests(to: .pushedAuthorization).first?.field("redirect_uri"))
        #expect(redirect.hasPrefix("http://127.0.0.1:") && redirect.hasSuffix("/callback"))
    }

    @Test("PAR when the provider requires it; the device grant with slow_down and approval")
    func pushedAndDevice() async throws {
        var configuration = TestProvider.Configuration()
        configuration.requiresPushedAuthorization = true
        let provider = TestProvider(configuration: configuration)
        let manager = TokenManager(
            issuer: provider.issuer, clientID: "test-app", storage: InMemorySessionStorage(), transport: provider)
        try await manager.login(with: .userAgent(provider.browser, redirectURI: TestProvider.Client.defaultRedirect))
        #expect(provider.requests(to: .pushedAuthorization).count == 1)
        #expect(provider.requests(to: .authorization).first?.field("code_challenge") == nil, "only the request_uri")

        let device = TokenManager(
            issuer: provider.issuer, clientID: "test-app", storage: InMemorySessionStorage(), key: "device",
            transport: provider)
        let summary = try await device.login(
            with: .device { authorization in
                Task {
                    try await Task.sleep(nanoseconds: 1_200_000_000)
                    provider.enterUserCode(authorization.userCode)
                }
            })
        #expect(summary.subject == "alice")
        #expect(provider.requests(to: .token).filter { $0.grantType?.hasSuffix("device_code") == true }.count >= 1)
    }

    @Test("client credentials with a secret (Basic and post) and with private_key_jwt; a wrong secret is misconfigured")
    func clientCredentials() async throws {
        let provider = provider()
        let key = try PrivateKey.generate(.ec(.p256))
        let jwk = try JWK(publicKey: key.publicKey(), keyID: "k1", algorithm: .es256)
        provider.register(TestProvider.Client(id: "signer", authentication: .privateKeyJWT(jwk)))
        for (id, authentication) in [
            ("test-service", ClientAuthentication.clientSecretBasic("service-secret")),
            ("test-service", .clientSecretPost("service-secret")),
            ("signer", .privateKeyJWT(try JWTKey(privateKey: key, keyID: "k1"), .es256))
        ] {
            let manager = manager(provider, clientID: id, authentication: authentication, scopes: ["api"])
            try await manager.login(with: .clientCredentials)
            #expect(try await manager.accessToken().value.split(separator: ".").count == 3)
        }
        let wrong = manager(
            provider, clientID: "test-service", authentication: .clientSecretBasic("nope"), scopes: ["api"])
        let error = await #expect(throws: OAuthError.self) { try await wrong.login(with: .clientCredentials) }
        #expect(error?.errorClass == .misconfigured)
    }

    @Test("DPoP: a bound token (cnf.jkt) after the provider's nonce; refreshes stay bound")
    func dpop() async throws {
        var configuration = TestProvider.Configuration()
        configuration.requiresDPoPNonce = true
        let provider = provider(configuration)
        let manager = manager(provider, dpop: .es256)
        _ = try await signIn(manager, provider)
        let token = try await manager.accessToken()
        #expect(token.isDPoPBound)
        let claims = try JWT(compact: token.value).claims
        #expect(claims["cnf"]?.objectValue?["jkt"]?.stringValue == token.dpopKey?.thumbprint)
        clock.advance(by: 3600)
        #expect(try await manager.accessToken().isDPoPBound)
    }

    @Test("an administrator's revocation sends the app to the sign-in; UserInfo and introspection agree")
    func revokedSession() async throws {
        let provider = provider()
        let manager = manager(provider)
        _ = try await signIn(manager, provider)
        let token = try await manager.accessToken()
        let metadata = try await Discovery(transport: provider).metadata(for: provider.issuer)
        let client = OAuthClient(metadata: metadata, clientID: "test-app", transport: provider)
        let info = try await client.userInfo(token: token, expectedSubject: "alice")
        #expect(info["email"]?.stringValue == "alice@example.com")
        provider.revokeSessions()
        await #expect(throws: (any Error).self) {
            _ = try await client.userInfo(token: token, expectedSubject: "alice")
        }
        clock.advance(by: 3600)
        let error = await #expect(throws: OAuthError.self) { try await manager.accessToken() }
        #expect(error?.errorClass == .needsLogin)
    }

    @Test("the keys rotate: a new kid is fetched for the next ID token; a withdrawn key leaves the JWKS")
    func keyRotation() async throws {
        let provider = provider()
        let before = provider.publishedKeyIDs
        let manager = manager(provider)
        _ = try await signIn(manager, provider)
        provider.rotateKeys()
        #expect(provider.publishedKeyIDs.count == 2)
        clock.advance(by: 3600)
        _ = try await manager.accessToken() // the refresh's ID token is signed with the new kid
        _ = try await signIn(manager, provider)
        provider.withdrawKeys()
        #expect(provider.publishedKeyIDs.count == 1 && !before.contains(provider.publishedKeyIDs[0]))
        #expect(provider.requests(to: .jwks).count >= 2, "the new kid was fetched")
    }

    @Test("discovery naming another issuer is refused; registration (RFC 7591) makes a client that logs in")
    func discoveryAndRegistration() async throws {
        let provider = provider()
        provider.inject(.discoveryIssuer("https://evil.example"), at: .openIDConfiguration)
        let error = await #expect(throws: OAuthError.self) {
            _ = try await Discovery(transport: provider).metadata(for: provider.issuer)
        }
        #expect(error?.code == OAuthError.issuerMismatch)
        let metadata = try await Discovery(transport: provider).metadata(for: provider.issuer)
        let registered = try await ClientRegistration.register(
            ClientRegistrationRequest(redirectURIs: [TestProvider.Client.defaultRedirect.absoluteString]),
            with: metadata, transport: provider)
        let manager = manager(provider, clientID: registered.clientID)
        _ = try await signIn(manager, provider)
    }
}
