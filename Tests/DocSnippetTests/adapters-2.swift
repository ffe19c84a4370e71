// docs/adapters.md, ```swift block 2: the region is quoted there word for word (DocSnippetTests).
#if ExampleService
import AsyncHTTPClient
import Foundation
import Hummingbird
import MooseExampleAPI
import MooseOAuth
import MooseOpenAPI
import OpenAPIAsyncHTTPClient

enum Adapters2 {
    /// The example service's answer (tools/example-service).
    struct WhoAmI: ResponseCodable {
        let clientID: String
        let tokenFingerprint: String
    }

    static func service(apiURL: URL, httpClient: HTTPClient, moose: TokenManager) -> Router<BasicRequestContext> {
        // snippet begins
        // The generated client; Moose's middleware puts a valid token on every call and, on a 401, refreshes
        // once (however many handlers saw it) and sends the call once more.
        let api = Client(
            serverURL: apiURL,
            transport: AsyncHTTPClientTransport(configuration: .init(client: httpClient)),
            middlewares: [AccessTokenMiddleware(coordinator: moose.coordinator)])

        let router = Router()
        router.get("/whoami") { [api] _, _ -> WhoAmI in
            let me = try await api.getMe().ok.body.json // GET /v1/me with the service's token
            return WhoAmI(clientID: me.clientId, tokenFingerprint: me.tokenFingerprint)
        }
        // snippet ends
        return router
    }
}
#endif
