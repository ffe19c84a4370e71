// docs/resource-server.md, "Quick start" and "Options": the code between the markers is quoted there
// word for word (ResourceServerDocsExamplesTests checks it), and compiled here. The Hummingbird quick
// start is in Tests/MooseHummingbirdTests/HummingbirdResourceServerDocsExamples.swift (it needs the trait).
import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseResourceServer
import Testing

func resourceServerAtStartUp() async throws -> ResourceServer {
    // docs/resource-server.md setup begins
    let transport = CurlTransport()
    let provider = try await Discovery.fetch(issuer: "https://id.example.com", transport: transport)
    // The issuer's exact iss and its keys (jwks_uri; a provider without one is missingEndpoint).
    let server = try ResourceServer(
        metadata: provider, resource: "https://api.example.com", algorithms: [.rs256, .es256], transport: transport
    ) { configuration in
        // resource_metadata in every challenge: where the document below is served
        configuration.resourceMetadataURL = ProtectedResourceDocument.url(for: configuration.resource)
    }
    // What this API publishes (RFC 9728), stated by the verifier: serve document.json at
    // document.wellKnownPath, no token needed.
    let document = ProtectedResourceDocument(for: server, scopesSupported: ["api.read"])
    // docs/resource-server.md setup ends
    _ = document
    return server
}

func handleOneRequest(
    server: ResourceServer, authorization: String?, dpop: String?, method: String,
    path: String
) async -> (status: Int, headers: [(name: String, value: String)], body: String) {
    // docs/resource-server.md request begins
    // Any framework: the request's Authorization and DPoP values, its method, and its URL as the client
    // addressed it (behind a proxy, the public one: a DPoP proof's htu names that URL).
    do throws(ResourceServerRefusal) {
        let caller = try await server.verify(
            authorizationHeader: authorization, dpopHeader: dpop, method: method,
            url: "https://api.example.com" + path, requiredScopes: ["api.read"])
        return (200, [], "hello \(caller.subject), client \(caller.clientID), scopes \(caller.scopes)")
    } catch {
        // status 400, 401, 403 or 503, with WWW-Authenticate, DPoP-Nonce and Cache-Control headers to
        // send as they are; reason says which check failed (never the token).
        print("refused: \(error.code): \(error.reason)")
        return (error.status, error.headers, "")
    }
    // docs/resource-server.md request ends
}

func strictResourceServer(
    jwksURI: URL, introspectionEndpoint: URL, introspectionSecret: String,
    transport: any HTTPTransport
) -> ResourceServer {
    // docs/resource-server.md options begins
    var configuration = ResourceServerConfiguration(
        issuer: "https://id.example.com", resource: "https://api.example.com",
        algorithms: [.es256], dpop: .required) // DPoP-bound tokens only
    configuration.leeway = 10 // seconds, on exp, nbf and iat
    configuration.proofs = DPoPProofVerifier(allowedAlgorithms: [.es256, .eddsa], maximumAge: 30)
    configuration.realm = "api"
    let server = ResourceServer(
        configuration: configuration,
        keys: JWKSCache(url: jwksURI, transport: transport),
        replayCache: InMemoryDPoPReplayCache(capacity: 100_000), // one process; replicas: PostgresDPoPReplayCache(url:)
        nonces: RotatingDPoPNonces(lifetime: 300), // proofs must carry the server's DPoP-Nonce
        introspector: TokenIntrospector(
            endpoint: introspectionEndpoint, clientID: "api",
            clientSecret: introspectionSecret, transport: transport)) // opaque tokens only
    // docs/resource-server.md options ends
    return server
}

/// docs/resource-server.md quotes the examples above word for word; the request example answers as the page says.
struct ResourceServerDocsExamplesTests {
    @Test func theResourceServerPageQuotesTheCompiledExamples() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = here.deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/resource-server.md"), encoding: .utf8)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let imports = [
            "setup": "import MooseHTTP\nimport MooseOAuth\nimport MooseResourceServer\n\n",
            "request": "import MooseResourceServer\n\n",
            "options": "import MooseJWT\nimport MooseOAuth\nimport MooseResourceServer\n\n"
        ]
        for name in ["setup", "request", "options"] {
            let begin = try #require(source.range(of: "    // docs/resource-server.md \(name) begins\n"))
            let end = try #require(source.range(of: "    // docs/resource-server.md \(name) ends"))
            let example = source[begin.upperBound..<end.lowerBound].split(
                separator: "\n", omittingEmptySubsequences: false
            )
            .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }.joined(separator: "\n")
            #expect(
                page.contains("```swift\n" + (imports[name] ?? "") + example + "```"),
                "docs/resource-server.md's \(name) example differs from ResourceServerDocsExamples.swift")
        }
    }

    @Test func theRequestExampleAnswersAsThePageSays() async throws {
        let harness = try Harness()
        let server = harness.server()
        let token = try harness.token()
        let accepted = await handleOneRequest(
            server: server, authorization: "Bearer \(token)", dpop: nil, method: "GET", path: "/items")
        #expect(accepted.status == 200 && accepted.body.hasPrefix("hello alice, client moose-app"))

        let missing = await handleOneRequest(
            server: server, authorization: nil, dpop: nil, method: "GET", path: "/items")
        #expect(missing.status == 401)
        #expect(
            missing.headers.filter { $0.name == "WWW-Authenticate" }.map(\.value) == [
                #"Bearer resource_metadata="https://api.example.com/.well-known/oauth-protected-resource""#,
                #"DPoP resource_metadata="https://api.example.com/.well-known/oauth-protected-resource", algs="ES256 ES384 ES512 Ed25519 EdDSA PS256 PS384 PS512 RS256 RS384 RS512""#
            ])

        let narrow = try harness.token(["scope": "profile"])
        let forbidden = await handleOneRequest(
            server: server, authorization: "Bearer \(narrow)", dpop: nil, method: "GET", path: "/items")
        #expect(forbidden.status == 403)
        #expect(
            forbidden.headers.first?.value
                == #"Bearer error="insufficient_scope", error_description="The access token lacks a required scope", scope="api.read", resource_metadata="https://api.example.com/.well-known/oauth-protected-resource""#
        )
        #expect(
            forbidden.headers.dropFirst().first?.value
                == #"DPoP resource_metadata="https://api.example.com/.well-known/oauth-protected-resource", algs="ES256 ES384 ES512 Ed25519 EdDSA PS256 PS384 PS512 RS256 RS384 RS512""#
        )
        #expect(forbidden.headers.contains { $0.name == "Cache-Control" && $0.value == "no-store" })

        // The page's example of a reason.
        let elsewhere = try harness.token(["aud": "https://other.example.com"])
        let refused = try #require(
            try await refusal {
                try await server.verify(
                    authorizationHeader: "Bearer \(elsewhere)", dpopHeader: nil, method: "GET", url: Harness.url)
            })
        #expect(refused.reason == "the token failed audienceMismatch (aud)")
    }
}
