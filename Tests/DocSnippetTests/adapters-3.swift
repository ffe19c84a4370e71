// docs/adapters.md, ```swift block 3: the region is quoted there word for word (DocSnippetTests).
#if MooseAsyncHTTPClient
import AsyncHTTPClient
import Foundation
import MooseAsyncHTTPClient
import MooseOAuth

func adapters3(issuer: String, clientID: String, clientSecret: String, minimumValidity: TimeInterval) async throws {
    // snippet begins
    // One HTTPClient for the whole service: the identity provider's traffic and the API's share its pool.
    var httpConfiguration = HTTPClient.Configuration()
    httpConfiguration.redirectConfiguration = .disallow // token traffic never follows a redirect
    let httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)

    var refresh = RefreshCoordinator.Configuration()
    refresh.minimumValidity = minimumValidity // refresh when less than this is left
    let moose = TokenManager(
        issuer: issuer, clientID: clientID, authentication: .clientSecretBasic(clientSecret),
        storage: InMemorySessionStorage(), transport: HTTPClientTransport(client: httpClient),
        scopes: ["read"], configuration: refresh)
    try await moose.login(with: .clientCredentials)
    // snippet ends
    try await httpClient.shutdown()
}
#endif
