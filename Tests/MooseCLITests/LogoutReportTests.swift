import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §3: `moose logout` says what the provider knows afterwards — the
/// end-session URL in full (the wiped session cannot give it back), whether revocation worked, and,
/// with the provider down, that the refresh token is still valid there — and wipes the session anyway.
@Suite(.serialized)
struct LogoutReportTests {
    @Test func logoutPrintsTheFullEndSessionURLAndSaysTheTokensWereRevoked() async throws {
        let (home, environment) = CLI.home("moose-logout-report")
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"],
            environment: environment, timeout: 60)
        try #require(login.status == 0, "\(login.stdout) \(login.stderr)")
        let logout = try await CLI.run(["logout"], environment: environment)
        #expect(logout.status == 0, "\(logout.stdout) \(logout.stderr)")
        #expect(
            logout.stdout.contains("id_token_hint=ey"), "the end-session URL was not printed in full: \(logout.stdout)")
        #expect(!logout.stdout.contains("rerun with"), "\(logout.stdout)")
        #expect(logout.stdout.contains("revoked at the provider"), "\(logout.stdout)")
        let status = try await CLI.run(["status"], environment: environment)
        #expect(!status.stdout.contains("alice"), "the session was not wiped: \(status.stdout)")
    }

    @Test func withTheProviderDownLogoutWipesAndSaysTheRefreshTokenIsStillValidThere() async throws {
        let provider = try await SecondIdP.start(tokenSeconds: 60)
        let (home, environment) = CLI.home("moose-logout-down")
        defer { try? FileManager.default.removeItem(at: home) }
        // Stopped on every path before the test goes on (a `defer { Task { … } }` could outlive the
        // test process and leave the provider running: seen once, an hour-old orphan).
        let login: CLIResult
        do {
            login = try await CLI.run(
                ["login", "--issuer", provider.issuer, "--client-id", "moose-cli"], environment: environment,
                timeout: 90)
        } catch {
            await provider.stop()
            throw error
        }
        await provider.stop()
        try #require(login.status == 0, "\(login.stdout) \(login.stderr)")
        let logout = try await CLI.run(["logout"], environment: environment, timeout: 60)
        #expect(logout.status == 1, "\(logout.status) \(logout.stdout) \(logout.stderr)")
        #expect(logout.stdout.contains("local session wiped"), "\(logout.stdout)")
        #expect(
            logout.stderr.contains("could not be reached")
                && logout.stderr.contains("refresh token is still valid there"),
            "\(logout.stderr)")
        let token = try await CLI.run(["token"], environment: environment)
        #expect(token.status != 0 && token.stdout.isEmpty, "a token was printed after logout: \(token.stdout)")
    }
}
