// docs/mcp.md, ```swift block 5: the region is quoted there word for word (DocSnippetTests).
#if MooseMCP
import Foundation
import MCP
import MooseHTTP
import MooseMCP
import MooseOAuth
import MooseResourceServer

func mcp5(endpoint: String, jwksURI: URL, transport: any HTTPTransport) -> (StatelessHTTPServerTransport, String) {
    // snippet begins
    var configuration = ResourceServerConfiguration(
        issuer: "https://id.example.com", resource: endpoint, algorithms: [.rs256, .es256],
        dpop: .disabled) // Bearer only: the validator cannot check a DPoP proof's jti
    configuration.resourceMetadataURL = ProtectedResourceDocument.url(for: endpoint)
    let verifier = ResourceServer(configuration: configuration, keys: StaticAccessTokenKeys([]))
    let keys = WarmAccessTokenKeys(source: JWKSCache(url: jwksURI, transport: transport)) // refreshed by keys.run()
    let validator = ResourceServerValidator(server: verifier, keys: keys, requiredScopes: ["mcp"])
    let mcpTransport = StatelessHTTPServerTransport(
        validationPipeline: StandardValidationPipeline(validators: [
            validator, OriginValidator.localhost(), AcceptHeaderValidator(mode: .jsonOnly), ContentTypeValidator(),
            ProtocolVersionValidator()
        ]))
    // Served by the app's HTTP server at document.wellKnownPath, without a token: document.json.
    let document = ProtectedResourceDocument(for: verifier, scopesSupported: ["mcp"])
    // snippet ends
    return (mcpTransport, document.json)
}
#endif
