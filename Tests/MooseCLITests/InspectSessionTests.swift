import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §5: `moose inspect --session [--profile P]` shows the stored session's own
/// access and ID tokens (decoded, never printed raw, never refreshed), after a real login at the test IdP.
struct InspectSessionTests {
    @Test func theSessionsOwnTokensAreShownNeverPrintedRaw() async throws {
        let (home, environment) = try await CLI.logIn("moose-inspect-session")
        defer { try? FileManager.default.removeItem(at: home) }
        let token = try await CLI.run(["token"], environment: environment)
        let accessToken = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let human = try await CLI.run(["inspect", "--session"], environment: environment)
        #expect(human.status == 0, "\(human.stderr)")
        #expect(human.stdout.contains("ID token of profile default:"), "\(human.stdout)")
        #expect(human.stdout.contains("\"iss\": \"\(TestIdentityProvider.issuer)"), "\(human.stdout)")
        #expect(!human.stdout.contains(accessToken) && !human.stderr.contains(accessToken), "a raw token was printed")
        // Issue "Nothing a person set up is lost" §6: the ID token's audience is the session's client,
        // checked without --aud; another audience given is refused (exit 1).
        let idPart = human.stdout.components(separatedBy: "ID token of profile default:").last ?? ""
        #expect(!idPart.contains("audience not checked"), "\(idPart)")
        let other = try await CLI.run(["inspect", "--session", "--audience", "someone-else"], environment: environment)
        #expect(other.status == 1, "\(other.stdout) \(other.stderr)")

        let json = try await CLI.run(
            ["inspect", "--session", "--profile", "default", "--json"], environment: environment)
        #expect(json.status == 0, "\(json.stderr)")
        let object = try json.json()
        #expect(object["profile"] as? String == "default")
        #expect(((object["id_token"] as? [String: Any])?["claims"] as? [String: Any])?["sub"] != nil, "\(json.stdout)")
        #expect(object["access_token"] != nil)

        let nobody = try await CLI.run(["inspect", "--session", "--profile", "nobody"], environment: environment)
        #expect(nobody.status == 1 && nobody.stderr.contains("moose login"), "\(nobody.status) \(nobody.stderr)")
        let both = try await CLI.run(["inspect", "--session", accessToken], environment: environment)
        #expect(both.status == 2, "\(both.stderr)")
    }
}
