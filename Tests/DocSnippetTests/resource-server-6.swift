// docs/resource-server.md, ```swift block 6: the region is quoted there word for word (DocSnippetTests).
#if MooseHummingbird
import Hummingbird
import Logging
import MooseHummingbird
import MooseResourceServer

enum ResourceServer6 {
    struct APIContext: ResourceServerRequestContext {
        var coreContext: CoreRequestContextStorage
        var principal: VerifiedPrincipal?
        init(source: Source) { coreContext = .init(source: source) }
    }

    static func snippet(server: ResourceServer) -> ResourceServerMiddleware<APIContext> {
        // snippet begins
        var logger = Logger(label: "api.auth")
        logger.logLevel = .info // .debug or .info: refusals appear; .notice: they do not
        let refusals = ResourceServerMiddleware<APIContext>(
            server: server, publicBaseURL: "https://api.example.com", requiredScopes: ["api.read"],
            logger: logger, refusalLogLevel: .info,
            onRefusal: { refusal in print("refused: \(refusal.code)") }) // count here
        // snippet ends
        return refusals
    }
}
#endif
