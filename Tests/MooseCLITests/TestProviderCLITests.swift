import Foundation
import MooseTestSupport
import Testing

/// `moose` against `moose-test-provider` (MooseTesting's provider on a loopback port, as docs/testing.md
/// starts it) and against the real test provider, by the same steps: a service logs in with its secret,
/// `moose token` prints a token, `moose status` says it has no refresh token; at the box, a token that
/// lapses is renewed by a new grant.
@Suite(.serialized)
struct TestProviderCLITests {
    /// A running `moose-test-provider` and its issuer (read from its first line, as a script does).
    final class Box {
        let process = TestProcess()
        let issuer: String

        init(_ arguments: [String]) throws {
            process.executableURL = URL(
                fileURLWithPath: URL(fileURLWithPath: CLI.binary).deletingLastPathComponent()
                    .appendingPathComponent("moose-test-provider").path)
            process.arguments = arguments
            // Its first line, read from a file (a blocking pipe read would hold one of the test pool's threads).
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("box-\(UUID().uuidString)")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            defer { try? FileManager.default.removeItem(at: output) }
            process.standardOutput = try FileHandle(forWritingTo: output)
            try process.run()
            var line = ""
            for _ in 0..<200 {
                let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
                if let newline = text.firstIndex(of: "\n") {
                    line = String(text[..<newline])
                    break
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
            issuer = line
        }

        deinit {
            process.terminate()
            process.waitUntilExit()
        }
    }

    struct Provider: Sendable, CustomTestStringConvertible {
        let name: String
        let client: String
        let secret: String
        var testDescription: String { name }
    }

    @Test(
        "a service logs in with its secret and moose token works, at a real provider and at the box",
        arguments: [
            Provider(name: "django-oauth-toolkit", client: "moose-service", secret: "moose-service-secret"),
            Provider(name: "moose-test-provider", client: "ci", secret: "s3cret")
        ])
    func aServiceLogsIn(at provider: Provider) async throws {
        let box =
            provider.name == "moose-test-provider"
            ? try Box(["--client", provider.client, "--secret", provider.secret, "--access-token-lifetime", "2"])
            : nil
        let issuer = box?.issuer ?? TestIdentityProvider.issuer
        #expect(issuer.hasPrefix("http://127.0.0.1:"), "the issuer line: \(issuer)")
        let (home, environment) = CLI.home("moose-box")
        defer { try? FileManager.default.removeItem(at: home) }
        var withSecret = environment
        withSecret["CI_SECRET"] = provider.secret
        let login = try await CLI.run(
            [
                "login", "--profile", "ci", "--issuer", issuer, "--client-id", provider.client,
                "--client-credentials", "--client-secret-env", "CI_SECRET"
            ], environment: withSecret)
        #expect(login.status == 0 && login.stdout.contains("as client \(provider.client)"), "\(login.stderr)")
        let token = try await CLI.run(["token", "--profile", "ci"], environment: withSecret)
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token.stderr)")
        let status = try await CLI.run(["status", "--profile", "ci", "--json"], environment: withSecret)
        let sessions = try #require(JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
        #expect(sessions.first?["has_refresh_token"] as? Bool == false)

        guard box != nil else { return }
        // The box's tokens live 2 s: the next `moose token` after that is a new grant, a new token.
        try await Task.sleep(nanoseconds: 2_500_000_000)
        let renewed = try await CLI.run(["token", "--profile", "ci"], environment: withSecret)
        #expect(renewed.status == 0 && !renewed.stdout.isEmpty && renewed.stdout != token.stdout, "\(renewed.stderr)")
        // A wrong secret is the provider's refusal, exit 1, at the box as at a real provider.
        withSecret["CI_SECRET"] = "wrong"
        let refused = try await CLI.run(
            [
                "login", "--profile", "bad", "--issuer", issuer, "--client-id", provider.client,
                "--client-credentials", "--client-secret-env", "CI_SECRET"
            ], environment: withSecret)
        #expect(refused.status == 1 && refused.stderr.contains("invalid_client"), "\(refused.stderr)")
    }
}
