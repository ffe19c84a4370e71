// docs/mcp.md, ```swift block 6: the region is quoted there word for word (DocSnippetTests).
#if MooseMCP
import MCP
import MooseMCP

func mcp6(
    gate: MCPResourceGate,
    serve: @escaping @Sendable (@escaping @Sendable (MCP.HTTPRequest) async -> MCP.HTTPResponse) async throws -> Void
) async throws {
    // snippet begins
    // A session per `initialize`: a Server and a StatefulHTTPServerTransport of its own, bound to its caller.
    let sessions = MCPSessions(
        gate: gate, maximumSessions: 1024, maximumSessionsPerCaller: 16, idleTimeout: .seconds(900)
    ) { caller in // the caller who opened the session
        let server = Server(name: "my-server", version: "1.0", capabilities: .init(tools: .init()))
        await server.withMethodHandler(CallTool.self) { _ in
            // This request's caller: the session's user, with the scopes of the token it sent this time.
            let current = gate.principal(for: Server.currentHandlerContext?.httpContext)
            let name = current?.subject ?? caller.subject
            return CallTool.Result(content: [.text(text: "hello \(name)", annotations: nil, _meta: nil)])
        }
        return server
    }
    let sweeper = Task { // ends the sessions nobody used for idleTimeout
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(60))
            await sessions.closeIdleSessions()
        }
    }
    try await serve { request in await sessions.handle(request) } // POST, GET, DELETE /mcp; the document
    sweeper.cancel()
    await sessions.closeAll()
    // snippet ends
}
#endif
