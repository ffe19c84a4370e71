public import Foundation
import MooseHTTP
public import MooseJWT
import HTTPTypes

/// The repository's test MCP servers (tools/mcp: the Python MCP SDK with OAuth, one process both
/// authorization server and resource server): `sse` answers MCP POSTs with `text/event-stream` (the
/// Python SDK's default), `json` with `application/json` (`MOOSE_MCP_JSON_RESPONSE=1`). Each has
/// its own clients, tokens, modes and counters.
///
/// `url` is `$MOOSE_MCP_URL` (`$MOOSE_MCP_JSON_URL`) when tools/test started it, else tools/mcp/start
/// runs (idempotent) on `$MOOSE_MCP_PORT` (8931) or `$MOOSE_MCP_JSON_PORT` (8932); `nil` when it
/// cannot run here.
public struct MCPTestServer: Sendable {
    /// `http://127.0.0.1:<port>/mcp`: the MCP endpoint and RFC 8707 resource.
    public let url: String
    /// `true` for the server answering JSON, `false` for the one answering SSE.
    public let answersJSON: Bool

    /// The server answering SSE (the Python SDK's default), or `nil` when it cannot run here.
    public static let sse: MCPTestServer? = start(
        variable: "MOOSE_MCP_URL", port: "MOOSE_MCP_PORT", defaultPort: 8931, json: false)
    /// The server answering JSON, or `nil` when it cannot run here.
    public static let json: MCPTestServer? = start(
        variable: "MOOSE_MCP_JSON_URL", port: "MOOSE_MCP_JSON_PORT", defaultPort: 8932, json: true)

    static func start(variable: String, port: String, defaultPort: Int, json: Bool) -> MCPTestServer? {
        let environment = ProcessInfo.processInfo.environment
        if let url = environment[variable], !url.isEmpty { return MCPTestServer(url: url, answersJSON: json) }
        let chosen =
            environment[port].flatMap(Int.init).map { (1024...65535).contains($0) ? $0 : defaultPort } ?? defaultPort
        let script = LocalServer.repositoryRoot + "/tools/mcp/start"
        let (status, output) = runCapturingStdout([
            "/usr/bin/env", "MOOSE_MCP_PORT=\(chosen)", "MOOSE_MCP_JSON_RESPONSE=\(json ? 1 : 0)", script
        ])
        guard status == 0, let url = output.split(separator: "\n").last.map(String.init), url.hasPrefix("http") else {
            return nil
        }
        return MCPTestServer(url: url, answersJSON: json)
    }

    /// The SSE server's URL (most tests use it), `nil` when it cannot run.
    public static var url: String? { sse?.url }

    /// Why the MCP tests cannot run, for a skip message.
    public static let unavailable = "the test MCP server (tools/mcp/start) could not start here"

    /// The issuer: the server's origin.
    public var issuer: String { String(url.dropLast("/mcp".count)) }

    /// The SSE server's issuer.
    public static var issuer: String? { sse?.issuer }

    static let transport = CurlTransport()

    /// `GET /_test/stats`: the server's counters (tools/mcp/README.md).
    public func stats() async throws -> JSONValue {
        try await control(.get, "/_test/stats", body: nil)
    }

    /// `POST /_test/reset`: forget clients, tokens, modes and counters (or only the counters).
    public func reset(statsOnly: Bool = false) async throws {
        _ = try await control(.post, "/_test/reset", body: statsOnly ? #"{"stats_only": true}"# : "{}")
    }

    /// `POST /_test/mode` with a JSON object (`{"iss":"forge"}`, `{"expire_all":true}`…).
    public func mode(_ json: String) async throws {
        _ = try await control(.post, "/_test/mode", body: json)
    }

    /// The SSE server's counters.
    public static func stats() async throws -> JSONValue { try await required().stats() }
    /// Resets the SSE server.
    public static func reset(statsOnly: Bool = false) async throws { try await required().reset(statsOnly: statsOnly) }
    /// Sets modes of the SSE server.
    public static func mode(_ json: String) async throws { try await required().mode(json) }

    static func required() throws -> MCPTestServer {
        guard let sse else {
            throw HTTPRequestError.transportFailure(unavailable, APIRequest(url: URL(fileURLWithPath: "/")))
        }
        return sse
    }

    /// Plays the user's browser on this server's auto-approving `/authorize`: GETs the authorization
    /// URL (no redirects followed), then delivers its 302 to the loopback redirect URI.
    public static func approve(_ authorizationURL: URL) async throws {
        let answer = try await transport.send(APIRequest(url: authorizationURL, timeout: 10))
        guard (300..<400).contains(answer.status.code), let location = answer.headerFields[.location],
            let callback = URL(string: location)
        else {
            throw HTTPRequestError.transportFailure(
                "/authorize answered \(answer.status.code), not a redirect",
                APIRequest(url: authorizationURL))
        }
        _ = try await transport.send(APIRequest(url: callback, timeout: 10))
    }

    private func control(_ method: HTTPRequest.Method, _ path: String, body: String?) async throws -> JSONValue {
        guard let url = URL(string: issuer + path) else {
            throw HTTPRequestError.transportFailure(Self.unavailable, APIRequest(url: URL(fileURLWithPath: "/")))
        }
        var request = APIRequest(method: method, url: url, timeout: 10)
        if let body {
            request.headerFields[.contentType] = "application/json"
            request.body = Data(body.utf8)
        }
        let response = try await Self.transport.send(request)
        guard response.status.code == 200 else {
            throw HTTPRequestError.transportFailure("\(path) answered \(response.status.code)", request)
        }
        return try JSONValue(parsing: Array(response.body))
    }
}
