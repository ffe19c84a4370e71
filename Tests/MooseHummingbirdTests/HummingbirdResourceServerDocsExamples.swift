// docs/resource-server.md, "Quick start: Hummingbird": the code between the markers is quoted there word
// for word (HummingbirdResourceServerDocsExamplesTests checks it), and compiled here with the trait.
#if MooseHummingbird
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import MooseCrypto
import MooseHummingbird
import MooseJWT
import MooseResourceServer
import Testing

func greetingRouter(server: ResourceServer) -> Router<BasicRequestContext> {
    // docs/resource-server.md hummingbird-route begins
    let router = Router()
    router.get("greeting") { request, context -> Response in
        do throws(ResourceServerRefusal) {
            let caller = try await server.verify(
                request, publicBaseURL: "https://api.example.com", requiredScopes: ["api.read"])
            return Response(
                status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "hello \(caller.subject)")))
        } catch {
            context.logger.info("access token refused", metadata: ["reason": "\(error.reason)"]) // never the token
            return error.response
        }
    }
    // docs/resource-server.md hummingbird-route ends
    return router
}

func serveWithHummingbird(server: ResourceServer) async throws {
    // docs/resource-server.md hummingbird begins
    struct APIContext: ResourceServerRequestContext {
        var coreContext: CoreRequestContextStorage
        var principal: VerifiedPrincipal? // set by the middleware before the route runs
        init(source: Source) { coreContext = .init(source: source) }
    }

    let document = ProtectedResourceDocument(for: server, scopesSupported: ["api.read"])
    let router = Router(context: APIContext.self)
    document.addRoute(to: router) // GET /.well-known/oauth-protected-resource, no token
    router.group("items")
        .add(
            middleware: ResourceServerMiddleware(
                server: server, publicBaseURL: "https://api.example.com",
                requiredScopes: ["api.read"])
        )
        .get { _, context in "hello \(context.principal?.subject ?? "")" }
    let app = Application(router: router, configuration: .init(address: .hostname("0.0.0.0", port: 8080)))
    try await app.runService()
    // docs/resource-server.md hummingbird ends
}

struct DocsAPIContext: ResourceServerRequestContext {
    var coreContext: CoreRequestContextStorage
    var principal: VerifiedPrincipal?
    init(source: Source) { coreContext = .init(source: source) }
}

func loggingMiddleware(server: ResourceServer) -> ResourceServerMiddleware<DocsAPIContext> {
    typealias APIContext = DocsAPIContext
    // docs/resource-server.md hummingbird-logging begins
    var logger = Logger(label: "api.auth")
    logger.logLevel = .info // .debug or .info: refusals appear; .notice: they do not
    let refusals = ResourceServerMiddleware<APIContext>(
        server: server, publicBaseURL: "https://api.example.com", requiredScopes: ["api.read"],
        logger: logger, refusalLogLevel: .info,
        onRefusal: { refusal in print("refused: \(refusal.code)") }) // count here
    // docs/resource-server.md hummingbird-logging ends
    return refusals
}

/// docs/resource-server.md quotes the examples above word for word; the route closure answers as it says.
struct HummingbirdResourceServerDocsExamplesTests {
    static let imports = "import Hummingbird\nimport MooseHummingbird\nimport MooseResourceServer\n\n"

    @Test(arguments: [
        ("hummingbird-route", imports), ("hummingbird", imports),
        (
            "hummingbird-logging",
            "import Hummingbird\nimport Logging\nimport MooseHummingbird\nimport MooseResourceServer\n\n"
        )
    ])
    func theResourceServerPageQuotesTheCompiledHummingbirdExample(_ name: String, _ imports: String) throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = here.deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/resource-server.md"), encoding: .utf8)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let begin = try #require(source.range(of: "    // docs/resource-server.md \(name) begins\n"))
        let end = try #require(source.range(of: "    // docs/resource-server.md \(name) ends"))
        let example = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }.joined(separator: "\n")
        #expect(
            page.contains("```swift\n" + imports + example + "```"),
            "docs/resource-server.md's \(name) example differs from HummingbirdResourceServerDocsExamples.swift")
    }

    /// The route closure's `do throws(ResourceServerRefusal)`: 401 with the challenges without a token, 200 with one.
    @Test func theRouteClosureAnswersRefusalsWithTheirHeaders() async throws {
        let key = try PrivateKey.generate(.ec(.p256))
        let signer = try JWTSigner(key: JWTKey(privateKey: key, keyID: "k1"), algorithm: .es256)
        let now = Int64(Date().timeIntervalSince1970)
        let token = try signer.sign(
            [
                "iss": "https://id.example.com", "sub": "alice", "aud": "https://api.example.com", "client_id": "app",
                "exp": .number(JSONNumber(now + 300)), "iat": .number(JSONNumber(now)), "jti": "t1",
                "scope": "api.read"
            ], extraHeader: ["typ": "at+jwt"])
        let server = ResourceServer(
            configuration: ResourceServerConfiguration(
                issuer: "https://id.example.com", resource: "https://api.example.com", algorithms: [.es256]),
            keys: StaticAccessTokenKeys([try JWTKey(publicKey: key.publicKey(), keyID: "k1")]))
        let app = Application(router: greetingRouter(server: server))
        try await app.test(.router) { client in
            try await client.execute(uri: "/greeting", method: .get) { response in
                #expect(response.status == .unauthorized)
                #expect(response.headers[values: .wwwAuthenticate].count == 2)
                #expect(response.headers[.cacheControl] == "no-store")
            }
            try await client.execute(uri: "/greeting", method: .get, headers: [.authorization: "Bearer \(token)"]) {
                response in
                #expect(response.status == .ok && String(buffer: response.body) == "hello alice")
            }
        }
    }
}
#endif
