// docs/resource-server.md, ```swift block 2: the region is quoted there word for word (DocSnippetTests).
import MooseHTTP
import MooseOAuth
import MooseResourceServer

enum ResourceServer2 {
    static func snippet() async throws -> ResourceServer {
        // snippet begins
        let transport = CurlTransport()
        let provider = try await Discovery.fetch(issuer: "https://id.example.com", transport: transport)
        // The issuer's exact iss and its keys (jwks_uri; a provider without one is missingEndpoint).
        let server = try ResourceServer(
            metadata: provider, resource: "https://api.example.com", algorithms: [.rs256, .es256], transport: transport
        ) { configuration in
            // resource_metadata in every challenge: where the document below is served
            configuration.resourceMetadataURL = ProtectedResourceDocument.url(for: configuration.resource)
        }
        // What this API publishes (RFC 9728), stated by the verifier: serve document.json at
        // document.wellKnownPath, no token needed.
        let document = ProtectedResourceDocument(for: server, scopesSupported: ["api.read"])
        // snippet ends
        _ = document
        return server
    }
}
