import Foundation
import MooseTestSupport
import Testing

/// Reachability for real, in a network namespace this test makes (tools/netns/up): the only way out
/// is a veth pair, and the test IdP is reachable only through it. Link down → the worker inside sees
/// "offline" within a second and a token request says offline at once, with no request at the IdP;
/// link up → "online", and the postponed refresh completes.
@Suite(.serialized)
struct ReachabilityNamespaceTests {
    @Test func linkDownIsOfflineAndLinkUpRunsThePostponedRefresh() async throws {
        let name = "moose\(getpid() % 100000)"
        let port = URL(string: TestIdentityProvider.issuer)?.port ?? 8765
        let up = try await CLI.run(
            ["bash", LocalServer.repositoryRoot + "/tools/netns/up", name, String(port)], timeout: 90,
            executable: "/bin/bash")
        defer {
            _ = try? CLI.runSynchronously(
                ["bash", LocalServer.repositoryRoot + "/tools/netns/down", name], executable: "/bin/bash")
        }
        guard up.status != 3 else {
            Issue.record("the namespace was made but the IdP is not reachable through it: \(up.stderr)")
            return
        }
        guard up.status == 0 else {
            print(
                "SKIPPED linkDownIsOfflineAndLinkUpRunsThePostponedRefresh: cannot create a network namespace here (\(up.stderr))"
            )
            return
        }
        let hostInterface = up.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let (home, environment) = try await CLI.logIn("moose-netns")
        defer { try? FileManager.default.removeItem(at: home) }
        let refreshToken = try await TokenCLITests.expireStoredSession(environment: environment)
        let worker = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent().appendingPathComponent(
            "moose-store-worker"
        ).path
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = [
            "netns", "exec", name, worker, "reach", home.appendingPathComponent("data/moose/store.sqlite").path,
            home.appendingPathComponent("config/moose/store.key").path, "default"
        ]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { CLI.end(process, closing: input) }
        let lines = LineReader(output.fileHandleForReading)
        let forwarderLogs = {
            ["host-fwd", "ns-fwd"].map {
                (try? String(contentsOfFile: "/tmp/moose-netns-\(name)/\($0).log", encoding: .utf8)) ?? ""
            }.joined(separator: " | ")
        }
        #expect(
            lines.next(until: { $0 == "ready" }, timeout: 30) != nil,
            "the worker did not start: \(lines.seen); forwarders: \(forwarderLogs())")
        #expect(lines.seen.contains { $0.hasPrefix("status online ") })

        // Link down: the namespace's veth loses its carrier.
        let down = Date() // the wall clock, as the worker's (another process) reports it
        #expect(
            try CLI.runSynchronously(["ip", "link", "set", hostInterface, "down"], executable: "/usr/sbin/ip").status
                == 0)
        let offline = lines.next(until: { $0.hasPrefix("status offline ") }, timeout: 5)
        #expect(offline != nil, "no offline event: \(lines.seen)")
        // Timed by the worker's own clock when it saw the event, so the time this test process takes
        // to be scheduled and read the pipe on a loaded machine is not charged to reachability.
        if let seenAt = offline?.split(separator: " ").last.flatMap({ Double($0) }) {
            let seconds = seenAt / 1000 - down.timeIntervalSince1970
            #expect(seconds < 1.5, "the offline event took \(seconds) s")
        }
        try input.fileHandleForWriting.write(contentsOf: Data("token\n".utf8))
        let answer = lines.next(
            until: { $0.hasPrefix("offline ") || $0.hasPrefix("token ") || $0.hasPrefix("error ") }, timeout: 10)
        #expect(answer?.hasPrefix("offline ") == true, "\(answer ?? "nothing")")
        if let milliseconds = answer?.split(separator: " ").last.flatMap({ Int($0) }) { #expect(milliseconds < 1000) }
        #expect(try await TokenCLITests.familySize(of: refreshToken) == 1, "the IdP saw a refresh while offline")

        // Link up: online again, and the postponed refresh runs by itself.
        #expect(try await CLI.run(["ip", "link", "set", hostInterface, "up"], executable: "/usr/sbin/ip").status == 0)
        #expect(
            lines.next(until: { $0.hasPrefix("status online ") }, timeout: 10) != nil, "no online event: \(lines.seen)")
        #expect(
            lines.next(until: { $0.hasPrefix("refreshed ") }, timeout: 30) != nil,
            "the postponed refresh did not run: \(lines.seen)")
        #expect(try await TokenCLITests.familySize(of: refreshToken) == 2)
    }
}

/// Reads lines from a pipe as they come, remembering all of them.
final class LineReader: @unchecked Sendable {
    private let handle: FileHandle
    private var buffer = ""
    private(set) var seen: [String] = []
    /// Lines before this index were passed over by an earlier `next` (or matched by it).
    private var consumed = 0

    init(_ handle: FileHandle) { self.handle = handle }

    /// The first line after the last one an earlier call looked at that satisfies `match`, waiting up
    /// to `timeout` seconds. Lines that arrived together with an earlier match still count (one read
    /// can bring "status online" and "refreshed …" at once).
    func next(until match: (String) -> Bool, timeout: TimeInterval) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            while consumed < seen.count {
                defer { consumed += 1 }
                if match(seen[consumed]) { return seen[consumed] }
            }
            var ready = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, Int32(max(1, min(200, deadline.timeIntervalSinceNow * 1000)))) > 0 else { continue }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffer += String(decoding: chunk, as: UTF8.self)
            while let newline = buffer.firstIndex(of: "\n") {
                seen.append(String(buffer[..<newline]))
                buffer = String(buffer[buffer.index(after: newline)...])
            }
        }
        return nil
    }
}
