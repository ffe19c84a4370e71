// docs/adapters.md, ```swift block 4: the region is quoted there word for word (DocSnippetTests).
#if MooseObservability
import MooseHTTP
import MooseOAuth
import MooseObservability
import MooseURLSession

func adapters4(issuer: String, storage: any SessionStorage) {
    // snippet begins
    let transport = ObservedTransport(URLSessionTransport())
    let observed = ObservedSessionStorage.wrapping(storage) // keeps PostgreSQL's release notifications
    let moose = TokenManager(issuer: issuer, clientID: "svc", storage: observed, transport: transport)
    CoordinatorMetrics.record(moose.coordinator) // refreshes, logouts and the single flight's steps
    // snippet ends
}
#endif
