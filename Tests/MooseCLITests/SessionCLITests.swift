import Foundation
import MooseTesting
import Testing

/// `moose login / status / refresh / logout` against the real test IdP, the "browser" being the
/// scripted one (tools/idp/headless_browser.py) set as $BROWSER.
struct SessionCLITests {
    @Test func loginStatusRefreshLogout() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("moose-cli-session-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let environment = ["XDG_DATA_HOME": home.appendingPathComponent("data").path,
                           "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
                           "BROWSER": TestIdentityProvider.browserCommand, "MOOSE_STORE_KEY": ""]
        func moose(_ arguments: [String]) throws -> CLIResult { try CLI.run(arguments, environment: environment, timeout: 60) }

        let login = try moose(["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"])
        #expect(login.status == 0, "\(login.stderr)")
        #expect(login.stdout.contains("Logged in to \(TestIdentityProvider.issuer)"))
        #expect(login.stderr.contains("/authorize/?response_type=code"))

        let status = try moose(["status", "--json"])
        #expect(status.status == 0)
        let sessions = try #require(JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
        #expect(sessions.first?["state"] as? String == "active" && sessions.first?["has_refresh_token"] as? Bool == true)
        // Never a token in status output.
        let stored = try moose(["store", "get", "default", "--namespace", "moose.session"])
        let session = try #require(JSONSerialization.jsonObject(with: Data(stored.stdout.utf8)) as? [String: Any])
        let tokens = try #require(session["tokens"] as? [String: Any])
        let accessToken = try #require(tokens["accessToken"] as? String)
        #expect(!status.stdout.contains(accessToken))

        // The provider's JWKS is cached in the store for the next process.
        #expect(try moose(["store", "list", "--namespace", "moose.jwks"]).stdout.contains("jwks.json"))

        let refresh = try moose(["refresh"])
        #expect(refresh.status == 0 && refresh.stdout.contains("refresh token rotated"))

        let logout = try moose(["logout"])
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(logout.stdout.contains("id_token_hint=***"))
        let after = try moose(["status"])
        #expect(after.stdout.contains("no sessions"))
        #expect(try moose(["refresh"]).status == 1)
        #expect(try moose(["login"]).status == 2)   // no profile, no --issuer
    }
}

struct InspectIssuerCLITests {
    @Test func inspectVerifiesThroughTheIssuersDiscoveryAndJWKS() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("moose-cli-inspect-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let environment = ["XDG_DATA_HOME": home.appendingPathComponent("data").path,
                           "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
                           "BROWSER": TestIdentityProvider.browserCommand, "MOOSE_STORE_KEY": ""]
        let login = try CLI.run(["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"],
                                environment: environment, timeout: 60)
        #expect(login.status == 0, "\(login.stderr)")
        let stored = try CLI.run(["store", "get", "default", "--namespace", "moose.session"], environment: environment)
        let session = try #require(JSONSerialization.jsonObject(with: Data(stored.stdout.utf8)) as? [String: Any])
        let idToken = try #require((session["tokens"] as? [String: Any])?["idToken"] as? String)
        let verified = try CLI.run(["inspect", idToken, "--issuer", TestIdentityProvider.issuer, "--aud", "moose-cli", "--json"])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try verified.json()["verdict"] as? String == "valid")
        // The same token judged against another issuer: refused.
        let wrong = try CLI.run(["inspect", idToken, "--issuer", TestIdentityProvider.issuer.replacingOccurrences(of: "127.0.0.1", with: "localhost")])
        #expect(wrong.status == 1 && wrong.stderr.contains("issuer"))
    }
}
