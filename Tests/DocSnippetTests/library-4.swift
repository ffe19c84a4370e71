// docs/library.md, ```swift block 4: the region is quoted there word for word (DocSnippetTests).
import MooseHTTP
import MooseOAuth

func library4(storage: any SessionStorage, transport: any HTTPTransport) async throws {
    // snippet begins
    // Whatever made the session (moose login --workload …, another app, a replica): renew it as it says.
    let moose = try await TokenManager.open(key: "deployer", storage: storage, transport: transport)
    let token = try await moose.accessToken()
    // snippet ends
    _ = token
}
