import ArgumentParser
import Foundation
@testable import MooseCLI
import MooseOAuth
import MooseTestSupport
import Testing

/// Found walking README → login → logout → login again as a new user (issue "The second hour", §2:
/// "after logout, a plain `moose login` of a profile … works"): a profile logged out of logs in again
/// the way it did (a service by client credentials, a TV by the device grant, a browser login on its
/// registered port), is still listed and shown, and bad names and URLs are usage errors, not outages.
struct LoginAgainCLITests {
    @Test func aServiceProfileLogsInAgainTheSameWayAfterALogout() async throws {
        let (home, environment) = CLI.home("moose-login-again")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let secretFile = home.appendingPathComponent("secret")
        try Data("moose-service-secret\n".utf8).write(to: secretFile)
        let first = try await CLI.run(
            [
                "login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-service", "--client-secret-file", secretFile.path, "--scope", "read", "--profile", "ci"
            ], environment: environment)
        #expect(first.status == 0, "\(first.stdout) \(first.stderr)")
        let logout = try await CLI.run(["logout", "--profile", "ci"], environment: environment)
        #expect(logout.status == 0, "\(logout.stderr)")

        // Still a profile: listed, shown and choosable, as the logout said.
        let list = try await CLI.run(["profile", "list"], environment: environment)
        #expect(list.stdout.contains("ci (logged out, settings kept)"), "\(list.stdout) \(list.stderr)")
        let show = try await CLI.run(["profile", "show", "ci"], environment: environment)
        #expect(show.status == 0 && show.stdout.contains("\"grant\":\"client_credentials\""), "\(show.stdout)")
        #expect(try await CLI.run(["profile", "use", "ci"], environment: environment).status == 0)

        // A plain login of it is a service login again (not a browser login for moose-service).
        let again = try await CLI.run(["login", "--profile", "ci", "--timeout", "5"], environment: environment)
        #expect(
            again.status == 0 && again.stdout.contains("as client moose-service"), "\(again.stdout) \(again.stderr)")
    }

    /// At Glewlwyd, whose public client has one registered redirect URI: a login on another port is
    /// refused like a client without credentials, and the hint names --port; a login with it keeps
    /// the port, so the next plain `moose login --profile` after a logout works.
    @Test func aRegisteredRedirectPortIsNamedAndKept() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            var (home, environment) = CLI.home("moose-kept-port")
            defer { try? FileManager.default.removeItem(at: home) }
            environment["BROWSER"] =
                "python3 " + Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/glewlwyd/browser.py")
            let login = ["login", "--profile", "gl", "--issuer", issuer, "--client-id", "moose-public"]
            let wrongPort = try await CLI.run(login + ["--scope", "openid"], environment: environment, timeout: 90)
            #expect(wrongPort.status == 1 && wrongPort.stderr.contains("--port PORT"), "\(wrongPort.stderr)")
            let first = try await CLI.run(
                login + ["--scope", "openid", "--port", String(Glewlwyd.redirectPort)], environment: environment,
                timeout: 90)
            #expect(first.status == 0, "\(first.stderr)")
            // Glewlwyd refuses the revocation (it wants bearer authentication there): the session is
            // wiped all the same, and the logout says the revocation failed (exit 1).
            let logout = try await CLI.run(["logout", "--profile", "gl"], environment: environment)
            #expect(logout.status == 0 || logout.stderr.contains("revocation"), "\(logout.stderr)")
            let again = try await CLI.run(["login", "--profile", "gl"], environment: environment, timeout: 90)
            #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
        }
    }

    /// Issue "The second hour" §2, error codes in one place: a refused refresh says what happened,
    /// the provider's error and the next step, then its code once, last, in brackets — and so does
    /// the next `moose token` of the session that now needs a login.
    @Test func aRefusedRefreshEndsWithItsCodeOnce() async throws {
        let (home, environment) = try await CLI.logIn("moose-refused-code")
        defer { try? FileManager.default.removeItem(at: home) }
        var row = try await CLI.storedRow(environment: environment)
        var session = try #require(row["session"] as? [String: Any])
        var tokens = try #require(session["tokens"] as? [String: Any])
        tokens["expiresAt"] = 0
        tokens["refreshToken"] = "not-a-refresh-token-the-provider-issued"
        session["tokens"] = tokens
        row["session"] = session
        let edited = try JSONSerialization.data(withJSONObject: row)
        let put = try await CLI.run(
            ["store", "put", "default", "--namespace", "moose.session"], stdin: edited, environment: environment)
        #expect(put.status == 0, "\(put.stderr)")
        for expected in ["[invalidGrant]", "[needsLogin]"] {
            let token = try await CLI.run(["token"], environment: environment)
            let line = token.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(token.status == 1 && line.hasSuffix(expected), "\(line)")
            #expect(line.components(separatedBy: " [").count == 2, "more than one bracketed code: \(line)")
            #expect(line.contains("run moose login"), "\(line)")
        }
        // `moose refresh` says a refused refresh token the same way (it ended without a code before).
        let again = try await CLI.run(
            ["store", "put", "default", "--namespace", "moose.session"], stdin: edited, environment: environment)
        #expect(again.status == 0, "\(again.stderr)")
        let refresh = try await CLI.run(["refresh"], environment: environment)
        let line = refresh.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(refresh.status == 1 && line.hasSuffix("[invalidGrant]"), "\(line)")
        #expect(line.components(separatedBy: " [").count == 2, "more than one bracketed code: \(line)")
        #expect(line.contains("run moose login --profile default"), "\(line)")
    }

    @Test func theKeptGrantIsUsedOnlyForTheSameClient() throws {
        var device = SessionPlan(
            name: "tv", issuer: "https://id.example.com", clientID: "tv", scopes: [], grant: .deviceCode)
        func grant(_ arguments: [String], clientID: String) throws -> SessionPlan.Grant {
            var given = try LoginCommand.parse(["--profile", "tv", "--client-secret-env", "S"] + arguments).given()
            given.clientID = clientID
            return try SessionPlan.resolve(name: "tv", given: given, profile: nil, kept: device).grant
        }
        #expect(try grant([], clientID: "tv") == .deviceCode)
        #expect(try grant([], clientID: "other") == .authorizationCode(loopbackPort: nil))
        #expect(try grant(["--client-credentials"], clientID: "tv") == .clientCredentials)
        // A browser login's registered port is part of the plan, so the next login uses it again.
        device.grant = .authorizationCode(loopbackPort: 53683)
        let decoded = try JSONDecoder().decode(SessionPlan.self, from: try JSONEncoder().encode(device))
        #expect(decoded.grant.loopbackPort == 53683)
    }

    @Test(arguments: [
        "https://exa mple.com", "https://id.example.com:99999", "https://id.example.com/x?y=1",
        "https://user@id.example.com"
    ])
    func anUnusableIssuerURLIsAUsageError(_ issuer: String) async throws {
        let (home, environment) = CLI.home("moose-bad-issuer")
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(["login", "--issuer", issuer, "--client-id", "x"], environment: environment)
        #expect(login.status == 2 && login.stderr.contains("is not a usable issuer URL"), "\(login.stderr)")
    }

    @Test func aProfileNameWithControlCharactersIsAUsageError() async throws {
        let (home, environment) = CLI.home("moose-bad-profile")
        defer { try? FileManager.default.removeItem(at: home) }
        for command in [["token"], ["login", "--issuer", "https://id.example.com", "--client-id", "x"]] {
            let run = try await CLI.run(command + ["--profile", "ev\u{1b}[31mil"], environment: environment)
            #expect(run.status == 2 && run.stderr.contains("profile name"), "\(command): \(run.stderr)")
            #expect(!run.stderr.contains("\u{1b}"), "a control character reached the terminal")
        }
    }

    @Test func theFirstContactHintKeepsTheProfile() async throws {
        let (home, environment) = CLI.home("moose-first-profile")
        defer { try? FileManager.default.removeItem(at: home) }
        let token = try await CLI.run(["token", "--profile", "work"], environment: environment)
        #expect(
            token.status == 1 && token.stderr.contains("run moose login --profile work --issuer"), "\(token.stderr)")
        let plain = try await CLI.run(["token"], environment: environment)
        #expect(plain.stderr.contains("run moose login --issuer"), "\(plain.stderr)")
    }
}
