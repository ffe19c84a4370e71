// docs/observability.md, ```swift block 2: the region is quoted there word for word (DocSnippetTests).
#if MooseObservability && MooseHummingbird
import Hummingbird
import MooseHummingbird
import MooseObservability
import MooseResourceServer

enum Observability2 {
    struct APIContext: ResourceServerRequestContext {
        var coreContext: CoreRequestContextStorage
        var principal: VerifiedPrincipal?
        init(source: Source) { coreContext = .init(source: source) }
    }

    static func snippet(server: ResourceServer) -> ResourceServerMiddleware<APIContext> {
        // snippet begins
        let refusals = RefusalCounter()
        let auth = ResourceServerMiddleware<APIContext>(
            server: server, publicBaseURL: "https://api.example.com", onRefusal: refusals.onRefusal)
        // snippet ends
        return auth
    }
}
#endif
