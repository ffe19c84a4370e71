// docs/resource-server.md, ```swift block 8: the region is quoted there word for word (DocSnippetTests).
#if MooseOpenAPI
import Logging
import MooseOpenAPI
import MooseResourceServer

enum ResourceServer8 {
    static func snippet(server: ResourceServer) -> String {
        // snippet begins
        let middleware = ResourceServerOpenAPIMiddleware(
            server: server, publicBaseURL: "https://api.example.com",
            requiredScopes: ["api.read"], // every operation not named below
            scopesByOperation: ["deleteItem": ["api.read", "api.write"]], // operationId → the scopes it needs
            publicOperations: ["getHealth"], // served without a token
            logger: Logger(label: "api.auth"), refusalLogLevel: .info, // each refusal's reason, never the token
            onRefusal: { refusal in print("refused: \(refusal.code)") }) // count here
        // With the generated server and your framework's transport (swift-openapi-hummingbird, -vapor…):
        // try Handler().registerHandlers(on: transport, serverURL: URL(string: "/")!, middlewares: [middleware])

        // In a handler (a method of the generated APIProtocol): the caller the middleware verified.
        let greeting: @Sendable () -> String = {
            guard let caller = ResourceServerPrincipal.current else { return "hello, whoever you are" } // getHealth
            return "hello \(caller.subject) (client \(caller.clientID), scopes \(caller.scopes.joined(separator: " ")))"
        }
        // snippet ends
        _ = middleware
        return greeting()
    }
}
#endif
