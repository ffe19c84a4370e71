import Foundation
import MooseJWT
import MooseTestSupport
import Testing

/// Issue "The first hour", §5: `moose token --id-token` never prints an expired ID token — it
/// refreshes (ID tokens come back with a refresh) — and with `--format exec-credential` the
/// `expirationTimestamp` is the ID token's own `exp` (kubectl caches the credential until then).
@Suite(.serialized)
struct IDTokenCLITests {
    static func expiry(ofIDToken text: String) throws -> Date {
        try #require(try JWT(compact: text.trimmingCharacters(in: .whitespacesAndNewlines)).claims.expiresAt)
    }

    @Test func anExpiredIDTokenUnderAValidAccessTokenIsRefreshedNotPrinted() async throws {
        // Access tokens for 60 s, ID tokens for 6 s: the ID token expires first.
        let provider = try await SecondIdP.start(tokenSeconds: 60, idTokenSeconds: 6)
        // Stopped on every path before the test ends (a `defer { Task { … } }` can outlive the process).
        do {
            try await run(provider)
        } catch {
            await provider.stop()
            throw error
        }
        await provider.stop()
    }

    private func run(_ provider: SecondIdP) async throws {
        let (home, environment) = CLI.home("moose-id-token")
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(
            ["login", "--issuer", provider.issuer, "--client-id", "moose-cli"],
            environment: environment, timeout: 90)
        try #require(login.status == 0, "\(login.stdout) \(login.stderr)")
        let first = try await CLI.run(["token", "--id-token"], environment: environment)
        try #require(first.status == 0, "\(first.stderr)")
        let firstExpiry = try Self.expiry(ofIDToken: first.stdout)
        #expect(firstExpiry.timeIntervalSinceNow > 0)

        try await Task.sleep(nanoseconds: 7_000_000_000) // the ID token has expired; the access token has not
        let access = try await CLI.run(["token"], environment: environment)
        #expect(access.status == 0, "\(access.stderr)")
        let second = try await CLI.run(["token", "--id-token"], environment: environment)
        try #require(second.status == 0, "\(second.stderr)")
        let secondExpiry = try Self.expiry(ofIDToken: second.stdout)
        #expect(secondExpiry.timeIntervalSinceNow > 0, "an expired ID token was printed (exp \(secondExpiry))")
        #expect(secondExpiry > firstExpiry)

        let credential = try await CLI.run(
            ["token", "--id-token", "--format", "exec-credential"], environment: environment)
        try #require(credential.status == 0, "\(credential.stderr)")
        let document = try #require(JSONSerialization.jsonObject(with: Data(credential.stdout.utf8)) as? [String: Any])
        let status = try #require(document["status"] as? [String: Any])
        let token = try #require(status["token"] as? String)
        let stamp = try #require(
            status["expirationTimestamp"] as? String, "no expirationTimestamp: \(credential.stdout)")
        let formatter = ISO8601DateFormatter()
        let printed = try #require(formatter.date(from: stamp), "\(stamp)")
        #expect(
            abs(printed.timeIntervalSince(try Self.expiry(ofIDToken: token))) < 1,
            "expirationTimestamp \(stamp) is not the ID token's exp")
    }
}
