// docs/library.md, ```swift block 3: the region is quoted there word for word (DocSnippetTests).
import MooseHTTP
import MooseOAuth

func library3(storage: any SessionStorage, transport: any HTTPTransport) async throws {
    // snippet begins
    // Whatever made the session (moose login --workload …, another app, a replica): renew it as it says.
    let moose = try await TokenManager.open(key: "deployer", storage: storage, transport: transport)
    let token = try await moose.accessToken()
    // snippet ends
    _ = token
}
