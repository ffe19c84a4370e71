// docs/library.md, ```swift block 3: the region is quoted there word for word (DocSnippetTests).
import MooseHTTP
import MooseOAuth

func library3(storage: any SessionStorage, transport: any HTTPTransport) async throws {
    // snippet begins
    // A pod whose kubelet projects an identity token into a file: no secret on disk (or github, gitlab,
    // env:VAR, command:PROGRAM ARG…).
    var pod = SessionPlan(
        name: "deployer", issuer: "https://id.example.com", clientID: "deployer", scopes: [],
        grant: .workload(SessionPlan.Workload(source: "file:/var/run/secrets/tokens/moose")))
    pod.audience = "https://api.example.com"
    let workload = try TokenManager(plan: pod, storage: storage, transport: transport)
    try await workload.login(with: .workload)
    let token = try await workload.accessToken() // renewed with a fresh identity token when due

    // A service with its secret in a file (or .secretVariable(VAR, sending:), or .privateKey(file:keyID:)).
    let billing = SessionPlan(
        name: "billing", issuer: "https://id.example.com", clientID: "billing", scopes: ["invoices"],
        grant: .clientCredentials, credential: .secretFile("/run/secrets/billing", sending: .basic))
    let service = try TokenManager(plan: billing, storage: storage, transport: transport)
    try await service.login(with: .clientCredentials)
    // snippet ends
    _ = token
}
