// docs/dpop.md, ```swift block 1: the region is quoted there word for word (DocSnippetTests).
import MooseHTTP
import MooseOAuth
import MooseOAuthSystem

func dpop1(issuer: String, storage: any SessionStorage, transport: any HTTPTransport) async throws {
    // snippet begins
    let moose = TokenManager(issuer: issuer, clientID: "my-app", storage: storage, transport: transport, dpop: .es256)
    try await moose.login(with: .loopback { url in SystemBrowser().open(url) })
    let api = APIClient(transport: transport, middlewares: [moose.middleware]) // Authorization: DPoP … + DPoP: <proof>
    // snippet ends
    _ = api
}
