#if MooseMCP
import Foundation
import MCP
import MooseJWT
import MooseMCP
import MooseTestSupport
import MooseURLSession
import NIOCore
import NIOPosix
import Testing

/// `MCPSessions` (docs/mcp.md, "Sessions: the stateful transport") with the official Python MCP SDK's client,
/// and what becomes of the standalone `GET` streams of its sessions: held, abandoned, resumed, idle.
@Suite(.serialized) struct MCPSessionsTests {
    typealias Deployment = MCPServerSideTests.StatefulDeployment

    /// The Python MCP SDK's client (mcp 2.3.0, `tools/mcp/swift_server_client.py sessions`) as alice and bob,
    /// each with a token of its own on a session of its own, both at once: 16 concurrent `whoami` calls each,
    /// every answer its own caller's (0 wrong, 0 hangs: every call bounded at 20 s); bob, with his own valid
    /// token, naming alice's `Mcp-Session-Id` gets 404 for a call and a `DELETE`, and her session goes on;
    /// her session survives her token's refresh (same user, same client: the same caller); the SDK's
    /// `GET` streams and `DELETE`s leave no session and no stream behind.
    @Test func thePythonSDKsClientAsTwoUsersAt16ConcurrentCallsEachGetsOnlyItsOwnAnswers() async throws {
        let deployment = try await Deployment.start()
        defer { Task { await deployment.stop() } }
        let script = LocalServer.repositoryRoot + "/tools/mcp/swift_server_client.py"
        let tokens = [try deployment.token("alice"), try deployment.token("bob"), try deployment.token("alice")]
        let started = ContinuousClock.now
        let (status, output) = await runProcessOffThePool(
            ["timeout", "-k", "5", "120", MCPServerSideTests.python, script, "sessions", deployment.resource] + tokens)
        let elapsed = ContinuousClock.now - started
        #expect(status == 0, "\(output)")
        let result = try JSONValue(parsing: Array(output.utf8))
        var figures: [String] = []
        for user in ["alice", "bob"] {
            let expected = "\(user) via moose-app; token passed on: no"
            let answers = result[user]?["answers"]?.arrayValue?.compactMap(\.stringValue) ?? []
            let hangs = answers.filter { $0 == "hang" }.count
            let wrong = answers.filter { $0 != expected && $0 != "hang" }
            #expect(answers.count == 16 && hangs == 0 && wrong.isEmpty, "\(user): \(hangs) hangs, wrong: \(wrong)")
            #expect(result[user]?["tools"]?.arrayValue?.compactMap(\.stringValue) == ["whoami"])
            let session = result[user]?["session"]?.stringValue ?? ""
            #expect(session.utf8.count == 64 && session.utf8.allSatisfy { "0123456789abcdef".utf8.contains($0) })
            // Every request of the user's SDK session named its own session (the initialize's answer: got it);
            // the SDK opened its standalone GET stream; nothing was refused; it ended with its DELETE.
            let requests = result[user]?["requests"]?.arrayValue?.compactMap(\.stringValue) ?? []
            let own = requests.filter {
                $0.hasPrefix("POST true 20") || $0 == "GET true 200" || $0 == "DELETE true 200"
            }
            #expect(requests.contains("GET true 200") && requests.last == "DELETE true 200", "\(requests)")
            if user == "alice" {
                // Bob's two attempts went out on his own client: all of alice's requests are hers.
                #expect(own.count == requests.count, "\(requests)")
            }
            figures.append(
                "\(user): \(answers.count) calls, \(wrong.count) wrong, \(hangs) hangs, \(requests.count) requests")
        }
        #expect(result["alice"]?["session"] != result["bob"]?["session"])
        let theft = result["bob_on_alices_session"]
        #expect(theft?["call"]?.int64Value == 404 && theft?["delete"]?.int64Value == 404, "\(output)")
        #expect(theft?["body"]?.stringValue?.contains("Session not found") == true)
        #expect(theft?["body"]?.stringValue?.contains("alice") == false)
        let alice = "alice via moose-app; token passed on: no"
        #expect(result["alice"]?["after_bob"]?.stringValue == alice)
        #expect(result["alice"]?["after_refresh"]?.stringValue == alice)
        #expect(
            result["alice"]?["sessions_after_refresh"]?.arrayValue?.compactMap(\.stringValue)
                == [result["alice"]?["session"]?.stringValue ?? "-"])
        // Both SDK clients ended their sessions; no stream is left open on the host.
        #expect(deployment.sessions.count == 0)
        #expect(await Self.eventually { deployment.host.openStreams == 0 }, "\(deployment.host.openStreams) streams")
        print(
            "MCPSessions with the Python SDK:", figures.joined(separator: "; "),
            "in \(result["seconds"]?.doubleValue ?? -1) s (\(elapsed) with the interpreter)")
    }

    /// A client holding its session's `GET` stream, with no request for the idle timeout: `closeIdleSessions()`
    /// ends the session, and the client sees its stream end (the chunked body's last chunk). Before that, a
    /// server-initiated message reaches it on that stream.
    @Test func aHeldGETStreamGetsServerMessagesAndEndsWhenItsSessionIsClosedIdle() async throws {
        let deployment = try await Deployment.start(idle: .seconds(1))
        defer { Task { await deployment.stop() } }
        let alice = try deployment.token("alice")
        let session = try #require(
            try await MCPServerSideTests.openSession(deployment.resource, token: alice, URLSessionTransport()))
        let ended = try await Self.withGETStream(deployment, token: alice, session: session) { stream in
            #expect(stream.status == 200 && stream.lastEventID != nil, "\(stream.text)")
            let server = try #require(deployment.servers.bySubject.withLock { $0["alice"] })
            try await server.notify(ToolListChangedNotification.message())
            #expect(try await stream.read(until: "notifications/tools/list_changed"), "\(stream.text)")
            #expect(deployment.host.openStreams == 1)
            try await Task.sleep(for: .milliseconds(1100))
            #expect(await deployment.sessions.closeIdleSessions() == 1)
            return try await stream.read(until: Self.lastChunk)
        }
        #expect(ended, "the held GET stream did not end with its session")
        #expect(await Self.eventually { deployment.host.openStreams == 0 }, "\(deployment.host.openStreams) streams")
        let after = try await MCPServerSideTests.mcp(
            deployment.resource, MCPServerSideTests.whoamiBody, token: alice, session: session, URLSessionTransport())
        #expect(after.status.code == 404)
    }

    /// A client that opened its session's `GET` stream and went away (connection closed; the host cannot tell
    /// until it writes): the stream stays open on the host until the session is closed idle, then ends — no
    /// task waits on it any more.
    @Test func aGETStreamWhoseClientWentAwayIsReclaimedWithItsIdleSession() async throws {
        let deployment = try await Deployment.start(idle: .seconds(1))
        defer { Task { await deployment.stop() } }
        let alice = try deployment.token("alice")
        let session = try #require(
            try await MCPServerSideTests.openSession(deployment.resource, token: alice, URLSessionTransport()))
        try await Self.withGETStream(deployment, token: alice, session: session) { stream in
            #expect(stream.status == 200 && stream.lastEventID != nil, "\(stream.text)")
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(deployment.host.openStreams == 1, "the host still waits on the abandoned stream")
        try await Task.sleep(for: .milliseconds(800))
        #expect(await deployment.sessions.closeIdleSessions() == 1 && deployment.sessions.count == 0)
        #expect(await Self.eventually { deployment.host.openStreams == 0 }, "\(deployment.host.openStreams) streams")
    }

    /// A client whose `GET` stream broke reconnects with `Last-Event-ID` (the Python SDK does, after a read
    /// timeout): the SDK's transport then writes to the new stream only. The stream it replaced ends at once —
    /// no task waits on it for ever — and the new one ends with the session (`DELETE`).
    @Test func aGETStreamResumedWithLastEventIDEndsTheOneItReplacesAndNoneOutlivesTheSession() async throws {
        let deployment = try await Deployment.start()
        defer { Task { await deployment.stop() } }
        let alice = try deployment.token("alice")
        let transport = URLSessionTransport()
        let session = try #require(
            try await MCPServerSideTests.openSession(deployment.resource, token: alice, transport))
        let firstID = try await Self.withGETStream(deployment, token: alice, session: session) { stream in
            #expect(stream.status == 200, "\(stream.text)")
            return try #require(stream.lastEventID)
        }
        let ended = try await Self.withGETStream(
            deployment, token: alice, session: session, lastEventID: firstID
        ) { stream in
            #expect(stream.status == 200, "\(stream.text)")
            #expect(
                await Self.eventually { deployment.host.openStreams == 1 },
                "\(deployment.host.openStreams) streams: the replaced one is still open")
            let server = try #require(deployment.servers.bySubject.withLock { $0["alice"] })
            try await server.notify(ToolListChangedNotification.message())
            #expect(try await stream.read(until: "notifications/tools/list_changed"), "\(stream.text)")
            let deleted = try await MCPServerSideTests.mcp(
                deployment.resource, "", token: alice, session: session, delete: true, transport)
            #expect(deleted.status.code == 200)
            return try await stream.read(until: Self.lastChunk)
        }
        #expect(ended, "the resumed GET stream did not end with its session")
        #expect(
            await Self.eventually { deployment.host.openStreams == 0 },
            "\(deployment.host.openStreams) streams outlived their session")
    }

    /// A request's answer stream resumed with `Last-Event-ID` (an event of that `POST`'s answer) twice: the
    /// SDK's transport keeps the second only; the first ends at once, the second with the session.
    @Test func aRequestStreamResumedTwiceEndsTheFirstResumption() async throws {
        let deployment = try await Deployment.start()
        defer { Task { await deployment.stop() } }
        let alice = try deployment.token("alice")
        let transport = URLSessionTransport()
        let session = try #require(
            try await MCPServerSideTests.openSession(deployment.resource, token: alice, transport))
        let body = #"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"whoami","arguments":{}}}"#
        let called = try await MCPServerSideTests.mcp(
            deployment.resource, body, token: alice, session: session, transport)
        let events = String(decoding: called.body, as: UTF8.self)
        let primed = events.split(whereSeparator: \.isNewline).first { $0.hasPrefix("id: 7_") }
        let eventID = try #require(primed.map { String($0.dropFirst(4)) }, "\(events)")
        try await Self.withGETStream(deployment, token: alice, session: session, lastEventID: eventID) { first in
            #expect(first.status == 200 && first.text.contains("alice via moose-app"), "\(first.text)")
            try await Self.withGETStream(deployment, token: alice, session: session, lastEventID: eventID) { second in
                #expect(second.status == 200, "\(second.text)")
                #expect(try await first.read(until: Self.lastChunk), "the replaced resumption did not end")
                #expect(deployment.host.openStreams == 1)
                _ = try await MCPServerSideTests.mcp(
                    deployment.resource, "", token: alice, session: session, delete: true, transport)
                #expect(try await second.read(until: Self.lastChunk), "the resumption did not end with its session")
            }
        }
        #expect(await Self.eventually { deployment.host.openStreams == 0 })
    }

    // MARK: - Helpers

    /// The last chunk of a chunked body: the end of a stream.
    static let lastChunk = "\r\n0\r\n\r\n"

    /// Whether `condition` holds within `seconds` (checked every 50 ms).
    static func eventually(_ seconds: Double = 5, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return true
    }

    /// An open `GET` stream, read as raw HTTP/1.1 (a chunked body of server-sent events).
    struct RawStream {
        var iterator: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
        /// Everything read so far, head and chunk framing included.
        var text = ""

        /// The response's status code.
        var status: Int? {
            text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) }
        }

        /// The id of the first event (the transport's priming event).
        var lastEventID: String? {
            guard let line = text.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix("id: ") }) else {
                return nil
            }
            return String(line.dropFirst(4))
        }

        /// Reads until `marker` has arrived (true) or the connection ends (false).
        mutating func read(until marker: String) async throws -> Bool {
            while !text.contains(marker) {
                guard var chunk = try await iterator.next() else { return false }
                text += chunk.readString(length: chunk.readableBytes) ?? ""
            }
            return true
        }
    }

    /// Opens `session`'s `GET` stream (with `Last-Event-ID` when given) on a connection of its own, reads
    /// its head and first event, runs `body`, then closes the connection (the client goes away). A watchdog
    /// closes the connection after `seconds`: nothing here waits longer.
    static func withGETStream<T: Sendable>(
        _ deployment: Deployment, token: String, session: String, lastEventID: String? = nil, seconds: Int = 10,
        _ body: (inout RawStream) async throws -> T
    ) async throws -> T {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: deployment.host.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let watchdog = Task { [channel = channel.channel] in
            try await Task.sleep(for: .seconds(seconds))
            try? await channel.close()
        }
        defer { watchdog.cancel() }
        var head = "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:\(deployment.host.port)\r\nAuthorization: Bearer \(token)\r\n"
        head += "Accept: text/event-stream\r\nMcp-Session-Id: \(session)\r\nMCP-Protocol-Version: 2025-06-18\r\n"
        if let lastEventID { head += "Last-Event-ID: \(lastEventID)\r\n" }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(string: head + "\r\n"))
            var stream = RawStream(iterator: inbound.makeAsyncIterator())
            _ = try await stream.read(until: "\n\n") // the priming event (or an error's end)
            return try await body(&stream)
        }
    }
}
#endif
