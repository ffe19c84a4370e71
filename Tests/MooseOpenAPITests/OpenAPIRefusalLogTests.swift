#if ExampleService
import Foundation
import HTTPTypes
import Logging
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOpenAPI
import MooseResourceServer
import MooseTestSupport
import OpenAPIRuntime
import Synchronization
import Testing

/// `ResourceServerOpenAPIMiddleware` logs each refusal's reason (never the token, the proof or the query)
/// at the level asked and hands it to `onRefusal`; accepted and public requests are neither logged nor
/// counted. Local keys: no provider needed.
@Suite struct OpenAPIRefusalLogTests {
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

    func middleware(
        logger: Logger, level: Logger.Level = .info, counted: @escaping @Sendable (ResourceServerRefusal) -> Void
    ) -> ResourceServerOpenAPIMiddleware {
        let server = ResourceServer(
            configuration: ResourceServerConfiguration(
                issuer: Self.issuer, resource: Self.resource, algorithms: [.es256]),
            keys: StaticAccessTokenKeys([issuerKey]))
        return ResourceServerOpenAPIMiddleware(
            server: server, publicBaseURL: Self.resource, requiredScopes: ["api.read"],
            scopesByOperation: ["deleteItem": ["api.read", "api.write"]], publicOperations: ["getHealth"],
            logger: logger, refusalLogLevel: level, onRefusal: counted)
    }

    static func call(
        _ middleware: ResourceServerOpenAPIMiddleware, _ fields: HTTPFields, method: HTTPRequest.Method = .get,
        path: String = "/items", operation: String = "listItems"
    ) async throws -> HTTPResponse {
        let request = HTTPRequest(method: method, scheme: nil, authority: nil, path: path, headerFields: fields)
        return try await middleware.intercept(
            request, body: nil, metadata: ServerRequestMetadata(), operationID: operation
        ) { _, _, _ in (HTTPResponse(status: .ok), nil) }.0
    }

    @Test func refusalsAreLoggedWithTheirReasonAndCounted() async throws {
        let logs = CapturedLogs()
        let count = Mutex(0)
        let token = try token()
        let bound = try self.token(bound: true)
        let proof = try DPoP.proof(
            signer: clientSigner, publicJWK: clientJWK, method: "GET", url: Self.resource + "/items", accessToken: bound
        )
        let middleware = middleware(logger: logs.logger) { _ in count.withLock { $0 += 1 } }
        // Accepted and public requests: no refusal line, nothing counted.
        #expect(try await Self.call(middleware, [.authorization: "Bearer \(token)"]).status == .ok)
        #expect(try await Self.call(middleware, [:], operation: "getHealth").status == .ok)
        // A scope the operation needs and the token lacks, the token in the query too.
        let weak = try await Self.call(
            middleware, [.authorization: "Bearer \(token)"], method: .delete, path: "/items/7?access_token=\(token)",
            operation: "deleteItem")
        #expect(weak.status == .forbidden)
        let basic = try await Self.call(middleware, [.authorization: "Basic YWxpY2U6cHc="])
        #expect(basic.status == .unauthorized)
        let challenges = AuthenticationChallenge.parse(basic.headerFields[values: .wwwAuthenticate])
        #expect(challenges.map(\.scheme) == ["Bearer", "DPoP"] && challenges.allSatisfy { $0["error"] == nil })
        var twoProofs: HTTPFields = [.authorization: "DPoP \(bound)"]
        twoProofs.append(HTTPField(name: .dpop, value: proof))
        twoProofs.append(HTTPField(name: .dpop, value: proof))
        #expect(try await Self.call(middleware, twoProofs).status == .unauthorized)

        let refusals = logs.all.filter { $0.text.hasPrefix("access token refused") }
        #expect(refusals.count == 3 && count.withLock { $0 } == 3, "\(logs.all.map(\.text))")
        #expect(refusals.allSatisfy { $0.level == .info })
        let first = refusals.first?.text ?? ""
        #expect(first.contains("refusal.code=insufficient_scope") && first.contains("refusal.status=403"), "\(first)")
        #expect(first.contains("refusal.reason=the token lacks a required scope"), "\(first)")
        #expect(first.contains("http.method=DELETE") && first.contains("http.path=/items/7 "), "\(first)")
        #expect(refusals.dropFirst().first?.text.contains("refusal.code=unsupported_scheme") == true)
        #expect(refusals.last?.text.contains("several DPoP header fields") == true)
        // No token, proof or query text anywhere in the log.
        for record in logs.all {
            #expect(!record.text.contains(token) && !record.text.contains(bound) && !record.text.contains(proof))
            #expect(!record.text.contains("access_token") && !record.text.contains("YWxpY2U6cHc="))
        }
    }

    @Test func refusalsAreLoggedAtTheLevelAsked() async throws {
        let logs = CapturedLogs()
        let codes = Mutex<[String]>([])
        let middleware = middleware(logger: logs.logger, level: .debug) { refusal in
            codes.withLock { $0.append(refusal.code.description) }
        }
        #expect(try await Self.call(middleware, [:]).status == .unauthorized)
        #expect(logs.all.map(\.level) == [.debug])
        #expect(logs.all.first?.text.contains("refusal.code=missing_credentials") == true)
        #expect(codes.withLock { $0 } == ["missing_credentials"])
        // By default: info, on a logger labelled for Moose.
        let server = ResourceServer(
            configuration: ResourceServerConfiguration(
                issuer: Self.issuer, resource: Self.resource, algorithms: [.es256]),
            keys: StaticAccessTokenKeys([issuerKey]))
        let plain = ResourceServerOpenAPIMiddleware(server: server, publicBaseURL: Self.resource)
        #expect(plain.refusalLogLevel == .info && plain.onRefusal == nil)
        #expect(plain.logger.label == ResourceServerOpenAPIMiddleware.defaultLoggerLabel)
    }
}
#endif
