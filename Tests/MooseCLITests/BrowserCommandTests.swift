import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §4: `$BROWSER` as people set it — `%s` honoured, a colon-separated list,
/// and a browser that cannot start or gives up reported at once (the next in the list tried).
@Suite(.serialized)
struct BrowserCommandTests {
    /// A login at the test IdP with `browser` as `$BROWSER`, given up after `timeout` seconds.
    static func login(browser: String, timeout: String = "4") async throws -> CLIResult {
        var (home, environment) = CLI.home("moose-browser")
        defer { try? FileManager.default.removeItem(at: home) }
        environment["BROWSER"] = browser
        return try await CLI.run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli", "--timeout", timeout],
            environment: environment, timeout: 60)
    }

    @Test func percentSIsReplacedByTheURLInItsOwnArgument() async throws {
        // The test IdP's scripted browser, called as `sh -c '…' placeholder URL`: the URL must arrive
        // as the one argument where %s was, not appended after it.
        let script = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-browser-\(UUID().uuidString).sh")
        try Data(
            "#!/bin/sh\n[ \"$1\" = \"--url\" ] || exit 9\nexec \(TestIdentityProvider.browserCommand) \"$2\"\n".utf8
        ).write(to: script)
        chmod(script.path, 0o755)
        defer { try? FileManager.default.removeItem(at: script) }
        let result = try await Self.login(browser: "\(script.path) --url %s", timeout: "60")
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
    }

    /// Issue "The second hour", §1: the browser command starts with the default signal mask and
    /// dispositions — not the blocked set of the thread that started it — so a wrapper that keeps
    /// running after `moose login --timeout 2` gave up still ends on TERM.
    @Test func aBrowserStartsWithTheDefaultSignalMaskAndEndsOnTerm() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-browser-signals-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = folder.appendingPathComponent("browser.sh"), report = folder.appendingPathComponent("pid")
        // The browser becomes `sleep`; its signal state is read from /proc once it runs (not by the
        // shell itself: a shell blocks signals around its own forks, which a grep it forked may see).
        try Data(
            "#!/bin/sh\necho $$ > '\(report.path).tmp'\nmv '\(report.path).tmp' '\(report.path)'\nexec sleep 60 2>/dev/null\n"
                .utf8
        )
        .write(to: script)
        chmod(script.path, 0o755)
        // moose itself started with INT and TERM ignored, as a background job of a script or a
        // supervisor may start it: its children must not inherit that.
        var (home, environment) = CLI.home("moose-browser")
        defer { try? FileManager.default.removeItem(at: home) }
        environment["BROWSER"] = "\(script.path) %s"
        let result = try await CLI.run(
            [
                "sh", "-c", "trap '' INT TERM; exec \"$0\" \"$@\"", CLI.binary, "login", "--issuer",
                TestIdentityProvider.issuer,
                "--client-id", "moose-cli", "--timeout", "2"
            ], environment: environment, timeout: 60, executable: "/bin/sh")
        #expect(result.status != 0, "the login cannot succeed: nobody signs in")
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: report.path), Date() < deadline {
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        try #require(
            FileManager.default.fileExists(atPath: report.path),
            "the browser did not run: \(result.stdout) \(result.stderr)")
        let pidText = try String(contentsOf: report, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        var status = ""
        for _ in 0..<100 { // until the shell has become sleep
            status = (try? String(contentsOfFile: "/proc/\(pidText)/status", encoding: .utf8)) ?? ""
            if status.contains("Name:\tsleep") { break }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let lines = status.split(separator: "\n").map(String.init)
        let blocked = lines.first { $0.hasPrefix("SigBlk:") } ?? "-"
        let ignored = lines.first { $0.hasPrefix("SigIgn:") } ?? "-"
        // Signals 1–31 (the low 31 bits); 32 and 33 are the C library's own, which it keeps as it likes.
        func standard(_ line: String) -> UInt64? {
            line.split(separator: "\t").last.flatMap { UInt64($0, radix: 16) }.map { $0 & 0x7fff_ffff }
        }
        #expect(standard(blocked) == 0, "the browser started with signals blocked: \(blocked)")
        #expect(standard(ignored) == 0, "the browser started with signals ignored: \(ignored)")
        let pid = try #require(Int32(pidText))
        #expect(kill(pid, SIGTERM) == 0, "the browser is gone already")
        var gone = false
        for _ in 0..<100 where !gone {
            try await Task.sleep(nanoseconds: 20_000_000)
            gone =
                kill(pid, 0) != 0
                || (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))?.contains(") Z ") == true
        }
        if !gone { kill(pid, SIGKILL) }
        #expect(gone, "the browser ignored SIGTERM")
    }

    @Test func aBrowserThatCannotStartIsReportedAndTheNextInTheListIsTried() async throws {
        let result = try await Self.login(
            browser: "/nonexistent/browser:\(TestIdentityProvider.browserCommand)", timeout: "60")
        #expect(result.stderr.contains("could not start the browser (/nonexistent/browser)"), "\(result.stderr)")
        #expect(result.status == 0, "the second browser in the list was not used: \(result.stderr)")
    }

    @Test func aLauncherThatFailsIsReportedAtOnceWithTheURL() async throws {
        // Like xdg-open on a machine with no desktop: prints "no method available" and exits 3.
        let script = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-no-method-\(UUID().uuidString).sh")
        try Data("#!/bin/sh\necho 'xdg-open: no method available for opening' >&2\nexit 3\n".utf8).write(to: script)
        chmod(script.path, 0o755)
        defer { try? FileManager.default.removeItem(at: script) }
        let started = Date()
        let result = try await Self.login(browser: script.path, timeout: "8")
        #expect(
            result.stderr.contains("the browser command (\(script.path)) failed; open the URL above by hand"),
            "\(result.stderr)")
        #expect(result.stderr.contains("/authorize/?"), "the URL to open by hand was not printed: \(result.stderr)")
        // Issue "Nothing a person set up is lost" §4: no browser came, and standard input (a pipe here) is
        // not a terminal to paste into: the login ends at once, saying how to paste, not after --timeout.
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("--paste"), "\(result.stderr)")
        #expect(Date().timeIntervalSince(started) < 7, "the login waited for a redirect no browser could bring")
    }
}
