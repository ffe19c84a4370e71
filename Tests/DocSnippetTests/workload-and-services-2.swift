// docs/workload-and-services.md, ```swift block 2: the region is quoted there word for word (DocSnippetTests).
import MooseHTTP
import MooseOAuth
import MooseURLSession

func workload2(storage: any SessionStorage) async throws {
    // snippet begins
    let workload = WorkloadGrant(identity: .file("/var/run/secrets/tokens/moose"), grant: .jwtBearer)
    let moose = TokenManager(
        issuer: "https://id.example.com", clientID: "deployer", storage: storage,
        transport: URLSessionTransport(), scopes: [], workload: workload)
    try await moose.login(with: .workload)
    // snippet ends
}
