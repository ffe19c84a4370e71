public import Foundation
import MooseHTTP
public import MooseJWT
import HTTPTypes

/// The repository's test MCP server (tools/mcp: the Python MCP SDK with OAuth, one process both
/// authorization server and resource server), answering JSON rather than SSE.
///
/// `url` is `$MOOSE_MCP_URL` when tools/test started it, else tools/mcp/start runs (idempotent) with
/// `MOOSE_MCP_JSON_RESPONSE=1` on `$MOOSE_MCP_PORT` (8931); `nil` when it cannot run here.
public enum MCPTestServer {
    /// `http://127.0.0.1:<port>/mcp`: the MCP endpoint and RFC 8707 resource.
    public static let url: String? = {
        if let url = ProcessInfo.processInfo.environment["MOOSE_MCP_URL"], !url.isEmpty { return url }
        let script = LocalServer.repositoryRoot + "/tools/mcp/start"
        let (status, output) = runCapturingStdout(["/usr/bin/env", "MOOSE_MCP_JSON_RESPONSE=1", script])
        guard status == 0, let url = output.split(separator: "\n").last.map(String.init), url.hasPrefix("http") else { return nil }
        return url
    }()

    /// Why the MCP tests cannot run, for a skip message.
    public static let unavailable = "the test MCP server (tools/mcp/start) could not start here"

    /// The issuer: the server's origin.
    public static var issuer: String? { url.map { String($0.dropLast("/mcp".count)) } }

    static let transport = CurlTransport()

    /// `GET /_test/stats`: the server's counters (tools/mcp/README.md).
    public static func stats() async throws -> JSONValue {
        try await control(.get, "/_test/stats", body: nil)
    }

    /// `POST /_test/reset`: forget clients, tokens, modes and counters (or only the counters).
    public static func reset(statsOnly: Bool = false) async throws {
        _ = try await control(.post, "/_test/reset", body: statsOnly ? #"{"stats_only": true}"# : "{}")
    }

    /// `POST /_test/mode` with a JSON object (`{"iss":"forge"}`, `{"expire_all":true}`…).
    public static func mode(_ json: String) async throws {
        _ = try await control(.post, "/_test/mode", body: json)
    }

    /// Plays the user's browser on this server's auto-approving `/authorize`: GETs the authorization
    /// URL (no redirects followed), then delivers its 302 to the loopback redirect URI.
    public static func approve(_ authorizationURL: URL) async throws {
        let answer = try await transport.send(APIRequest(url: authorizationURL, timeout: 10))
        guard (300..<400).contains(answer.status.code), let location = answer.headerFields[.location],
              let callback = URL(string: location) else {
            throw HTTPRequestError.transportFailure("/authorize answered \(answer.status.code), not a redirect",
                                                    APIRequest(url: authorizationURL))
        }
        _ = try await transport.send(APIRequest(url: callback, timeout: 10))
    }

    private static func control(_ method: HTTPRequest.Method, _ path: String, body: String?) async throws -> JSONValue {
        guard let issuer, let url = URL(string: issuer + path) else { throw HTTPRequestError.transportFailure(unavailable, APIRequest(url: URL(fileURLWithPath: "/"))) }
        var request = APIRequest(method: method, url: url, timeout: 10)
        if let body {
            request.headerFields[.contentType] = "application/json"
            request.body = Data(body.utf8)
        }
        let response = try await transport.send(request)
        guard response.status.code == 200 else {
            throw HTTPRequestError.transportFailure("\(path) answered \(response.status.code)", request)
        }
        return try JSONValue(parsing: Array(response.body))
    }
}
