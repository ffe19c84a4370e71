import Foundation
@testable import MooseOAuth
@testable import MooseOAuthSystem
import MooseTestSupport
import Testing

/// Moose's loopback pages as headless Chromium renders them (tools/browser): a title, readable
/// text telling the user to close the tab, and the provider's words shown as text, never markup.
@Suite(.serialized)
struct LoopbackPagesInABrowserTests {
    /// Renders `url` in Chromium (`--page`), saving a screenshot into `folder`; returns title and text.
    /// What the script says on standard error (why it failed: a timeout, Chromium's start) goes into a
    /// file there, quoted when no page came back.
    static func render(_ url: String, screenshots folder: URL) throws -> (title: String, text: String) {
        var environment = ProcessInfo.processInfo.environment
        environment["MOOSE_SCREENSHOT_DIR"] = folder.path
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [LocalServer.repositoryRoot + "/tools/browser/chromium.sh", "--page", url]
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let said = folder.appendingPathComponent("chromium-stderr-\(UUID().uuidString).txt")
        _ = FileManager.default.createFile(atPath: said.path, contents: nil)
        let errors = try FileHandle(forWritingTo: said)
        defer { try? errors.close() }
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let stderr = (try? String(contentsOf: said, encoding: .utf8)) ?? ""
        let page = try #require(
            (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
            "no page from chromium (exit \(process.terminationStatus)): \(String(decoding: data, as: UTF8.self)) \(stderr)"
        )
        return (page["title"] as? String ?? "", page["text"] as? String ?? "")
    }

    @Test func errorAndStateMismatchPagesReadAsTextInChromium() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-pages-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        // Two Chromium renders, each up to 90 s on a crowded machine, come before the matching redirect.
        let agent = try LoopbackUserAgent(timeout: 240) { _ in }
        let base = "http://127.0.0.1:\(agent.receiver.port)/callback"
        async let callback = agent.authorize(
            url: URL(string: "https://id.example.com/authorize")!,
            redirectURI: agent.redirectURI, expectedState: "s3")
        // Another sign-in's redirect: ignored, with a page that says so.
        // (Chromium runs for seconds: its wait is off the cooperative pool, which a detached task is not.)
        let mismatch = try await offThePool { try Self.render(base + "?state=other&code=abc", screenshots: folder) }
        #expect(mismatch.title == "Moose — not this sign-in")
        #expect(mismatch.text.contains("This response was ignored") && mismatch.text.contains("You may close this tab"))
        // The provider's error, with markup in its description: shown as the characters it sent.
        let hostile = "%3Cb%3Ebold%3C%2Fb%3E%3Cscript%3Edocument.title%3D%27pwned%27%3C%2Fscript%3E"
        let error = try await offThePool {
            try Self.render(base + "?state=s3&error=access_denied&error_description=" + hostile, screenshots: folder)
        }
        #expect(error.title == "Moose — sign-in did not complete", "a script ran or the page is wrong: \(error.title)")
        #expect(error.text.contains("<b>bold</b><script>document.title='pwned'</script>"), "\(error.text)")
        #expect(error.text.contains("You may close this tab"))
        let shots = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        #expect(shots.contains("callback.png"), "\(shots)")
        // The matching redirect (the error) is what the login gets; the mismatched one was ignored.
        #expect(try await callback.absoluteString.contains("state=s3&error=access_denied"))
    }
}
