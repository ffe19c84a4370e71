import Foundation
import MooseTestSupport
import Testing

/// A refused renewal is not the end of a session that needs no person (issue "One session, whatever
/// made it", §4), at authgent-server with the stand-in CI platform's tokens: a workload session whose
/// token source gave a token the provider refuses fails that attempt — with the provider's words and
/// `renewalRefused`, never "needs a new login" — and renews as soon as the source has a good token
/// again; a session an earlier version marked "needs login" after such a refusal renews too.
@Suite(.serialized)
struct RefusedRenewalCLITests {
    static let issuer = WorkloadLoginCLITests.issuer
    static let audience = WorkloadLoginCLITests.audience

    static func setState(_ state: String, environment: [String: String]) async throws {
        var row = try await CLI.storedRow(environment: environment)
        var session = try #require(row["session"] as? [String: Any])
        session["state"] = state
        row["session"] = session
        let edited = try JSONSerialization.data(withJSONObject: row)
        #expect(
            try await CLI.run(
                ["store", "put", "default", "--namespace", "moose.session"], stdin: edited, environment: environment
            ).status == 0)
    }

    @Test func aRefusedWorkloadTokenFailsThatAttemptOnlyAndTheNextGoodOneRenews() async throws {
        let (home, environment) = CLI.home("moose-refused-renewal")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let file = home.appendingPathComponent("token")
        try Data(try await WorkloadLoginCLITests.mint().utf8).write(to: file)
        func moose(_ arguments: [String]) async throws -> CLIResult {
            try await CLI.run(arguments, environment: environment, timeout: 60)
        }
        let login = try await moose([
            "login", "--workload", "file:" + file.path, "--issuer", Self.issuer, "--client-id", "moose-ci",
            "--audience", Self.audience
        ])
        #expect(login.status == 0, "\(login.stdout) \(login.stderr)")
        let first = try await moose(["token"])
        #expect(first.status == 0, "\(first.stderr)")

        // The source now gives a token the provider refuses (minted for another audience).
        try Data(try await WorkloadLoginCLITests.mint(audience: "https://elsewhere.example").utf8).write(to: file)
        try await TokenCLITests.expireStoredSession(environment: environment, requiringRefreshToken: false)
        for _ in 0..<2 {
            let refused = try await moose(["token"])
            #expect(refused.status == 1 && refused.stdout.isEmpty, "\(refused.stdout)")
            #expect(
                refused.stderr.contains("the provider refused") && refused.stderr.contains("[renewalRefused]"),
                "\(refused.stderr)")
            #expect(
                !refused.stderr.contains("needs a new login") && !refused.stderr.contains("run moose login"),
                "\(refused.stderr)")
        }
        let status = try await moose(["status", "--json"])
        let rows = try #require(JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
        #expect(
            rows.first?["state"] as? String == "active", "a refused renewal does not mark the session: \(status.stdout)"
        )

        // The source has a good token again: the next call renews, with no one running moose login.
        try Data(try await WorkloadLoginCLITests.mint().utf8).write(to: file)
        let renewed = try await moose(["token"])
        #expect(renewed.status == 0, "\(renewed.stderr)")
        #expect(renewed.stdout != first.stdout && !renewed.stdout.isEmpty)

        // A session an earlier version marked "needs login" after a refused renewal renews too.
        try await Self.setState("needs_reauthentication", environment: environment)
        try await TokenCLITests.expireStoredSession(environment: environment, requiringRefreshToken: false)
        let recovered = try await moose(["token"])
        #expect(recovered.status == 0, "\(recovered.stderr)")
        let after = try await moose(["status", "--json"])
        let again = try #require(JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [[String: Any]])
        #expect(again.first?["state"] as? String == "active", "\(after.stdout)")
    }
}
