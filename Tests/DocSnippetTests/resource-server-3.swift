// docs/resource-server.md, ```swift block 3: the region is quoted there word for word (DocSnippetTests).
import MooseResourceServer

enum ResourceServer3 {
    typealias Answer = (status: Int, headers: [(name: String, value: String)], body: String)

    /// The region in a closure (a route handler's shape): `do throws(ResourceServerRefusal)` keeps `error` typed.
    static func handler(server: ResourceServer) -> @Sendable (String?, String?, String, String) async -> Answer {
        { authorization, dpop, method, path in
            // snippet begins
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
            // snippet ends
        }
    }
}
