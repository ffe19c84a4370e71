#if MooseMCP
import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseTestSupport
import Testing
import HTTPTypes

extension MCPServerTests {
    /// The README's example, run against the server answering SSE (the Python SDK's default): it
    /// connects, lists the tools and calls one — on Linux through the Moose configuration its
    /// `HTTPClientTransport(endpoint:streaming:authorizer:)` line picks (without it, the SDK hands the
    /// event stream to the client undecoded and `initialize` never returns).
    @Test func readmeExampleConnectsListsAndCalls() async throws {
        try await MCPTestServer.reset()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-readme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let client = try await connectToMCPServer(Self.url, storeFolder: folder) { url in
            try await MCPTestServer.approve(url)
        }
        #expect(try await listAndCall(client) == "hello")
        await client.disconnect()
        // A second run finds the session in the store: no new login, no new registration.
        let again = try await connectToMCPServer(Self.url, storeFolder: folder) { _ in Issue.record("logged in again") }
        #expect(try await listAndCall(again) == "hello")
        await again.disconnect()
        let stats = try await MCPTestServer.stats()
        #expect(Self.stat(stats, "registrations") == 1 && Self.stat(stats, "authorize_requests") == 1)
        // initialize, tools/list and tools/call, twice: all answered as event streams.
        #expect(
            Self.stat(stats, "response_types", "POST 200 text/event-stream") == 6,
            "\(String(describing: stats["response_types"]))")
    }

    /// The README quotes the example word for word.
    @Test func readmeQuotesTheExample() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("docs/mcp.md"), encoding: .utf8)
        let source = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("ReadmeMCPExample.swift"), encoding: .utf8)
        let begin = try #require(source.range(of: "// README example begins\n"))
        let end = try #require(source.range(of: "// README example ends"))
        let example = String(source[begin.upperBound..<end.lowerBound])
        #expect(
            readme.contains("```swift\n" + example + "```"),
            "docs/mcp.md's MCP example differs from ReadmeMCPExample.swift")
    }

    /// `moose mcp login SERVER_URL` discovers, registers and logs in; `moose token --resource` hands
    /// out a token the server takes (and refreshes naming the resource); `moose status` shows
    /// resource and issuer; `moose login --resource` under another profile works too.
    @Test func cliLogsInToAnMCPServerAndHandsOutItsToken() async throws {
        try await MCPTestServer.reset()
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("moose-mcp-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        func moose(_ arguments: String...) -> (Int32, String) { Self.moose(in: home, arguments) }
        let url = Self.resource
        let (loginStatus, login) = moose("mcp", "login", url)
        #expect(loginStatus == 0 && login.contains("Logged in to \(Self.issuer) for \(url)"), "\(login)")
        let (tokenStatus, tokenOutput) = moose("token", "--resource", url)
        let token = tokenOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(tokenStatus == 0 && token.hasPrefix("mat_"))
        #expect(try await Self.initialize(bearer: token) == 200, "the MCP server takes the token")
        #expect(try await Self.initialize(bearer: "mat_forged") == 401)

        let (_, status) = moose("status", "--json")
        let sessions = try #require(try JSONValue(parsing: Array(status.utf8)).arrayValue)
        #expect(
            sessions.first?["resource"]?.stringValue == url && sessions.first?["issuer"]?.stringValue == Self.issuer)
        let (_, human) = moose("status")
        #expect(human.contains("at \(Self.issuer) for \(url)"), "\(human)")

        // A refresh names the resource again (RFC 8707). (`token --min-validity` longer than the
        // provider's tokens live no longer forces one: margins are capped at a share of the lifetime.)
        try await MCPTestServer.reset(statsOnly: true)
        let (refreshCommandStatus, refreshOutput) = moose("refresh", "--profile", url)
        #expect(refreshCommandStatus == 0, "\(refreshOutput)")
        let (refreshStatus, refreshed) = moose("token", "--resource", url)
        #expect(refreshStatus == 0 && refreshed.trimmingCharacters(in: .whitespacesAndNewlines) != token)
        let stats = try await MCPTestServer.stats()
        #expect(Self.stat(stats, "refreshes") == 1)
        #expect(
            stats["token_log"]?.arrayValue?.last?["resource"]?.stringValue == url, "resource on the refresh request")

        // The long form, under a profile of its own: now two sessions are for the resource.
        let (secondStatus, second) = moose("login", "--resource", url, "--profile", "second")
        #expect(secondStatus == 0, "\(second)")
        let (ambiguous, _) = moose("token", "--resource", url)
        #expect(ambiguous == 2, "two profiles hold sessions for the resource: --profile chooses")
        let (chosen, _) = moose("token", "--resource", url, "--profile", "second")
        #expect(chosen == 0)
        let (wrong, _) = moose("token", "--resource", "http://127.0.0.1:1/other", "--profile", "second")
        #expect(wrong == 1, "a token goes only to its own resource")
        // A logout of the second keeps its plan, not its session: the resource has one session again.
        // (This server refuses the revocation: the logout says so, exit 1, and wipes the session all the same.)
        let (_, loggedOut) = moose("logout", "--profile", "second")
        #expect(loggedOut.contains("Logged out of profile second"), "\(loggedOut)")
        let (single, output) = moose("token", "--resource", url)
        #expect(single == 0, "a row a logout left is a session for nothing: \(output)")
    }

    /// A server URL that cannot be a resource is a usage error in the words of what was typed: no
    /// `--resource` the person never gave, the library's code last.
    @Test func aURLThatCannotBeAResourceIsSaidAsTyped() {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("moose-mcp-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let (status, said) = Self.moose(in: home, ["mcp", "login", "mcp.example.com"], withErrors: true)
        #expect(
            status == 2 && said.contains("is not an absolute http(s) URL [invalidConfiguration]")
                && !said.contains("--resource"), "\(said)")
    }

    /// A `moose mcp login` nobody finished keeps the client it registered (the next login uses it: no
    /// second registration), and every command says what that row is — nobody logged in yet — not a
    /// session that "needs a new login" because "its refresh token was refused" (what they said before).
    @Test func aLoginThatDidNotFinishKeepsItsRegistrationAndSaysSo() async throws {
        try await MCPTestServer.reset()
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("moose-mcp-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        func moose(_ arguments: String...) -> (Int32, String) { Self.moose(in: home, arguments, withErrors: true) }
        let url = Self.resource
        let (unfinished, said) = moose("mcp", "login", url, "--no-browser", "--timeout", "1")
        #expect(
            unfinished == 1 && said.contains("[timedOut]") && said.contains("run the same command again")
                && !said.contains("paste"), "\(said)")

        let (_, status) = moose("status")
        #expect(status.contains("not logged in yet") && !status.contains("needs login"), "\(status)")
        let (_, list) = moose("profile", "list")
        #expect(list.contains("\(url) (client registered, not logged in yet)"), "\(list)")
        let (tokenStatus, token) = moose("token", "--resource", url)
        #expect(
            tokenStatus == 1 && token.contains("is not logged in yet") && !token.contains("refresh token was refused"),
            "\(token)")

        // The next step every one of them prints: the same resource login, finished now — the
        // server's scope asked for (its scopes_supported), the kept client used.
        #expect(status.contains("run moose login --profile \(url)"), "\(status)")
        let (loginStatus, login) = moose("login", "--profile", url)
        #expect(loginStatus == 0 && login.contains("for \(url)"), "\(login)")
        let stats = try await MCPTestServer.stats()
        #expect(Self.stat(stats, "registrations") == 1, "the login registered a second client")
        let authorize = try #require(stats["authorize_log"]?.arrayValue?.last)
        #expect(authorize["scopes"]?.arrayValue?.compactMap(\.stringValue) == ["mcp:tools"], "\(authorize)")
        let (_, again) = moose("status")
        #expect(again.contains("active") && again.contains("scopes: mcp:tools"), "\(again)")
    }

    /// `moose` with `arguments`, its store and config under `home`, the MCP test server's approving
    /// script as the browser; its exit status and standard output — and its standard error too
    /// (`withErrors`, with standard input empty: no address to paste).
    static func moose(in home: URL, _ arguments: [String], withErrors: Bool = false) -> (Int32, String) {
        let command =
            [
                "/usr/bin/env", "XDG_DATA_HOME=\(home.path)/data", "XDG_CONFIG_HOME=\(home.path)/config",
                "MOOSE_STORE_KEY=", "BROWSER=\(LocalServer.repositoryRoot)/tools/mcp/approve", MooseCLI.binary
            ] + arguments
        guard withErrors else { return runCapturingStdout(command) }
        return runCapturingStdout(["/bin/sh", "-c", "exec \"$0\" \"$@\" < /dev/null 2>&1"] + command)
    }

    /// An MCP `initialize` POST with `Authorization: Bearer token`; the HTTP status.
    static func initialize(bearer token: String) async throws -> Int {
        let body =
            #"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#
        let request = APIRequest(
            method: .post, url: url,
            headerFields: [
                .authorization: "Bearer \(token)", .contentType: "application/json",
                .accept: "application/json, text/event-stream"
            ],
            body: Data(body.utf8), timeout: 10)
        return try await CurlTransport().send(request).status.code
    }
}

/// The `moose` binary: `$MOOSE_BIN`, or next to the test bundle.
enum MooseCLI {
    static let binary: String = {
        if let path = ProcessInfo.processInfo.environment["MOOSE_BIN"],
            FileManager.default.isExecutableFile(atPath: path)
        {
            return path
        }
        return builtExecutable("moose")
    }()
}
#endif
