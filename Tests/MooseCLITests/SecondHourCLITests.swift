import Foundation
import MooseTestSupport
import Testing

/// Issue "The second hour", §2 and §3: messages that point the right way and the small things a
/// person notices, each driven as a person would, against the test IdP where a provider is needed.
struct SecondHourCLITests {
    /// §2: an unset variable named by `--workload env:VAR` is named, with no word of GitLab's `id_tokens`.
    @Test func anUnsetWorkloadVariableIsNamed() async throws {
        let (home, environment) = CLI.home("moose-workload-env")
        defer { try? FileManager.default.removeItem(at: home) }
        let variable = "MOOSE_TEST_UNSET_\(UInt32.random(in: 0...UInt32.max))"
        for command in [["login"], ["exchange"]] {
            let result = try await CLI.run(
                command + [
                    "--workload", "env:\(variable)", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"
                ],
                environment: environment, timeout: 60)
            #expect(result.status == 1, "\(command) \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("the variable \(variable) is not set"), "\(command) \(result.stderr)")
            #expect(!result.stderr.contains("id_tokens"), "\(command) \(result.stderr)")
        }
    }

    /// §2: `moose exchange --help`'s examples paste into a shell: each runs as one command in bash.
    @Test func exchangeExamplesPasteIntoAShell() async throws {
        let help = try await CLI.run(["exchange", "--help"])
        #expect(!help.stdout.contains("\\\\"), "\(help.stdout)")
        let lines = help.stdout.components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: "Examples:"))
        let examples = lines[(start + 1)...].prefix { !$0.isEmpty }.joined(separator: "\n")
        // Each example is one `moose` command: the stand-in prints how many words it was given.
        let run = try await CLI.run(["bash", "-c", "moose() { echo \"$#\"; }\n" + examples], executable: "/bin/bash")
        #expect(run.stderr.isEmpty, "\(run.stderr)")
        #expect(run.stdout.split(separator: "\n").compactMap { Int($0) }.filter { $0 >= 9 }.count == 2, "\(run.stdout)")
    }

    /// §2: exit statuses as documented. A plain-http issuer on another machine is a usage error (2)
    /// for login, inspect and exchange.
    @Test func aPlainHTTPIssuerElsewhereIsAUsageError() async throws {
        let (home, environment) = CLI.home("moose-plain-http")
        defer { try? FileManager.default.removeItem(at: home) }
        for command in [
            ["login", "--client-id", "x"], ["inspect", "a.b.c"],
            ["exchange", "--client-id", "x", "--subject-token-env", "T"]
        ] {
            let result = try await CLI.run(command + ["--issuer", "http://id.example.com"], environment: environment)
            #expect(result.status == 2, "\(command) \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("plain http to another machine"), "\(command) \(result.stderr)")
        }
    }

    /// §2: a name that does not resolve is said as such, exit 1 — not 3's "try again later".
    @Test func aNameThatDoesNotResolveIsNotAnOutage() async throws {
        let (home, environment) = CLI.home("moose-dns")
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(
            ["login", "--issuer", "https://moose-no-such-host.invalid", "--client-id", "x"], environment: environment,
            timeout: 60)
        #expect(login.status == 1, "\(login.status) \(login.stderr)")
        #expect(login.stderr.contains("the name moose-no-such-host.invalid did not resolve"), "\(login.stderr)")
        #expect(!login.stderr.contains("try again"), "\(login.stderr)")
        let inspect = try await CLI.run(
            ["inspect", "--issuer", "https://moose-no-such-host.invalid", "a.b.c"], environment: environment,
            timeout: 60)
        #expect(
            inspect.status == 1 && inspect.stderr.contains("did not resolve"), "\(inspect.status) \(inspect.stderr)")
    }

    /// §2: https to a port that speaks plain http (the test IdP's) is said as such, not as a CA problem.
    @Test func httpsToAPlainHTTPPortIsNotACAProblem() async throws {
        let (home, environment) = CLI.home("moose-not-tls")
        defer { try? FileManager.default.removeItem(at: home) }
        let issuer = TestIdentityProvider.issuer.replacingOccurrences(of: "http://", with: "https://")
        let login = try await CLI.run(
            ["login", "--issuer", issuer, "--client-id", "moose-cli"], environment: environment, timeout: 60)
        #expect(login.status == 1, "\(login.status) \(login.stderr)")
        #expect(login.stderr.contains("did not speak TLS") && login.stderr.contains("plain http"), "\(login.stderr)")
        #expect(!login.stderr.contains("--ca-file") && !login.stderr.contains("private CA"), "\(login.stderr)")
        let inspect = try await CLI.run(["inspect", "--issuer", issuer, "a.b.c"], environment: environment, timeout: 60)
        #expect(
            inspect.status == 1 && inspect.stderr.contains("did not speak TLS")
                && !inspect.stderr.contains("--ca-file"),
            "\(inspect.status) \(inspect.stderr)")
    }

    /// §3: `moose profile list` on first contact (no config file, no store) says there are none.
    @Test func profileListOnFirstContactSaysThereAreNone() async throws {
        let (home, environment) = CLI.home("moose-first-profiles")
        defer { try? FileManager.default.removeItem(at: home) }
        let list = try await CLI.run(["profile", "list"], environment: environment)
        #expect(list.status == 0, "\(list.stderr)")
        #expect(
            list.stdout.contains("no profiles yet") && list.stdout.contains("moose login --issuer URL --client-id ID"),
            "\(list.stdout)")
        #expect(list.stderr.isEmpty, "\(list.stderr)")
    }

    /// §3: a long argument that is no file is not echoed whole.
    @Test func aLongArgumentIsNotEchoedWhole() async throws {
        let argument = String(repeating: "a", count: 60) + "/" + String(repeating: "b", count: 60)
        let result = try await CLI.run(["inspect", argument])
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("no such file: " + String(repeating: "a", count: 40) + "…"), "\(result.stderr)")
        #expect(!result.stderr.contains(argument) && !result.stderr.contains("bbbb"), "\(result.stderr)")
    }

    /// §3: a relative HOME is reported as such, not as "HOME is not set".
    @Test func aRelativeHomeIsSaidAsSuch() async throws {
        let result = try await CLI.run(
            ["status"],
            environment: [
                "HOME": "relative/home", "XDG_DATA_HOME": "", "XDG_CONFIG_HOME": "",
                "MOOSE_STORE": "", "MOOSE_CONFIG": ""
            ])
        #expect(result.status == 2, "\(result.status) \(result.stderr)")
        #expect(result.stderr.contains("HOME is not an absolute path (HOME=relative/home)"), "\(result.stderr)")
        #expect(!result.stderr.contains("HOME is not set"), "\(result.stderr)")
    }

    /// §3: `moose login --help` lists --issuer and --client-id first.
    @Test func loginHelpListsIssuerAndClientIDFirst() async throws {
        let help = try await CLI.run(["login", "--help"])
        let options = help.stdout.components(separatedBy: "\n").drop { $0 != "OPTIONS:" }.dropFirst()
            .filter { $0.hasPrefix("  -") }.map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(options.count > 10, "\(help.stdout)")
        #expect(options.first?.hasPrefix("--issuer") == true, "\(options.prefix(3))")
        #expect(options.dropFirst().first?.hasPrefix("--client-id") == true, "\(options.prefix(3))")
    }
    /// §2: a confidential client logged in without its secret (invalid_client after the browser
    /// login) is told which options give it.
    @Test func aConfidentialClientWithoutItsSecretIsToldHowToGiveIt() async throws {
        let (home, environment) = CLI.home("moose-confidential")
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-confidential"],
            environment: environment, timeout: 60)
        #expect(login.status == 1, "\(login.stdout) \(login.stderr)")
        #expect(
            login.stderr.contains("--client-secret-file") && login.stderr.contains("--client-secret-env"),
            "\(login.stderr)")
    }

    /// §2: hints keep the profile, and after a logout a plain `moose login --profile NAME` logs in
    /// again with the settings the session had (kept by the logout).
    @Test func hintsKeepTheProfileAndAPlainLoginWorksAfterLogout() async throws {
        let (home, environment) = CLI.home("moose-hints")
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli", "--profile", "lab"],
            environment: environment, timeout: 60)
        #expect(login.status == 0, "\(login.stderr)")
        let logout = try await CLI.run(["logout", "--profile", "lab"], environment: environment)
        #expect(
            logout.status == 0 && logout.stdout.contains("moose login --profile lab logs in again"),
            "\(logout.stdout) \(logout.stderr)")
        let token = try await CLI.run(["token", "--profile", "lab"], environment: environment)
        #expect(token.status == 1 && token.stderr.contains("run moose login --profile lab"), "\(token.stderr)")
        let again = try await CLI.run(["login", "--profile", "lab"], environment: environment, timeout: 60)
        #expect(again.status == 0 && again.stdout.contains("profile lab"), "\(again.stdout) \(again.stderr)")
        let status = try await CLI.run(["status", "--profile", "lab", "--json"], environment: environment)
        #expect(status.stdout.contains("moose-cli"), "\(status.stdout)")
    }
    /// §3: logging out of a client-credentials session offers no browser end-session URL (a service
    /// has no browser session at the provider), while the provider has an end-session endpoint.
    @Test func aServiceLogoutOffersNoBrowserEndSessionURL() async throws {
        let (home, environment) = CLI.home("moose-service-logout")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let secretFile = home.appendingPathComponent("secret")
        try Data("moose-service-secret\n".utf8).write(to: secretFile)
        let login = try await CLI.run(
            [
                "login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-service",
                "--client-secret-file", secretFile.path
            ], environment: environment)
        #expect(login.status == 0, "\(login.stderr)")
        let logout = try await CLI.run(["logout"], environment: environment)
        #expect(
            logout.status == 0 && !logout.stdout.contains("browser session") && !logout.stdout.contains("end_session"),
            "\(logout.stdout) \(logout.stderr)")
        #expect(logout.stdout.contains("access token was revoked"), "\(logout.stdout)")
    }
}
