import Foundation
@testable import MooseOAuth
import MooseHTTP
import HTTPTypes
import MooseJWT
import MooseTestSupport
import Synchronization
import Testing

/// RFC 9728 metadata, resource challenges, path-aware discovery, RFC 7591 registration responses,
/// the S256 rule and the resource parameter — against scripted servers (every byte hostile).
struct ProtectedResourceTests {
    static let resource = "https://mcp.example.com/mcp"

    static func prm(_ json: String, expected: [String] = [resource]) throws -> ProtectedResourceMetadata {
        try ProtectedResourceMetadata.parse(Array(json.utf8), expected: expected)
    }

    static func code(_ body: () throws -> Any) -> OAuthError.Code? {
        do { _ = try body(); return nil } catch { return (error as? OAuthError)?.code }
    }

    static func message(_ body: () throws -> Any) -> String {
        do { _ = try body(); return "" } catch { return (error as? OAuthError)?.message ?? "\(error)" }
    }

    // MARK: - RFC 9728 documents

    @Test func protectedResourceMetadataIsReadAndItsResourceComparedExactly() throws {
        let metadata = try Self.prm(
            #"{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://as.example.com","http://127.0.0.1:9"],"scopes_supported":["mcp:tools","files:read"],"bearer_methods_supported":["header"],"resource_name":"Example"}"#
        )
        #expect(metadata.authorizationServers == ["https://as.example.com", "http://127.0.0.1:9"])
        #expect(metadata.scopesSupported == ["mcp:tools", "files:read"] && metadata.resourceName == "Example")
        // Another resource — a trailing slash, another host, the NFD spelling of the same text — is refused.
        for other in ["https://mcp.example.com/mcp/", "https://evil.example/mcp", "https://mcp.example.com/cafe\u{301}"]
        {
            let json = #"{"resource":"\#(other)","authorization_servers":["https://as.example.com"]}"#
            #expect(Self.code { try Self.prm(json) } == OAuthError.issuerMismatch, "\(other)")
        }
        let nfc = "https://mcp.example.com/caf\u{E9}"
        #expect(
            Self.code {
                try Self.prm(
                    #"{"resource":"https://mcp.example.com/cafe\#u{301}","authorization_servers":["https://a.example"]}"#,
                    expected: [nfc])
            } == OAuthError.issuerMismatch, "NFD is not NFC: byte for byte")
    }

    @Test func hostileProtectedResourceDocumentsAreRefusedWithAReason() throws {
        let cases: [(String, OAuthError.Code, String)] = [
            (#"[1]"#, OAuthError.discovery, "not a JSON object"),
            (#"{"authorization_servers":["https://a.example"]}"#, OAuthError.discovery, "lacks resource"),
            (#"{"resource":"https://mcp.example.com/mcp"}"#, OAuthError.discovery, "lacks authorization_servers"),
            (
                #"{"resource":"https://mcp.example.com/mcp","authorization_servers":[]}"#, OAuthError.discovery,
                "lacks authorization_servers"
            ),
            (
                #"{"resource":"https://mcp.example.com/mcp","authorization_servers":["http://as.example.com"]}"#,
                OAuthError.insecureEndpoint, "not https"
            ),
            (
                #"{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://a.example?x=1"]}"#,
                OAuthError.discovery, "issuer URL"
            ),
            (
                #"{"resource":"https://mcp.example.com/mcp","authorization_servers":[42]}"#, OAuthError.discovery,
                "issuer URL"
            ),
            (
                #"{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://a.example"],"scopes_supported":["a b"]}"#,
                OAuthError.discovery, "scope-token"
            ),
            (
                #"{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://a.example"],"scopes_supported":"mcp"}"#,
                OAuthError.discovery, "scopes_supported"
            )
        ]
        for (json, expected, words) in cases {
            #expect(Self.code { try Self.prm(json) } == expected, "\(json)")
            #expect(Self.message { try Self.prm(json) }.contains(words), "\(json)")
        }
        let servers = (0..<33).map { "\"https://a\($0).example\"" }.joined(separator: ",")
        #expect(
            Self.code {
                try Self.prm(#"{"resource":"https://mcp.example.com/mcp","authorization_servers":[\#(servers)]}"#)
            } == OAuthError.discovery)
        let huge =
            #"{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://a.example"],"x":""#
            + String(repeating: "a", count: 70_000) + "\"}"
        #expect(Self.message { try Self.prm(huge) }.contains("64 KiB"))
    }

    @Test func challengesGiveTheErrorScopesAndOnlySafeMetadataURLs() throws {
        let header =
            #"Bearer error="insufficient_scope", scope="mcp:tools mcp:admin", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp""#
        let challenge = try #require(ResourceChallenge.parse([header]))
        #expect(challenge.error == "insufficient_scope" && challenge.scopes == ["mcp:tools", "mcp:admin"])
        #expect(
            challenge.resourceMetadata?.absoluteString
                == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        // Plain http to another machine, a bad scope and a fragment are dropped; Basic alone is no challenge.
        let hostile = try #require(
            ResourceChallenge.parse([
                #"Basic realm="x", Bearer scope="ok b\"ad", resource_metadata="http://evil.example/prm""#
            ]))
        #expect(hostile.resourceMetadata == nil && hostile.scopes == ["ok"])
        #expect(ResourceChallenge.parse([#"Basic realm="x""#]) == nil)
        #expect(ResourceChallenge.parse([#"DPoP error="invalid_token""#])?.error == "invalid_token")
        #expect(
            ResourceChallenge.parse(headers: ["www-authenticate": #"Bearer error="invalid_token""#])?.error
                == "invalid_token")
        #expect(ResourceChallenge.parse(headers: ["Content-Type": "text/plain"]) == nil)
    }

    @Test func resourceIdentifiersAndTheirMetadataURLs() throws {
        #expect(try ResourceIdentifier.canonical("HTTPS://MCP.Example.COM/Mcp") == "https://mcp.example.com/Mcp")
        #expect(try ResourceIdentifier.canonical("https://mcp.example.com/") == "https://mcp.example.com")
        #expect(throws: OAuthError.self) { try ResourceIdentifier.canonical("https://mcp.example.com/mcp#frag") }
        #expect(throws: OAuthError.self) { try ResourceIdentifier.canonical("http://mcp.example.com/mcp") }
        #expect(throws: OAuthError.self) { try ResourceIdentifier.canonical("mcp.example.com") }
        #expect(try ResourceIdentifier.canonical("http://127.0.0.1:8931/mcp") == "http://127.0.0.1:8931/mcp")
        #expect(
            ResourceIdentifier.metadataURLs(for: "https://mcp.example.com/tenant/mcp").map(\.absoluteString)
                == [
                    "https://mcp.example.com/.well-known/oauth-protected-resource/tenant/mcp",
                    "https://mcp.example.com/.well-known/oauth-protected-resource"
                ])
        #expect(
            ResourceIdentifier.metadataURLs(for: "https://mcp.example.com").map(\.absoluteString)
                == ["https://mcp.example.com/.well-known/oauth-protected-resource"])
    }

    // MARK: - Discovery order

    static let asDocument =
        #"{"issuer":"ISSUER","authorization_endpoint":"https://as.example.com/authorize","token_endpoint":"https://as.example.com/token","response_types_supported":["code"],"code_challenge_methods_supported":["S256"]}"#
    static let oidcDocument =
        #"{"issuer":"ISSUER","authorization_endpoint":"https://as.example.com/authorize","token_endpoint":"https://as.example.com/token","jwks_uri":"https://as.example.com/jwks","response_types_supported":["code"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["RS256"]}"#

    /// A transport answering `documents` by path (404 otherwise), recording the paths asked.
    static func documents(_ documents: [String: String]) -> ScriptedTransport {
        ScriptedTransport { request in
            let path = request.url?.path ?? ""
            if let body = documents[path] { return .json(body) }
            return APIResponse(status: .notFound)
        }
    }

    @Test func authorizationServerDiscoveryTriesTheMCPOrderForIssuersWithAPath() async throws {
        let issuer = "https://as.example.com/tenant1"
        let transport = Self.documents([
            "/tenant1/.well-known/openid-configuration": Self.oidcDocument.replacingOccurrences(
                of: "ISSUER", with: issuer)
        ])
        let metadata = try await Discovery.fetch(issuer: issuer, transport: transport)
        #expect(metadata.issuer == issuer && metadata.jwksURI != nil)
        #expect(
            transport.requests.compactMap { $0.url?.path } == [
                "/.well-known/oauth-authorization-server/tenant1",
                "/.well-known/openid-configuration/tenant1",
                "/tenant1/.well-known/openid-configuration"
            ])
        // The inserted OpenID Connect form answers: the appended one is not asked.
        let inserted = Self.documents([
            "/.well-known/openid-configuration/tenant1": Self.oidcDocument.replacingOccurrences(
                of: "ISSUER", with: issuer)
        ])
        _ = try await Discovery.fetch(issuer: issuer, transport: inserted)
        #expect(inserted.requests.count == 2)
        // A provider answering junk at the newer inserted location still works through the appended one.
        let junk = ScriptedTransport { request in
            switch request.url?.path ?? "" {
            case "/.well-known/openid-configuration/tenant1":
                return APIResponse(status: .ok, body: Data("<html>app</html>".utf8))
            case "/tenant1/.well-known/openid-configuration":
                return .json(Self.oidcDocument.replacingOccurrences(of: "ISSUER", with: issuer))
            default: return APIResponse(status: .notFound)
            }
        }
        #expect(try await Discovery.fetch(issuer: issuer, transport: junk).issuer == issuer)
    }

    @Test func authorizationServerDiscoveryWithoutAPathAndItsFailures() async throws {
        let issuer = "https://as.example.com"
        let transport = Self.documents([
            "/.well-known/oauth-authorization-server": Self.asDocument.replacingOccurrences(of: "ISSUER", with: issuer)
        ])
        let metadata = try await Discovery.fetch(issuer: issuer, transport: transport)
        #expect(metadata.codeChallengeMethodsSupported == ["S256"])
        #expect(
            transport.requests.compactMap { $0.url?.path } == [
                "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"
            ])
        // The only document names another issuer: that reason, not "no document".
        let forged = Self.documents([
            "/.well-known/oauth-authorization-server": Self.asDocument.replacingOccurrences(
                of: "ISSUER", with: "https://evil.example")
        ])
        await #expect(throws: OAuthError.self) { _ = try await Discovery.fetch(issuer: issuer, transport: forged) }
        do { _ = try await Discovery.fetch(issuer: issuer, transport: forged) } catch let error as OAuthError {
            #expect(error.code == OAuthError.issuerMismatch)
        }
    }

    @Test func protectedResourceDiscoveryPrefersTheChallengeURLThenTheWellKnownOnes() async throws {
        let document = #"{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://as.example.com"]}"#
        let transport = Self.documents(["/.well-known/oauth-protected-resource": document])
        let found = try await Discovery.locateProtectedResource(
            "https://mcp.example.com/mcp",
            metadataURL: URL(string: "https://mcp.example.com/prm"), transport: transport)
        #expect(found.url.path == "/.well-known/oauth-protected-resource")
        #expect(
            transport.requests.compactMap { $0.url?.path } == [
                "/prm", "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource"
            ])
        await #expect(throws: OAuthError.self) {
            _ = try await Discovery.locateProtectedResource(
                "https://mcp.example.com/mcp", metadataURL: URL(string: "http://evil.example/prm"),
                transport: transport)
        }
        let nothing = Self.documents([:])
        do {
            _ = try await Discovery.locateProtectedResource(
                "https://mcp.example.com/mcp", metadataURL: nil, transport: nothing)
        } catch let error as OAuthError {
            #expect(
                error.code == OAuthError.discovery && error.message.contains("publishes no protected resource metadata")
            )
        }
    }

    // MARK: - PKCE S256 in the metadata

    @Test func anAuthorizationServerWithoutS256IsRefusedBeforeAnythingIsSent() async throws {
        var metadata = ProviderMetadata(
            issuer: "https://as.example.com", authorizationEndpoint: URL(string: "https://as.example.com/authorize"),
            tokenEndpoint: URL(string: "https://as.example.com/token"))
        for methods: [String]? in [nil, [], ["plain"]] {
            metadata.codeChallengeMethodsSupported = methods
            do { try metadata.requireS256(); Issue.record("accepted \(String(describing: methods))") } catch {
                #expect(
                    error.code == OAuthError.pkceNotSupported
                        && error.message.contains("code_challenge_methods_supported"))
            }
        }
        let transport = ScriptedTransport { _ in APIResponse(status: .ok) }
        let agent = ScriptedUserAgent.approving(code: "c")
        var client = OAuthClient(metadata: metadata, clientID: "app", transport: transport)
        client.requiresAdvertisedS256 = true
        let flow = AuthorizationCodeFlow(
            client: client, redirectURI: URL(string: "http://127.0.0.1:1/callback")!, userAgent: agent, idTokens: nil)
        await #expect(throws: OAuthError.self) { _ = try await flow.authorize(AuthorizationParameters(scopes: [])) }
        #expect(
            transport.requests.isEmpty && agent.authorizationURLs.isEmpty, "nothing reached the server or the browser")
        metadata.codeChallengeMethodsSupported = ["plain", "S256"]
        try metadata.requireS256()
    }

    // MARK: - RFC 8707 resource on every request

    @Test func theResourceGoesOnTheAuthorizationCodeAndRefreshRequests() async throws {
        let bodies = Mutex<[String]>([])
        let transport = ScriptedTransport { request in
            bodies.withLock { $0.append(String(decoding: request.body ?? Data(), as: UTF8.self)) }
            return .json(#"{"access_token":"at","token_type":"Bearer","expires_in":60,"refresh_token":"rt"}"#)
        }
        var metadata = ProviderMetadata(
            issuer: "https://as.example.com", authorizationEndpoint: URL(string: "https://as.example.com/authorize"),
            tokenEndpoint: URL(string: "https://as.example.com/token"))
        metadata.codeChallengeMethodsSupported = ["S256"]
        var client = OAuthClient(metadata: metadata, clientID: "app", transport: transport)
        client.resource = Self.resource
        let agent = ScriptedUserAgent.approving(code: "the-code")
        let flow = AuthorizationCodeFlow(
            client: client, redirectURI: URL(string: "http://127.0.0.1:1/callback")!, userAgent: agent, idTokens: nil)
        let tokens = try await flow.authorize(AuthorizationParameters(scopes: []))
        let query =
            URLComponents(url: try #require(agent.authorizationURLs.first), resolvingAgainstBaseURL: false)?.queryItems
            ?? []
        #expect(query.first { $0.name == "resource" }?.value == Self.resource)
        #expect(!query.contains { $0.name == "scope" }, "no scope at all when none is asked for")
        #expect(tokens.resource == Self.resource)
        let fresh = try await client.refresh(tokens)
        #expect(fresh.resource == Self.resource)
        let other = try await client.refresh(tokens, forResource: "https://api.example.com")
        #expect(other.resource == "https://api.example.com")
        let sent = bodies.withLock { $0 }
        #expect(sent.count == 3)
        #expect(
            sent[0].contains("grant_type=authorization_code")
                && sent[0].contains("resource=https%3A%2F%2Fmcp.example.com%2Fmcp"))
        #expect(
            sent[1].contains("grant_type=refresh_token")
                && sent[1].contains("resource=https%3A%2F%2Fmcp.example.com%2Fmcp"))
        #expect(sent[2].contains("resource=https%3A%2F%2Fapi.example.com"))
    }

    // MARK: - RFC 7591 registration responses

    static func registration(_ status: Int, _ body: String) throws -> RegisteredClient {
        try ClientRegistration.parseResponse(
            APIResponse(status: HTTPResponse.Status(code: status), body: Data(body.utf8)),
            issuer: "https://as.example.com")
    }

    @Test func registrationResponsesAreParsedAndTheirSecretsNeverShown() throws {
        let client = try Self.registration(
            201,
            #"{"client_id":"c-1","client_secret":"s3cret-value","client_secret_expires_at":0,"registration_access_token":"rat-abc.def","registration_client_uri":"https://as.example.com/register/c-1","token_endpoint_auth_method":"client_secret_post","redirect_uris":["http://127.0.0.1/callback"],"scope":"a b"}"#
        )
        #expect(
            client.clientID == "c-1" && client.registrationAccessToken == "rat-abc.def"
                && client.clientSecretExpiresAt == nil)
        #expect(
            client.registrationClientURI?.absoluteString == "https://as.example.com/register/c-1"
                && client.scopes == ["a", "b"])
        if case .clientSecretPost(let secret) = client.authentication {
            #expect(secret == "s3cret-value")
        } else {
            Issue.record("not post")
        }
        #expect(!client.description.contains("s3cret") && !client.description.contains("rat-abc"))
        #expect(client.allows(redirectURI: "http://127.0.0.1:49152/callback"), "RFC 8252 §7.3: any loopback port")
        #expect(!client.allows(redirectURI: "http://127.0.0.1:49152/other"))
        // 200 works too (Glewlwyd); an http registration_client_uri to another machine is dropped.
        let plain = try Self.registration(
            200, #"{"client_id":"c-2","registration_client_uri":"http://as.example.com/r","client_id_issued_at":1e300}"#
        )
        #expect(plain.registrationClientURI == nil && plain.clientIDIssuedAt == nil)
        if case .none = plain.authentication {} else { Issue.record("a client without a secret is public") }
    }

    @Test func hostileRegistrationResponsesAreRefused() throws {
        let refused = [
            (400, #"{"error":"invalid_redirect_uri","error_description":"no"}"#, OAuthError.registration),
            (503, "", OAuthError.transient),
            (201, "[]", OAuthError.registration),
            (201, #"{"client_secret":"x"}"#, OAuthError.registration),
            (201, #"{"client_id":"a\u0007b"}"#, OAuthError.registration),
            (201, #"{"client_id":"c","registration_access_token":"a b"}"#, OAuthError.registration),
            (201, #"{"client_id":"c","client_secret":"\u001b[31m"}"#, OAuthError.registration)
        ]
        for (status, body, expected) in refused {
            #expect(Self.code { try Self.registration(status, body) } == expected, "\(status) \(body)")
        }
        do { _ = try Self.registration(400, #"{"error":"invalid_redirect_uri"}"#) } catch let error as OAuthError {
            #expect(error.oauthError == "invalid_redirect_uri")
        }
    }

    // MARK: - Sessions

    @Test func sessionsKeepResourceAndRegistrationAndOldRowsStillRead() throws {
        var registration = RegisteredClient(issuer: "https://as.example.com", clientID: "c-1", clientSecret: "s")
        registration.registrationAccessToken = "rat"
        let session = OAuthSession(
            issuer: "https://as.example.com", clientID: "c-1",
            tokens: TokenSet(accessToken: "at", refreshToken: "rt", resource: Self.resource),
            resource: Self.resource, registration: registration)
        let decoded = try JSONDecoder().decode(OAuthSession.self, from: JSONEncoder().encode(session))
        #expect(
            decoded.resource == Self.resource && decoded.registration == registration
                && decoded.tokens.resource == Self.resource)
        // A row written before these members existed.
        let old =
            #"{"issuer":"https://as.example.com","clientID":"c","state":"active","tokens":{"accessToken":"at","tokenType":"Bearer","scopes":[],"requestedAt":0}}"#
        let legacy = try JSONDecoder().decode(OAuthSession.self, from: Data(old.utf8))
        #expect(legacy.resource == nil && legacy.registration == nil && legacy.tokens.resource == nil)
        #expect(
            OAuthSession.storageKey(issuer: "https://as.example.com", resource: Self.resource)
                == "https://as.example.com \(Self.resource)")
        #expect(OAuthSession.registrationOnly(registration, resource: Self.resource).state == .needsReauthentication)
    }

    /// A Client ID Metadata Document client where the server takes one: no registration request,
    /// the document's URL is the client id (scripted server and agent).
    @Test func aClientIDMetadataDocumentIsUsedWhereTheServerTakesOne() async throws {
        let issuer = "https://as.example.com"
        let document = URL(string: "https://app.example.com/oauth/client.json")!
        let paths = Mutex<[String]>([])
        let transport = ScriptedTransport { request in
            let path = request.url?.path ?? ""
            paths.withLock { $0.append(path) }
            switch path {
            case "/.well-known/oauth-protected-resource/mcp":
                return .json(
                    #"{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://as.example.com"],"scopes_supported":["mcp"]}"#
                )
            case "/.well-known/oauth-authorization-server":
                return .json(
                    #"{"issuer":"https://as.example.com","authorization_endpoint":"https://as.example.com/authorize","token_endpoint":"https://as.example.com/token","registration_endpoint":"https://as.example.com/register","response_types_supported":["code"],"code_challenge_methods_supported":["S256"],"client_id_metadata_document_supported":true}"#
                )
            case "/token":
                return .json(#"{"access_token":"at-1","token_type":"Bearer","expires_in":600,"refresh_token":"rt-1"}"#)
            default:
                return APIResponse(status: .notFound)
            }
        }
        let storage = InMemorySessionStorage()
        let manager = try ResourceTokenManager(
            resource: "https://mcp.example.com/mcp", client: .metadataDocument(document), storage: storage,
            transport: transport)
        let agent = ScriptedUserAgent { url, redirect, state in
            URL(string: "\(redirect.absoluteString)?code=c&state=\(state)&iss=\(issuer)")!
        }
        let summary = try await manager.login(
            with: .userAgent(agent, redirectURI: URL(string: "http://127.0.0.1:7/callback")!))
        #expect(summary.resource == "https://mcp.example.com/mcp" && summary.scopes == ["mcp"])
        let query =
            URLComponents(url: try #require(agent.authorizationURLs.first), resolvingAgainstBaseURL: false)?.queryItems
            ?? []
        #expect(query.first { $0.name == "client_id" }?.value == document.absoluteString)
        #expect(!paths.withLock { $0 }.contains("/register"), "no RFC 7591 registration")
        #expect(try await manager.accessToken().value == "at-1")
        let key = OAuthSession.storageKey(issuer: issuer, resource: "https://mcp.example.com/mcp")
        #expect(try await storage.load(key)?.session.clientID == document.absoluteString)
    }
}
