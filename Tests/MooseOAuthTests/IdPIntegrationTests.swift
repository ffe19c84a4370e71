import Foundation
import MooseHTTP
import MooseOAuth
import MooseURLSession
import Testing

/// Against the real provider (tools/idp).
struct DiscoveryIntegrationTests {
    @Test func discoversAndMergesTheRFC8414Document() async throws {
        let metadata = try await TestIdP.metadata()
        #expect(metadata.issuer == TestIdP.issuer)
        #expect(metadata.tokenEndpoint?.absoluteString == TestIdP.issuer + "/token/")
        #expect(metadata.jwksURI != nil && metadata.endSessionEndpoint != nil)
        // Listed only in /.well-known/oauth-authorization-server by this provider:
        #expect(metadata.revocationEndpoint?.absoluteString == TestIdP.issuer + "/revoke_token/")
        #expect(metadata.introspectionEndpoint != nil)
        // Listed nowhere: configured by hand next to the discovered ones.
        #expect(metadata.deviceAuthorizationEndpoint == nil)
        let configured = try await TestIdP.discovery.metadata(
            for: TestIdP.issuer,
            overrides: EndpointOverrides(
                deviceAuthorizationEndpoint: URL(string: TestIdP.issuer + "/device-authorization/")))
        #expect(configured.deviceAuthorizationEndpoint != nil && configured.tokenEndpoint == metadata.tokenEndpoint)
    }

    @Test func anIssuerWhoseDocumentNamesAnotherIsRefused() async throws {
        // Same server under another name: its document says 127.0.0.1, we asked for localhost.
        let other = TestIdP.issuer.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        do {
            _ = try await Discovery.fetch(issuer: other, transport: TestIdP.transport)
            Issue.record("a mismatched issuer was accepted")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.issuerMismatch, "\(error)")
        }
        // A trailing slash is another issuer too.
        await #expect(throws: OAuthError.self) {
            _ = try await Discovery.fetch(issuer: TestIdP.issuer + "/", transport: TestIdP.transport)
        }
    }
}

struct ClientCredentialsIntegrationTests {
    @Test(arguments: ["basic", "post"])
    func clientCredentialsGrant(method: String) async throws {
        let authentication: ClientAuthentication =
            method == "basic"
            ? .clientSecretBasic("moose-service-secret")
            : .clientSecretPost("moose-service-secret")
        let flow = ClientCredentialsFlow(client: try await TestIdP.client("moose-service", authentication))
        let before = Date()
        let tokens = try await flow.authorize(AuthorizationParameters(scopes: ["read"]))
        #expect(tokens.tokenType == "Bearer" && tokens.scopes == ["read"])
        let expiresAt = try #require(tokens.expiresAt)
        #expect(expiresAt > before && expiresAt <= Date().addingTimeInterval(3600))
        #expect(!tokens.accessToken.isEmpty && tokens.refreshToken == nil)
    }

    @Test func wrongSecretIsInvalidClient() async throws {
        let flow = ClientCredentialsFlow(client: try await TestIdP.client("moose-service", .clientSecretBasic("wrong")))
        do {
            _ = try await flow.authorize(AuthorizationParameters(scopes: ["read"]))
            Issue.record("a wrong secret was accepted")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.invalidClient, "\(error)")
        }
    }

    /// Issue "The second hour" §5: `openid` alone on a client credentials grant is refused with the
    /// reason before anything is sent — never sent as no scope, whose refusal read as a bad secret.
    @Test func clientCredentialsAskingOnlyForOpenIDIsRefusedWithTheReason() async throws {
        let spy = TokenEndpointSpy(TestIdP.transport)
        let client = OAuthClient(
            metadata: try await TestIdP.metadata(), clientID: "moose-service",
            authentication: .clientSecretBasic("moose-service-secret"), transport: spy)
        await #expect {
            _ = try await ClientCredentialsFlow(client: client).authorize(AuthorizationParameters(scopes: ["openid"]))
        } throws: { error in
            (error as? OAuthError)?.code == OAuthError.invalidConfiguration && "\(error)".contains("issues no ID token")
        }
        #expect(spy.tokenCalls == 0, "the grant was sent")
        // With the API's scope beside it, openid is left out and the grant goes through.
        let tokens = try await ClientCredentialsFlow(client: client).authorize(
            AuthorizationParameters(scopes: ["openid", "read"]))
        #expect(tokens.scopes == ["read"])
    }

    /// Issue "The second hour" §2: a provider without RFC 8693 (django-oauth-toolkit) is said not to
    /// offer token exchange — not asked whether the issuer is trusted.
    @Test func aProviderWithoutTokenExchangeIsSaidNotToOfferIt() async throws {
        let client = try await TestIdP.client("moose-service", .clientSecretBasic("moose-service-secret"))
        let flow = TokenExchangeFlow(client: client) {
            ExchangeToken("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.sig", type: ExchangeToken.jwtType)
        }
        await #expect { _ = try await flow.authorize(AuthorizationParameters(scopes: ["read"])) } throws: { error in
            let text = "\(error)"
            return (error as? OAuthError)?.code == OAuthError.invalidConfiguration
                && text.contains("does not offer token exchange")
                && !text.contains("trusted")
        }
        let workload = WorkloadGrant(
            identity: WorkloadIdentity(name: "a test source") { _ in "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.sig" })
        await #expect { _ = try await workload.tokens(client: client, scopes: ["read"]) } throws: { error in
            "\(error)".contains("does not offer token exchange") && !"\(error)".contains("trusted")
        }
    }

    /// A revocation refused names the revocation endpoint, not the token endpoint.
    @Test func aRefusedRevocationNamesTheRevocationEndpoint() async throws {
        let client = try await TestIdP.client("moose-service", .clientSecretBasic("wrong"))
        await #expect { try await client.revoke("not-a-token", hint: "access_token") } throws: { error in
            let text = "\(error)"
            return (error as? OAuthError)?.code == OAuthError.invalidClient && text.contains("the revocation endpoint")
                && !text.contains("token endpoint")
        }
    }

    @Test func revokedTokenIsInactiveAtIntrospection() async throws {
        let client = try await TestIdP.client("moose-service", .clientSecretBasic("moose-service-secret"))
        let tokens = try await ClientCredentialsFlow(client: client).authorize(
            AuthorizationParameters(scopes: ["read"]))
        #expect(try await introspect(tokens.accessToken, client: client) == true)
        let result = await client.logout(tokens)
        #expect(result.accessTokenRevoked == true && result.revocationError == nil)
        #expect(try await introspect(tokens.accessToken, client: client) == false)
    }

    func introspect(_ token: String, client: OAuthClient) async throws -> Bool {
        let url = try #require(client.metadata.introspectionEndpoint)
        var request = APIRequest(method: .post, url: url, body: Data("token=\(token)".utf8))
        request.headerFields[.contentType] = MIMEType.formURLEncoded.value
        request.headerFields[.authorization] = AuthScheme.basic.credentials(
            Data("moose-service:moose-service-secret".utf8).base64EncodedString())
        let response = try await TestIdP.transport.send(request)
        let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return object?["active"] as? Bool ?? false
    }
}
