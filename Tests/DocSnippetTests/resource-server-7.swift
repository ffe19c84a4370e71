// docs/resource-server.md, ```swift block 7: the region is quoted there word for word (DocSnippetTests).
#if MooseVapor
import MooseResourceServer
import MooseVapor
import Vapor

enum ResourceServer7 {
    static func snippet(server: MooseResourceServer.ResourceServer) async throws {
        // snippet begins
        let document = ProtectedResourceDocument(for: server, scopesSupported: ["api.read"])
        let app = try await Application.make(.detect())
        document.addRoute(to: app) // GET /.well-known/oauth-protected-resource, no token
        let protected = app.grouped(
            ResourceServerMiddleware(
                server: server, publicBaseURL: "https://api.example.com",
                requiredScopes: ["api.read"]))
        protected.get("items") { req in "hello \(req.verifiedPrincipal?.subject ?? "")" }
        // Or Vapor's own shape: req.auth.require(AuthenticatedPrincipal.self).verified is the same caller.
        try await app.execute()
        try await app.asyncShutdown()
        // snippet ends
    }
}
#endif
