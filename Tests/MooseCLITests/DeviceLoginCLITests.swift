import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §4: a device login that nobody approves ends at `--timeout`, and a
/// provider whose discovery lists no device endpoint gets a message naming `--device-endpoint`.
@Suite(.serialized)
struct DeviceLoginCLITests {
    /// `--timeout nan` (or any value that is not seconds) is a usage error, for login and mcp login alike:
    /// it once trapped converting to nanoseconds.
    @Test func aTimeoutThatIsNotSecondsIsAUsageError() async throws {
        let (home, environment) = CLI.home("moose-timeout")
        defer { try? FileManager.default.removeItem(at: home) }
        for command in [
            ["login", "--device", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-device"],
            ["mcp", "login", "http://127.0.0.1:9/mcp"]
        ] {
            for value in ["nan", "-1", "inf"] {
                let result = try await CLI.run(command + ["--timeout=\(value)"], environment: environment)
                #expect(
                    result.status == 2 && result.stderr.contains("--timeout takes a number of seconds"),
                    "\(command) \(value): \(result.status) \(result.stderr)")
            }
        }
    }

    @Test func timeoutAppliesToTheDeviceGrant() async throws {
        let (home, environment) = CLI.home("moose-device-timeout")
        defer { try? FileManager.default.removeItem(at: home) }
        let started = Date()
        let login = try await CLI.run(
            [
                "login", "--device", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-device",
                "--device-endpoint", TestIdentityProvider.issuer + "/device-authorization/", "--timeout", "3"
            ],
            environment: environment, timeout: 90)
        #expect(login.status == 1, "\(login.status) \(login.stdout) \(login.stderr)")
        #expect(login.stderr.contains("no approval within 3s"), "\(login.stderr)")
        // The next step repeats this command (a plain `moose login` would open a browser login instead).
        #expect(login.stderr.contains("run the same moose login --device command again"), "\(login.stderr)")
        // The code lives for minutes: well under that is --timeout's doing, however loaded the machine (one
        // with the whole suite and a release build running took 21 s).
        #expect(Date().timeIntervalSince(started) < 60, "--timeout 3 was not applied to --device")
    }

    /// Issue "The second hour", §1: `moose login --device` opens the verification page with
    /// `$BROWSER` as the code flow does (not with --no-browser), and says how long the code lives
    /// also when standard error is not a terminal (here a pipe).
    @Test func theBrowserOpensTheVerificationPageAndTheCodesLifetimeIsSaid() async throws {
        let (home, base) = CLI.home("moose-device-browser")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let opened = home.appendingPathComponent("opened")
        let browser = home.appendingPathComponent("browser")
        try "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '\(opened.path)'\n".write(
            to: browser, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: browser.path)
        var environment = base
        environment["BROWSER"] = browser.path
        let arguments = [
            "login", "--device", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-device",
            "--device-endpoint", TestIdentityProvider.issuer + "/device-authorization/", "--timeout", "2"
        ]
        let login = try await CLI.run(arguments, environment: environment, timeout: 30)
        #expect(login.status == 1, "\(login.status) \(login.stderr)")
        #expect(login.stderr.contains("The code expires in "), "\(login.stderr)")
        let pages = (try? String(contentsOf: opened, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
        // The provider gives no verification_uri_complete: the page is verification_uri.
        #expect(pages == [TestIdentityProvider.issuer + "/device/"], "\(pages)")

        try? FileManager.default.removeItem(at: opened)
        let printed = try await CLI.run(
            arguments + ["--no-browser", "--profile", "other"], environment: environment, timeout: 30)
        #expect(
            printed.stderr.contains("The code expires in ")
                && printed.stderr.contains(TestIdentityProvider.issuer + "/device/"),
            "\(printed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: opened.path), "--no-browser started the browser")
    }

    @Test func withoutADeviceEndpointTheMessageNamesTheOption() async throws {
        let (home, environment) = CLI.home("moose-device-endpoint")
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(
            ["login", "--device", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-device"],
            environment: environment, timeout: 30)
        // A usage problem (an option the provider's metadata did not fill in): exit 2, issue "Nothing a person
        // set up is lost" §6; and the failed first login left no store behind.
        #expect(login.status == 2, "\(login.status) \(login.stderr)")
        #expect(login.stderr.contains("--device-endpoint"), "\(login.stderr)")
        #expect(!FileManager.default.fileExists(atPath: home.appendingPathComponent("data/moose/store.sqlite").path))
    }
}
