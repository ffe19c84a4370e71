import Foundation
import MooseOAuth
import MooseOAuthSystem
import MooseSQLiteStorage
import MooseHTTP
import MooseJWT
import MooseSecretStore
import MooseTestSupport
import MooseURLSession
import Testing

/// RFC 7591 registration and RFC 8707 resources against Glewlwyd 2.7.5 (tools/glewlwyd): the real
/// server's answers, the real store.
@Suite(.serialized)
struct GlewlwydResourceTests {
    static func signingIn(port: UInt16) throws -> LoopbackUserAgent {
        try LoopbackUserAgent(port: port, timeout: 60) { url in
            // The REST login blocks until the redirect is delivered: off the cooperative pool.
            try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
                DispatchQueue.global().async { done.resume(with: Result { try Glewlwyd.signIn(url) }) }
            }
        }
    }

    static func validator(_ metadata: ProviderMetadata, _ clientID: String, _ transport: any HTTPTransport) throws
        -> IDTokenValidator
    {
        IDTokenValidator(
            issuer: metadata.issuer, clientID: clientID,
            jwks: JWKSCache(url: try #require(metadata.jwksURI), transport: transport),
            algorithms: [.rs256, .es256, .eddsa])
    }

    /// Registers a client (RFC 7591), logs in with it, keeps the registration sealed with the session
    /// in the encrypted store, and uses what comes back out: RFC 7592 read with the registration
    /// access token, a refresh as that client.
    @Test func dynamicRegistrationIsSealedInTheStoreAndUsable() async throws {
        // Glewlwyd has one user and one registered loopback port: tests take turns.
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = URLSessionTransport()
            let metadata = try await Discovery(transport: transport).metadata(for: issuer)
            try metadata.requireS256()
            // Below Linux's ephemeral range (32768–60999): an outgoing loopback connection of another
            // test can hold a port inside it, and the listener then cannot bind (seen under load).
            let port: UInt16 = 28684
            // Glewlwyd stores "none" as a confidential client without a secret unless told otherwise (its README).
            let request = ClientRegistrationRequest(
                clientName: "moose-test-\(UUID().uuidString.prefix(8))",
                redirectURIs: ["http://127.0.0.1:\(port)/callback"],
                extra: [("client_confidential", false)])
            let registered = try await ClientRegistration.register(request, with: metadata, transport: transport)
            let accessToken = try #require(registered.registrationAccessToken)
            #expect(registered.registrationClientURI != nil && !registered.description.contains(accessToken))

            let client = OAuthClient(
                metadata: metadata, clientID: registered.clientID, authentication: registered.authentication,
                transport: transport)
            let agent = try Self.signingIn(port: port)
            let flow = AuthorizationCodeFlow(
                client: client, redirectURI: agent.redirectURI, userAgent: agent,
                idTokens: try Self.validator(metadata, registered.clientID, transport))
            let tokens = try await flow.authorize(AuthorizationParameters(scopes: ["openid", "offline_access"]))

            let home = FileManager.default.temporaryDirectory.appendingPathComponent(
                "moose-registration-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: home) }
            let path = home.appendingPathComponent("store.sqlite").path
            let storage = EncryptedSessionStorage(
                store: try SecretStore(path: path, masterKey: .keyFile(home.appendingPathComponent("key").path)))
            try await storage.replace(
                OAuthSession(
                    issuer: metadata.issuer, clientID: registered.clientID, tokens: tokens, registration: registered),
                key: "registered")
            let files = try FileManager.default.contentsOfDirectory(atPath: home.path).filter {
                $0.hasPrefix("store.sqlite")
            }
            for file in files {
                let bytes = try Data(contentsOf: home.appendingPathComponent(file))
                #expect(
                    bytes.range(of: Data(accessToken.utf8)) == nil,
                    "the registration access token is sealed, not in \(file)")
            }

            let kept = try #require(try await storage.load("registered")?.session.registration)
            #expect(kept == registered)
            var read = APIRequest(url: try #require(kept.registrationClientURI))
            read.headerFields[.authorization] = "Bearer \(try #require(kept.registrationAccessToken))"
            let answer = try await transport.send(read)
            #expect(answer.status.code == 200, "RFC 7592 read with the kept registration access token")
            #expect(try JSONValue(parsing: Array(answer.body))["client_id"]?.stringValue == registered.clientID)
            let fresh = try await OAuthClient(
                metadata: metadata, clientID: kept.clientID, authentication: kept.authentication, transport: transport
            )
            .refresh(tokens)
            #expect(fresh.refreshToken != nil && !fresh.accessToken.utf8.elementsEqual(tokens.accessToken.utf8))
        }
    }

    /// The resource goes on the authorization, code and refresh requests (the access token's `aud`
    /// is the resource); asking the same refresh token for another resource is refused by this server
    /// (`invalid_target`: it binds refresh tokens to one resource) — and costs nothing: the refresh
    /// token still works.
    @Test func refreshNamesTheResourceAndAnotherResourceIsRefusedWithoutLoss() async throws {
        // Glewlwyd has one user and one registered loopback port: tests take turns.
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = URLSessionTransport()
            let metadata = try await Discovery(transport: transport).metadata(for: issuer)
            var client = OAuthClient(metadata: metadata, clientID: "moose-public", transport: transport)
            client.resource = "https://api.moose.test"
            let agent = try Self.signingIn(port: 53683)
            let flow = AuthorizationCodeFlow(
                client: client, redirectURI: agent.redirectURI, userAgent: agent,
                idTokens: try Self.validator(metadata, "moose-public", transport))
            let tokens = try await flow.authorize(
                AuthorizationParameters(scopes: ["openid", "api.read", "offline_access"]))
            #expect(tokens.resource == "https://api.moose.test")
            #expect(try JWT(compact: tokens.accessToken).claims.audience == ["https://api.moose.test"])
            let fresh = try await client.refresh(tokens)
            let audience = try JWT(compact: fresh.accessToken).claims.audience
            #expect(fresh.resource == "https://api.moose.test" && audience == ["https://api.moose.test"])
            do {
                _ = try await client.refresh(fresh, forResource: "https://other.moose.test")
                Issue.record("Glewlwyd minted a token for another resource")
            } catch let error as OAuthError {
                #expect(error.code == OAuthError.server && error.oauthError == "invalid_target")
            }
            let again = try await client.refresh(fresh)
            #expect(again.resource == "https://api.moose.test", "the refused request spent nothing")
        }
    }
}
