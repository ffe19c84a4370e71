// docs/resource-server.md, ```swift block 5: the region is quoted there word for word (DocSnippetTests).
#if MooseHummingbird
import Hummingbird
import MooseHummingbird
import MooseResourceServer

enum ResourceServer5 {
    static func snippet(server: ResourceServer) async throws {
        // snippet begins
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
        // snippet ends
    }
}
#endif
