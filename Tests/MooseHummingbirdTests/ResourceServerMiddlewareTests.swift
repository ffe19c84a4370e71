#if MooseHummingbird
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import MooseCrypto
import MooseHTTP
import MooseHummingbird
import MooseJWT
import MooseResourceServer
import MooseTestSupport
import Synchronization
import Testing

/// The middleware in a real Hummingbird application on a loopback port: a protected route, its
/// refusals with challenges, a DPoP request, and the RFC 9728 document.
@Suite struct ResourceServerMiddlewareTests {
    struct APIContext: ResourceServerRequestContext {
        var coreContext: CoreRequestContextStorage
        var principal: VerifiedPrincipal?
        init(source: Source) { coreContext = .init(source: source) }
    }

    static let issuer = "https://id.example.com"
    static let resource = "https://api.example.com"

    let issuerSigner: JWTSigner
    let issuerKey: JWTKey
    let clientSigner: JWTSigner
    let clientJWK: JWK

    init() throws {
        let key = try PrivateKey.generate(.ec(.p256))
        issuerSigner = try JWTSigner(key: JWTKey(privateKey: key, keyID: "k1"), algorithm: .es256)
        issuerKey = try JWTKey(publicKey: key.publicKey(), keyID: "k1")
        let client = try PrivateKey.generate(.ec(.p256))
        clientSigner = try JWTSigner(key: JWTKey(privateKey: client), algorithm: .es256)
        clientJWK = try JWK(publicKey: client.publicKey())
    }

    func token(scope: String = "api.read", bound: Bool = false) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        var claims: JSONObject = [
            "iss": .string(Self.issuer), "sub": "alice", "aud": .string(Self.resource), "client_id": "app",
            "exp": .number(JSONNumber(now + 300)), "iat": .number(JSONNumber(now)), "jti": "t1",
            "scope": .string(scope)
        ]
        if bound { claims["cnf"] = .object(["jkt": .string(try clientJWK.thumbprint())]) }
        return try issuerSigner.sign(claims, extraHeader: ["typ": "at+jwt"])
    }

    func application(
        logger: Logger? = nil, counted: (@Sendable (ResourceServerRefusal) -> Void)? = nil
    ) -> some ApplicationProtocol {
        var configuration = ResourceServerConfiguration(
            issuer: Self.issuer, resource: Self.resource, algorithms: [.es256])
        let document = ProtectedResourceDocument(
            resource: Self.resource, authorizationServers: [Self.issuer], scopesSupported: ["api.read"],
            dpopSigningAlgorithms: ["ES256"])
        configuration.resourceMetadataURL = document.url
        let server = ResourceServer(configuration: configuration, keys: StaticAccessTokenKeys([issuerKey]))
        let router = Router(context: APIContext.self)
        document.addRoute(to: router)
        router.group("items")
            .add(
                middleware: ResourceServerMiddleware(
                    server: server, publicBaseURL: Self.resource, requiredScopes: ["api.read"], logger: logger,
                    onRefusal: counted)
            )
            .get { _, context in
                "hello \(context.principal?.subject ?? "nobody") by \(context.principal?.scheme.rawValue ?? "-")"
            }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    }

    @Test func aProtectedRouteAnswersOnlyVerifiedCallers() async throws {
        let token = try token()
        let bound = try self.token(bound: true)
        let weak = try self.token(scope: "profile")
        try await application().test(.live) { client in
            // Made now, as a client makes it before its request: one made before the server started could
            // be past the iat window by the time a loaded machine sends it (CI: 401 "invalidDPoPProof (iat)").
            let proof = try DPoP.proof(
                signer: clientSigner, publicJWK: clientJWK, method: "GET", url: Self.resource + "/items",
                accessToken: bound)
            try await client.execute(uri: "/items", method: .get, headers: [.authorization: "Bearer \(token)"]) {
                response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == "hello alice by Bearer")
            }
            try await client.execute(
                uri: "/items?page=2", method: .get, headers: [.authorization: "DPoP \(bound)", .dpop: proof]
            ) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == "hello alice by DPoP")
            }
            // The same proof again: replayed.
            try await client.execute(
                uri: "/items?page=2", method: .get, headers: [.authorization: "DPoP \(bound)", .dpop: proof]
            ) { response in
                #expect(response.status == .unauthorized)
                let challenges = AuthenticationChallenge.parse(response.headers[values: .wwwAuthenticate])
                #expect(challenges.first { $0.hasScheme("DPoP") }?["error"] == "invalid_dpop_proof")
            }
            try await client.execute(uri: "/items", method: .get) { response in
                #expect(response.status == .unauthorized)
                let challenges = AuthenticationChallenge.parse(response.headers[values: .wwwAuthenticate])
                #expect(challenges.map(\.scheme) == ["Bearer", "DPoP"])
                #expect(
                    challenges.first?["resource_metadata"]
                        == "https://api.example.com/.well-known/oauth-protected-resource")
            }
            try await client.execute(uri: "/items", method: .get, headers: [.authorization: "Bearer \(weak)"]) {
                response in
                #expect(response.status == .forbidden)
                let bearer = AuthenticationChallenge.parse(response.headers[values: .wwwAuthenticate]).first
                #expect(bearer?["error"] == "insufficient_scope" && bearer?["scope"] == "api.read")
            }
            try await client.execute(uri: "/.well-known/oauth-protected-resource", method: .get) { response in
                #expect(response.status == .ok && response.headers[.contentType] == "application/json")
                let document = try JSONValue(parsing: Array(String(buffer: response.body).utf8))
                #expect(document["resource"]?.stringValue == Self.resource)
            }
        }
    }

    /// Every refusal is logged with its reason (never the token or the query) and counted; an unsupported
    /// scheme gets 401 with bare challenges; two DPoP fields are refused as such.
    @Test func refusalsAreLoggedWithTheirReasonAndCounted() async throws {
        let logs = CapturedLogs()
        let count = Mutex(0)
        let token = try token(scope: "profile")
        let bound = try self.token(bound: true)
        // Refused for its two fields, whatever its iat: made before the server starts, and looked for in the log.
        let proof = try DPoP.proof(
            signer: clientSigner, publicJWK: clientJWK, method: "GET", url: Self.resource + "/items", accessToken: bound
        )
        let application = application(logger: logs.logger) { _ in count.withLock { $0 += 1 } }
        try await application.test(.live) { client in
            try await client.execute(
                uri: "/items?access_token=\(token)", method: .get, headers: [.authorization: "Bearer \(token)"]
            ) { response in
                #expect(response.status == .forbidden)
            }
            try await client.execute(uri: "/items", method: .get, headers: [.authorization: "Basic YWxpY2U6cHc="]) {
                response in
                #expect(response.status == .unauthorized)
                let challenges = AuthenticationChallenge.parse(response.headers[values: .wwwAuthenticate])
                #expect(challenges.map(\.scheme) == ["Bearer", "DPoP"] && challenges.allSatisfy { $0["error"] == nil })
            }
            var headers: HTTPFields = [.authorization: "DPoP \(bound)"]
            headers.append(HTTPField(name: .dpop, value: proof))
            headers.append(HTTPField(name: .dpop, value: proof))
            try await client.execute(uri: "/items", method: .get, headers: headers) { response in
                #expect(response.status == .unauthorized)
                let challenges = AuthenticationChallenge.parse(response.headers[values: .wwwAuthenticate])
                #expect(challenges.first { $0.hasScheme("DPoP") }?["error"] == "invalid_dpop_proof")
            }
        }
        let refusals = logs.all.filter { $0.text.hasPrefix("access token refused") }
        #expect(refusals.count == 3 && count.withLock { $0 } == 3)
        #expect(refusals.allSatisfy { $0.level == .info })
        #expect(refusals.first?.text.contains("refusal.code=insufficient_scope") == true)
        #expect(refusals.first?.text.contains("refusal.reason=the token lacks a required scope") == true)
        #expect(refusals.first?.text.contains("http.path=/items") == true)
        #expect(refusals.dropFirst().first?.text.contains("refusal.code=unsupported_scheme") == true)
        #expect(refusals.last?.text.contains("several DPoP header fields") == true)
        // No token, proof or query text anywhere in the log.
        for record in logs.all {
            #expect(!record.text.contains(token) && !record.text.contains(bound) && !record.text.contains(proof))
            #expect(!record.text.contains("access_token") && !record.text.contains("YWxpY2U6cHc="))
        }
    }
}
#endif
