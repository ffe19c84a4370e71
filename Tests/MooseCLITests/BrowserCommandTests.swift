import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §4: `$BROWSER` as people set it — `%s` honoured, a colon-separated list,
/// and a browser that cannot start or gives up reported at once while the login keeps waiting.
@Suite(.serialized)
struct BrowserCommandTests {
    /// A login at the test IdP with `browser` as `$BROWSER`, given up after `timeout` seconds.
    static func login(browser: String, timeout: String = "4") async throws -> CLIResult {
        var (home, environment) = CLI.home("moose-browser")
        defer { try? FileManager.default.removeItem(at: home) }
        environment["BROWSER"] = browser
        return try await CLI.run(["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli", "--timeout", timeout],
                                 environment: environment, timeout: 60)
    }

    @Test func percentSIsReplacedByTheURLInItsOwnArgument() async throws {
        // The test IdP's scripted browser, called as `sh -c '…' placeholder URL`: the URL must arrive
        // as the one argument where %s was, not appended after it.
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("moose-browser-\(UUID().uuidString).sh")
        try Data("#!/bin/sh\n[ \"$1\" = \"--url\" ] || exit 9\nexec \(TestIdentityProvider.browserCommand) \"$2\"\n".utf8).write(to: script)
        chmod(script.path, 0o755)
        defer { try? FileManager.default.removeItem(at: script) }
        let result = try await Self.login(browser: "\(script.path) --url %s", timeout: "60")
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
    }

    @Test func aBrowserThatCannotStartIsReportedAndTheNextInTheListIsTried() async throws {
        let result = try await Self.login(browser: "/nonexistent/browser:\(TestIdentityProvider.browserCommand)", timeout: "60")
        #expect(result.stderr.contains("could not start the browser (/nonexistent/browser)"), "\(result.stderr)")
        #expect(result.status == 0, "the second browser in the list was not used: \(result.stderr)")
    }

    @Test func aLauncherThatFailsIsReportedAtOnceWithTheURL() async throws {
        // Like xdg-open on a machine with no desktop: prints "no method available" and exits 3.
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("moose-no-method-\(UUID().uuidString).sh")
        try Data("#!/bin/sh\necho 'xdg-open: no method available for opening' >&2\nexit 3\n".utf8).write(to: script)
        chmod(script.path, 0o755)
        defer { try? FileManager.default.removeItem(at: script) }
        let started = Date()
        let result = try await Self.login(browser: script.path, timeout: "8")
        #expect(result.stderr.contains("the browser command (\(script.path)) failed; open the URL above by hand"), "\(result.stderr)")
        #expect(result.stderr.contains("/authorize/?"), "the URL to open by hand was not printed: \(result.stderr)")
        #expect(result.status != 0)
        #expect(Date().timeIntervalSince(started) >= 7, "the login stopped waiting for the redirect")
    }
}
