import Foundation
import MooseTestSupport
import Testing

/// A damaged session row never locks a person out (issue "One session, whatever made it", §3): one
/// bit of the default profile's sealed bytes flipped in the real store file, by another program
/// (FirstHourCLITests' `DamagedSessionCLITests` covers a row that opens but is not a session).
/// `status` lists it as damaged with the way out, `token` names it and the next step (and the other
/// profile still works), `logout` removes it (exit 0, nothing revoked), `login` replaces it.
struct TamperedSessionCLITests {
    @Test func statusTokenLogoutAndLoginAroundADamagedRow() async throws {
        let (home, environment) = try await CLI.logIn("moose-cli-damaged")
        defer { try? FileManager.default.removeItem(at: home) }
        func moose(_ arguments: [String]) async throws -> CLIResult {
            try await CLI.run(arguments, environment: environment, timeout: 60)
        }
        let work = try await moose([
            "login", "--profile", "work", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"
        ])
        #expect(work.status == 0, "\(work.stderr)")
        let store = home.appendingPathComponent("data/moose/store.sqlite").path

        try DamagedRow.flip(storePath: store, name: "default")

        let status = try await moose(["status"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(
            status.stdout.contains("default: damaged") && status.stdout.contains("moose logout --profile default"),
            "\(status.stdout)")
        #expect(status.stdout.contains("work: "), "the other profile is still listed: \(status.stdout)")
        let json = try await moose(["status", "--json"])
        let rows = try #require(JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(
            rows.first { $0["profile"] as? String == "default" }?["state"] as? String == "damaged", "\(json.stdout)")
        #expect(rows.first { $0["profile"] as? String == "work" }?["state"] as? String == "active", "\(json.stdout)")

        let token = try await moose(["token"])
        #expect(token.status == 1 && token.stdout.isEmpty, "\(token.stdout)")
        #expect(
            token.stderr.contains("moose login --profile default") && token.stderr.contains("[sessionDamaged]"),
            "\(token.stderr)")
        #expect(!token.stderr.contains("storeUnavailable"), "\(token.stderr)")
        #expect(try await moose(["token", "--profile", "work"]).status == 0, "the other profile keeps working")

        let logout = try await moose(["logout"])
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(
            logout.stdout.contains("local session wiped") && logout.stdout.contains("nothing was revoked"),
            "\(logout.stdout)")
        let after = try await moose(["status"])
        #expect(!after.stdout.contains("default") && after.stdout.contains("work: "), "\(after.stdout)")

        // Damaged again after a new login: a login replaces the row and serves its tokens.
        let loginArguments = ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"]
        #expect(try await moose(loginArguments).status == 0)
        try DamagedRow.flip(storePath: store, name: "default")
        let again = try await moose(loginArguments)
        #expect(again.status == 0, "a login replaces a damaged row: \(again.stderr)")
        let served = try await moose(["token"])
        #expect(served.status == 0 && !served.stdout.isEmpty, "\(served.stderr)")
    }
}
