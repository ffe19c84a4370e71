#if MooseVapor
import Foundation
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseResourceServer
import MooseTestSupport
import MooseURLSession
import MooseVapor
import Testing
import VaporTesting

/// The middleware in a Vapor application (in memory) against real RFC 9068 tokens from Glewlwyd
/// (tools/glewlwyd: client credentials for `moose-service` with `resource=https://api.moose.test`):
/// the route runs only for verified callers; refusals carry their challenges; the RFC 9728 document.
@Suite struct VaporResourceServerTests {
    static let resource = "https://api.moose.test"

    /// How many times a protected route ran.
    actor Calls {
        var count = 0
        func record() { count += 1 }
    }

    /// The issuer's token endpoint and keys, from its discovery document.
    struct Provider {
        let issuer: String
        let tokenEndpoint: URL
        let jwks: JWKSCache
    }

    static func provider(_ issuer: String, transport: URLSessionTransport) async throws -> Provider {
        let discovery = try #require(URL(string: issuer + "/.well-known/openid-configuration"))
        let document = try JSONValue(parsing: Array(try await transport.send(APIRequest(url: discovery)).body))
        let token = try #require(document["token_endpoint"]?.stringValue.flatMap(URL.init(string:)))
        let jwks = try #require(document["jwks_uri"]?.stringValue.flatMap(URL.init(string:)))
        return Provider(
            issuer: try #require(document["issuer"]?.stringValue), tokenEndpoint: token,
            jwks: JWKSCache(url: jwks, transport: transport))
    }

    /// Client credentials; with `dpop`, a proof (and the nonce Glewlwyd then asks for).
    static func accessToken(
        _ provider: Provider, transport: URLSessionTransport, dpop: (signer: JWTSigner, jwk: JWK)? = nil
    ) async throws -> String {
        try await Glewlwyd.serviceAccessToken(tokenEndpoint: provider.tokenEndpoint, transport: transport, dpop: dpop)
            .token
    }

    /// A verifier of Glewlwyd's tokens for `resource`, with DPoP nonces when `nonces`.
    static func server(_ provider: Provider, resource: String = resource, nonces: Bool = false)
        -> MooseResourceServer.ResourceServer
    {
        var configuration = ResourceServerConfiguration(
            issuer: provider.issuer, resource: resource, algorithms: [.rs256, .es256, .eddsa])
        configuration.resourceMetadataURL = resource + "/.well-known/oauth-protected-resource"
        return MooseResourceServer.ResourceServer(
            configuration: configuration, keys: provider.jwks,
            nonces: nonces ? RotatingDPoPNonces() : nil)
    }

    /// `/items` (api.read), `/admin` (api.write), `/other` (another resource), `/dpop` (nonces), `/optional`
    /// (the authenticator), `/guarded` (the authenticator and Vapor's guard), and the document.
    static func configure(_ app: Application, provider: Provider, calls: Calls) {
        app.logger.logLevel = .error // not a line per request in the test output
        let document = ProtectedResourceDocument(
            resource: resource, authorizationServers: [provider.issuer], scopesSupported: ["api.read"])
        document.addRoute(to: app)
        let server = server(provider)
        let routes: [(path: String, server: MooseResourceServer.ResourceServer, scopes: [String])] = [
            ("items", server, ["api.read"]), ("admin", server, ["api.write"]),
            ("other", Self.server(provider, resource: "https://other.moose.test"), []),
            ("dpop", Self.server(provider, nonces: true), ["api.read"])
        ]
        let handler: @Sendable (Request) async -> String = { req in
            await calls.record()
            let principal = req.verifiedPrincipal
            return "\(principal?.clientID ?? "nobody") by \(principal?.scheme.rawValue ?? "-")"
        }
        for route in routes {
            app.grouped(
                ResourceServerMiddleware(server: route.server, publicBaseURL: resource, requiredScopes: route.scopes)
            )
            .get(.constant(route.path), use: handler)
        }
        let authenticator = ResourceServerAuthenticator(
            server: server, publicBaseURL: resource, requiredScopes: ["api.read"])
        app.grouped(authenticator).get("optional", use: handler)
        app.grouped(authenticator, AuthenticatedPrincipal.guardMiddleware()).get("guarded", use: handler)
    }

    static func challenges(_ response: TestingHTTPResponse) -> [AuthenticationChallenge] {
        AuthenticationChallenge.parse(response.headers["WWW-Authenticate"])
    }

    @Test func aProtectedRouteRunsOnlyForVerifiedCallers() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = URLSessionTransport()
            let provider = try await Self.provider(issuer, transport: transport)
            let token = try await Self.accessToken(provider, transport: transport)
            let calls = Calls()
            try await withApp(configure: { Self.configure($0, provider: provider, calls: calls) }) { app in
                let tester = try app.testing()
                let valid = try await tester.sendRequest(.GET, "items", headers: ["Authorization": "Bearer \(token)"])
                #expect(valid.status == .ok && valid.body.string == "moose-service by Bearer")
                #expect(await calls.count == 1)

                let none = try await tester.sendRequest(.GET, "items")
                #expect(none.status == .unauthorized && none.body.readableBytes == 0)
                #expect(Self.challenges(none).map(\.scheme) == ["Bearer", "DPoP"])
                #expect(
                    Self.challenges(none).first?["resource_metadata"] == Self.resource
                        + "/.well-known/oauth-protected-resource")

                let elsewhere = try await tester.sendRequest(
                    .GET, "other", headers: ["Authorization": "Bearer \(token)"])
                #expect(
                    elsewhere.status == .unauthorized && Self.challenges(elsewhere).first?["error"] == "invalid_token")

                let short = try await tester.sendRequest(.GET, "admin", headers: ["Authorization": "Bearer \(token)"])
                #expect(short.status == .forbidden)
                #expect(
                    Self.challenges(short).first?["error"] == "insufficient_scope"
                        && Self.challenges(short).first?["scope"] == "api.write")
                // The refused requests never reached their routes.
                #expect(await calls.count == 1)

                // The authenticator: a caller logged in, or none (the route runs either way); with the guard, a bare 401.
                let optional = try await tester.sendRequest(
                    .GET, "optional", headers: ["Authorization": "Bearer \(token)"])
                #expect(optional.status == .ok && optional.body.string == "moose-service by Bearer")
                let anonymous = try await tester.sendRequest(.GET, "optional")
                #expect(anonymous.status == .ok && anonymous.body.string == "nobody by -")
                let guarded = try await tester.sendRequest(
                    .GET, "guarded", headers: ["Authorization": "Bearer not-a-token"])
                #expect(guarded.status == .unauthorized)
                let admitted = try await tester.sendRequest(
                    .GET, "guarded", headers: ["Authorization": "Bearer \(token)"])
                #expect(admitted.status == .ok)
                #expect(await calls.count == 4)

                let metadata = try await tester.sendRequest(.GET, ".well-known/oauth-protected-resource")
                #expect(metadata.status == .ok && metadata.headers.first(name: "Content-Type") == "application/json")
                let document = try JSONValue(parsing: Array(metadata.body.string.utf8))
                #expect(document["resource"]?.stringValue == Self.resource)
                #expect(document["authorization_servers"]?.arrayValue?.first?.stringValue == provider.issuer)
            }
        }
    }

    @Test func aDPoPBoundTokenGetsANonceThenPasses() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = URLSessionTransport()
            let provider = try await Self.provider(issuer, transport: transport)
            let key = try PrivateKey.generate(.ec(.p256))
            let signer = try JWTSigner(key: JWTKey(privateKey: key), algorithm: .es256)
            let jwk = try JWK(publicKey: key.publicKey())
            let token = try await Self.accessToken(provider, transport: transport, dpop: (signer, jwk))
            let calls = Calls()
            let url = Self.resource + "/dpop"
            try await withApp(configure: { Self.configure($0, provider: provider, calls: calls) }) { app in
                let tester = try app.testing()
                // No nonce in the proof: use_dpop_nonce, and the nonce to use.
                let first = try await tester.sendRequest(
                    .GET, "dpop",
                    headers: [
                        "Authorization": "DPoP \(token)",
                        "DPoP": try DPoP.proof(
                            signer: signer, publicJWK: jwk, method: "GET", url: url, accessToken: token)
                    ])
                #expect(first.status == .unauthorized)
                #expect(Self.challenges(first).first { $0.hasScheme("DPoP") }?["error"] == "use_dpop_nonce")
                let nonce = try #require(first.headers.first(name: "DPoP-Nonce"))
                let second = try await tester.sendRequest(
                    .GET, "dpop",
                    headers: [
                        "Authorization": "DPoP \(token)",
                        "DPoP": try DPoP.proof(
                            signer: signer, publicJWK: jwk, method: "GET", url: url, accessToken: token, nonce: nonce)
                    ])
                #expect(second.status == .ok && second.body.string == "moose-service by DPoP")
                #expect(second.headers.first(name: "DPoP-Nonce") != nil)
                // The bound token as Bearer: refused.
                let bearer = try await tester.sendRequest(.GET, "dpop", headers: ["Authorization": "Bearer \(token)"])
                #expect(bearer.status == .unauthorized)
                #expect(await calls.count == 1)
            }
        }
    }
}
#endif
