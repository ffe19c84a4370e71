import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §1, as a person at the shell meets it: a provider whose access tokens
/// live 5 s (a second test IdP), `moose token` with its defaults.
@Suite(.serialized)
struct ShortLivedTokenCLITests {
    @Test func fiveSecondTokensOneRefreshForTwoProcessesAndAnHonestMinValidity() async throws {
        let idp = try await SecondIdP.start(tokenSeconds: 5)
        let (home, environment) = CLI.home("moose-short-lived")
        defer { try? FileManager.default.removeItem(at: home) }
        do {
            try await run(idp, environment)
        } catch {
            await idp.stop()
            throw error
        }
        await idp.stop()
    }

    private func run(_ idp: SecondIdP, _ environment: [String: String]) async throws {
        // The second IdP starts from a copy of the first one's database: count from here.
        let before = try await idp.refreshTokensIssued(to: "moose-cli")
        func issued() async throws -> Int { try await idp.refreshTokensIssued(to: "moose-cli") - before }
        let login = try await CLI.run(
            ["login", "--issuer", idp.issuer, "--client-id", "moose-cli"], environment: environment, timeout: 60)
        #expect(login.status == 0, "\(login.stderr)")
        #expect(try await issued() == 1)

        // (No refresh before expiry is asserted in-process by ShortLivedTokenTests: a few CLI runs on a
        // loaded machine can take longer than a 5 s token's first 3.75 s.)
        let first = try await CLI.run(["token"], environment: environment)
        #expect(first.status == 0 && !first.stdout.isEmpty, "\(first.stderr)")

        // A validity longer than the provider's tokens live: said on stderr, a token still printed.
        let long = try await CLI.run(["token", "--min-validity", "3600"], environment: environment)
        #expect(long.status == 0 && !long.stdout.isEmpty, "\(long.stderr)")
        #expect(long.stderr.contains("longer than the provider's tokens live"), "\(long.stderr)")
        for duration in ["1h", "90s", "2m"] {
            let result = try await CLI.run(["token", "--min-validity", duration], environment: environment)
            #expect(result.status == 0, "--min-validity \(duration): \(result.stderr)")
        }
        let bad = try await CLI.run(["token", "--min-validity", "5x"], environment: environment)
        #expect(bad.status == 2 && bad.stderr.contains("--min-validity"), "\(bad.stderr)")

        // After expiry, two processes at once: one refresh, one new token for both.
        try await Task.sleep(nanoseconds: 6_000_000_000)
        let beforeBoth = try await issued()
        async let a = CLI.run(["token"], environment: environment)
        async let b = CLI.run(["token"], environment: environment)
        let (one, two) = try await (a, b)
        #expect(one.status == 0 && two.status == 0, "\(one.stderr) \(two.stderr)")
        #expect(one.stdout == two.stdout && one.stdout != first.stdout)
        let refreshes = try await issued() - beforeBoth
        #expect(refreshes == 1, "two processes after expiry: \(refreshes) refreshes; \(one.stderr) \(two.stderr)")
    }
}
