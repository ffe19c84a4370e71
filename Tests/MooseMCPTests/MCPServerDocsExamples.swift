// docs/mcp.md, "Server side": the code between the markers is quoted there word for word
// (MCPServerDocsExamplesTests checks it), and compiled here with the trait.
#if MooseMCP
import Foundation
import MCP
import MooseHTTP
import MooseMCP
import MooseOAuth
import MooseResourceServer
import Testing

/// The quick start: a protected MCP server's parts, given the app's own HTTP server (`serve` hands it every
/// request to the MCP endpoint and to the metadata path as the SDK's `HTTPRequest`).
func protectedMCPServer(
    serve: @escaping @Sendable (@escaping @Sendable (MCP.HTTPRequest) async -> MCP.HTTPResponse) async throws -> Void
)
    async throws
{
    // docs/mcp.md server begins
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
    // docs/mcp.md server ends
}

/// docs/mcp.md quotes the example above word for word.
struct MCPServerDocsExamplesTests {
    static let imports =
        "import Foundation\nimport MCP\nimport MooseHTTP\nimport MooseMCP\nimport MooseOAuth\nimport MooseResourceServer\n\n"

    @Test func theMCPPageQuotesTheCompiledServerExample() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = here.deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/mcp.md"), encoding: .utf8)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let begin = try #require(source.range(of: "    // docs/mcp.md server begins\n"))
        let end = try #require(source.range(of: "    // docs/mcp.md server ends"))
        let example = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }.joined(separator: "\n")
        #expect(
            page.contains("```swift\n" + Self.imports + example + "```"),
            "docs/mcp.md's server example differs from MCPServerDocsExamples.swift")
    }
}
#endif
