// docs/resource-server.md, ```swift block 4: the region is quoted there word for word (DocSnippetTests).
#if MooseHummingbird
import Hummingbird
import MooseHummingbird
import MooseResourceServer

enum ResourceServer4 {
    static func snippet(server: ResourceServer) -> Router<BasicRequestContext> {
        // snippet begins
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
        // snippet ends
        return router
    }
}
#endif
