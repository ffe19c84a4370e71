// docs/mcp.md, ```swift block 4: the region is quoted there word for word (DocSnippetTests).
#if MooseMCP
import Foundation
import MCP
import MooseHTTP
import MooseMCP
import MooseOAuth
import MooseResourceServer

enum MCP4 {
    typealias Handler = @Sendable (MCP.HTTPRequest) async -> MCP.HTTPResponse

    static func snippet(serve: @escaping @Sendable (@escaping Handler) async throws -> Void) async throws {
        // snippet begins
        let endpoint = "https://mcp.example.com/mcp" // the MCP endpoint: its canonical URI is the resource
        var configuration = ResourceServerConfiguration(
            issuer: "https://id.example.com", resource: endpoint,
            algorithms: [.rs256, .es256])
        // …/.well-known/oauth-protected-resource/mcp in every 401
        configuration.resourceMetadataURL = ProtectedResourceDocument.url(for: endpoint)
        let verifier = ResourceServer(
            configuration: configuration,
            keys: JWKSCache(url: URL(string: "https://id.example.com/jwks")!, transport: CurlTransport()))
        let gate = MCPResourceGate(
            server: verifier, document: ProtectedResourceDocument(for: verifier, scopesSupported: ["mcp"]),
            publicBaseURL: "https://mcp.example.com", requiredScopes: ["mcp"])

        try await serve { request in // POST /mcp and GET /.well-known/oauth-protected-resource/mcp
            // An MCP server of its own for each request and its verified caller: users never share one.
            await gate.serve(request) { caller in
                let server = Server(name: "my-server", version: "1.0", capabilities: .init(tools: .init()))
                await server.withMethodHandler(CallTool.self) { _ in // caller is verified; the token is not there
                    CallTool.Result(content: [.text(text: "hello \(caller.subject)", annotations: nil, _meta: nil)])
                }
                return server
            }
        }
        // snippet ends
    }
}
#endif
