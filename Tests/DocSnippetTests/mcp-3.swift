// docs/mcp.md, ```swift block 3: the region is quoted there word for word (DocSnippetTests).
#if MooseMCP
import Foundation
import MCP
import MooseMCP

func mcp3(serverURL: URL, authorizer: MooseMCPAuthorizer) async throws {
    // snippet begins
    let client = Client(name: "my-app", version: "1.0")
    _ = try await client.connect(transport: MooseMCPTransport(endpoint: serverURL, authorizer: authorizer))
    // snippet ends
    _ = client
}
#endif
