import Foundation
import MooseOAuth
import MooseOAuthSystem
import Synchronization
import Testing

/// `SystemBrowser`, the `open` of a `.loopback` login: `$BROWSER`'s list and `%s` rules, real programs
/// started (a script standing in for the browser), what they inherit, and what is reported.
@Suite struct SystemBrowserTests {
    @Test func theListAndPercentSFollowTheFreedesktopConvention() {
        #expect(SystemBrowser.commands("firefox:  :chromium --new-window") == ["firefox", "chromium --new-window"])
        #expect(SystemBrowser.argv("firefox", url: "http://x/?a=b") == ["firefox", "http://x/?a=b"])
        #expect(SystemBrowser.argv("wrap --url=%s --pct=100%%", url: "u") == ["wrap", "--url=u", "--pct=100%"])
        #expect(SystemBrowser.argv("odd 5%x", url: "u") == ["odd", "5%x", "u"])
        // A URL with spaces or shell characters stays one argument: no shell is ever involved.
        #expect(SystemBrowser.argv("b", url: "http://x/$(rm -rf ~);`id`") == ["b", "http://x/$(rm -rf ~);`id`"])
        #expect(SystemBrowser(setting: "  ").commands.count == 1)
    }

    /// A script records its arguments and its open descriptors; the test holds a listening socket
    /// open (as a loopback login does) and checks the browser did not get it.
    @Test func theBrowserGetsTheURLAndNoneOfTheAppsDescriptors() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-browser-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let out = folder.appendingPathComponent("seen")
        let script = folder.appendingPathComponent("browser")
        try Data(
            """
            #!/bin/sh
            { printf '%s\\n' "$@"; ls /dev/fd; } > \(out.path).tmp && mv \(out.path).tmp \(out.path)
            """.utf8
        ).write(to: script)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: script.path)
        #if os(Linux)
        let held = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let held = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        #expect(held > 3) // not ls's own folder descriptor
        defer { close(held) }
        let problems = Mutex<[SystemBrowser.Problem]>([])
        SystemBrowser(setting: script.path) { problem in problems.withLock { $0.append(problem) } }
            .open(try #require(URL(string: "http://127.0.0.1:9/callback?state=x")))
        var seen: String?
        // Up to 30 s: a shell script's start took over 5 s once, with the whole suite running on 2 cores.
        for _ in 0..<600 where seen == nil {
            try await Task.sleep(for: .milliseconds(50))
            seen = try? String(contentsOf: out, encoding: .utf8)
        }
        let lines = try #require(seen).split(separator: "\n").map(String.init)
        #expect(lines.first == "http://127.0.0.1:9/callback?state=x")
        // 0, 1, 2 and ls's own descriptor for reading the folder: never the app's socket.
        let descriptors = lines.dropFirst().compactMap { Int32($0) }
        #expect(!descriptors.contains(held), "the browser inherited descriptor \(held): \(descriptors)")
        #expect(problems.withLock { $0 }.isEmpty)
    }

    @Test func aCommandThatCannotStartOrFailsIsReportedAndTheNextIsTried() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-browser-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let out = folder.appendingPathComponent("opened")
        let problems = Mutex<[SystemBrowser.Problem]>([])
        SystemBrowser(setting: "/nonexistent/browser:false:sh -c %s") { problem in
            problems.withLock { $0.append(problem) }
        }
        .open(try #require(URL(string: "file:///dev/null")))
        // `sh -c file:///dev/null` fails too (no such command), after `false`: every failure is told.
        for _ in 0..<600 where problems.withLock({ $0.count }) < 3 {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(
            problems.withLock { $0 } == [
                .cannotStart(command: "/nonexistent/browser"), .failed(command: "false"), .failed(command: "sh")
            ])
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }
}
