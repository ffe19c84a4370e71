// docs/mcp.md, ```swift block 1: the region is quoted there word for word (DocSnippetTests).
#if MooseMCP
import Foundation
import MCP
import MooseMCP
import MooseOAuth
import MooseOAuthSystem
import MooseSQLiteStorage
import MooseSecretStore

enum MCP1 {
    // snippet begins
    /// Connects to the MCP server at `serverURL`; the first time, the user signs in in a browser.
    func connectToMCPServer(
        _ serverURL: URL, storeFolder: URL,
        openBrowser: @escaping @Sendable (URL) async throws -> Void
    ) async throws -> Client {
        // Tokens and the client's registration, encrypted at rest; processes may share the file.
        let store = try SecretStore(
            path: storeFolder.appendingPathComponent("store.sqlite").path,
            masterKey: .keyFile(storeFolder.appendingPathComponent("store.key").path))
        // Discovery, registration, login, refresh and step-up: the MCP authorization specification.
        let authorizer = try MooseMCPAuthorizer(
            serverURL: serverURL, storage: EncryptedSessionStorage(store: store),
            login: .loopback(open: openBrowser))
        let transport = HTTPClientTransport(endpoint: serverURL, streaming: false, authorizer: authorizer)
        let client = Client(name: "my-app", version: "1.0")
        _ = try await client.connect(transport: transport)
        return client
    }

    func listAndCall(_ client: Client) async throws -> String {
        let tools = try await client.listTools().tools
        print("tools:", tools.map(\.name).joined(separator: ", "))
        let (content, _) = try await client.callTool(name: "echo", arguments: ["text": "hello"])
        guard case .text(let text, _, _)? = content.first else { return "" }
        return text
    }
    // snippet ends
}
#endif
