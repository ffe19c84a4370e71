// docs/refresh-coordinator.md, ```swift block 2: the region is quoted there word for word (DocSnippetTests).
import MooseHTTP
import MooseOAuth

func refreshCoordinator2(issuer: String, storage: any SessionStorage, transport: any HTTPTransport) async {
    // snippet begins
    let reachability = SystemReachability() // netlink on Linux, NWPathMonitor on Apple platforms
    reachability.start()
    var configuration = RefreshCoordinator.Configuration()
    configuration.reachability = reachability
    let moose = TokenManager(
        issuer: issuer, clientID: "my-app", storage: storage, transport: transport,
        configuration: configuration)
    let api = APIClient(transport: transport, middlewares: [moose.middleware], reachability: reachability)

    for await status in reachability.updates() { print(status) } // .online / .offline, current state first
    // snippet ends
    _ = api
}
