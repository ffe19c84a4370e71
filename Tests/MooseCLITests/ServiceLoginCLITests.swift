import Foundation
import MooseTestSupport
import Testing

/// Issue "Without a person", §1: `moose login --client-credentials` for services and CI jobs, at the
/// real test provider (its confidential client `moose-service`).
@Suite(.serialized)
struct ServiceLoginCLITests {
    @Test func aServiceLogsInWithItsSecretFromAFileOrTheEnvironmentAndMooseTokenWorksOnIt() async throws {
        let (home, environment) = CLI.home("moose-service")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let secretFile = home.appendingPathComponent("secret")
        try Data("moose-service-secret\n".utf8).write(to: secretFile)

        let login = try await CLI.run(
            [
                "login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-service",
                "--client-secret-file", secretFile.path, "--profile", "svc"
            ], environment: environment)
        #expect(
            login.status == 0 && login.stdout.contains("as client moose-service"), "\(login.stdout) \(login.stderr)")
        let token = try await CLI.run(["token", "--profile", "svc"], environment: environment)
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token.stderr)")
        let status = try await CLI.run(["status", "--profile", "svc", "--json"], environment: environment)
        let sessions = try #require(JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
        #expect(sessions.first?["has_refresh_token"] as? Bool == false)

        // The secret from an environment variable, sent with client_secret_post: nothing on disk.
        var withVariable = environment
        withVariable["MOOSE_TEST_SERVICE_SECRET"] = "moose-service-secret"
        let post = try await CLI.run(
            [
                "login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-service",
                "--client-secret-env", "MOOSE_TEST_SERVICE_SECRET", "--client-auth", "post", "--profile", "env"
            ],
            environment: withVariable)
        #expect(post.status == 0, "\(post.stderr)")
        let stored = try await CLI.run(
            ["store", "get", "env", "--namespace", "moose.session"], environment: environment)
        #expect(!stored.stdout.contains("moose-service-secret"), "the secret was stored with the session")

        // A refused secret: the provider's word, exit 1; an unset variable: a usage error.
        var wrong = environment
        wrong["MOOSE_TEST_SERVICE_SECRET"] = "not-the-secret"
        let refused = try await CLI.run(
            [
                "login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-service",
                "--client-secret-env", "MOOSE_TEST_SERVICE_SECRET", "--profile", "bad"
            ], environment: wrong)
        #expect(refused.status == 1 && refused.stderr.contains("invalid_client"), "\(refused.stderr)")
        let unset = try await CLI.run(
            [
                "login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-service",
                "--client-secret-env", "MOOSE_NO_SUCH_VARIABLE", "--profile", "bad"
            ], environment: environment)
        #expect(unset.status == 2 && unset.stderr.contains("MOOSE_NO_SUCH_VARIABLE"), "\(unset.stderr)")
        let none = try await CLI.run(
            ["login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-service"],
            environment: environment)
        #expect(none.status == 2 && none.stderr.contains("--client-secret-file"), "\(none.stderr)")
    }

    /// `--private-key` at a server that checks private_key_jwt: Glewlwyd's `moose-pkjwt` (ES256, kid
    /// `moose-pkjwt-1`). Only the key file's path is kept with the profile; `moose token` re-signs.
    @Test func aServiceLogsInWithItsPrivateKeyAtGlewlwyd() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let (home, environment) = CLI.home("moose-pkjwt")
            defer { try? FileManager.default.removeItem(at: home) }
            let key = Fixtures.root + "/glewlwyd/pkjwt-es256.pem"
            let login = try await CLI.run(
                [
                    "login", "--client-credentials", "--issuer", issuer, "--client-id", "moose-pkjwt",
                    "--private-key", key, "--key-id", "moose-pkjwt-1", "--scope", "api.read",
                    "--profile", "pk"
                ], environment: environment)
            #expect(
                login.status == 0 && login.stdout.contains("as client moose-pkjwt"), "\(login.stdout) \(login.stderr)")
            let token = try await CLI.run(["token", "--profile", "pk"], environment: environment)
            #expect(token.status == 0 && token.stdout.split(separator: ".").count == 3, "\(token.stderr)")
            let stored = try await CLI.run(
                ["store", "get", "pk", "--namespace", "moose.session"], environment: environment)
            #expect(
                stored.status == 0 && !stored.stdout.contains("PRIVATE KEY"),
                "the key was stored with the session: \(stored.stderr)")

            // The same key as a private JWK: its kid is used, no --key-id needed.
            let jwk = try await CLI.run(
                [
                    "login", "--client-credentials", "--issuer", issuer, "--client-id", "moose-pkjwt",
                    "--private-key", Fixtures.root + "/glewlwyd/pkjwt-es256.private.jwk.json", "--scope", "api.read",
                    "--profile", "jwk"
                ], environment: environment)
            #expect(jwk.status == 0, "\(jwk.stderr)")

            // A kid the provider does not know: Glewlwyd answers a bare 403; exit 1, and the message
            // says what that most often means.
            let wrongKid = try await CLI.run(
                [
                    "login", "--client-credentials", "--issuer", issuer, "--client-id", "moose-pkjwt",
                    "--private-key", key, "--key-id", "not-registered", "--scope", "api.read",
                    "--profile", "bad"
                ], environment: environment)
            #expect(
                wrongKid.status == 1 && wrongKid.stderr.contains("403")
                    && wrongKid.stderr.contains("credentials were refused"),
                "\(wrongKid.stderr)")
        }
    }

    /// A session with no refresh token is re-acquired by the same single flight: 5 s tokens, two
    /// processes after expiry → one new grant at the provider.
    @Test func anExpiredServiceTokenIsReacquiredOnceForTwoProcesses() async throws {
        let idp = try await SecondIdP.start(tokenSeconds: 5)
        let (home, environment) = CLI.home("moose-service-short")
        defer { try? FileManager.default.removeItem(at: home) }
        do {
            var secretEnvironment = environment
            secretEnvironment["MOOSE_TEST_SERVICE_SECRET"] = "moose-service-secret"
            let withSecret = secretEnvironment
            let before = try await idp.tokensIssued(to: "moose-service")
            let login = try await CLI.run(
                [
                    "login", "--client-credentials", "--issuer", idp.issuer, "--client-id", "moose-service",
                    "--client-secret-env", "MOOSE_TEST_SERVICE_SECRET"
                ], environment: withSecret)
            #expect(login.status == 0, "\(login.stderr)")
            let first = try await CLI.run(["token"], environment: withSecret)
            try await Task.sleep(nanoseconds: 6_000_000_000)
            let beforeBoth = try await idp.tokensIssued(to: "moose-service")
            async let a = CLI.run(["token"], environment: withSecret)
            async let b = CLI.run(["token"], environment: withSecret)
            let (one, two) = try await (a, b)
            #expect(
                one.status == 0 && two.status == 0 && one.stdout == two.stdout && one.stdout != first.stdout,
                "\(one.stderr) \(two.stderr)")
            #expect(try await idp.tokensIssued(to: "moose-service") - before >= 2, "login and at least one new grant")
            let grants = try await idp.tokensIssued(to: "moose-service") - beforeBoth
            #expect(grants == 1, "two processes after expiry: one new grant expected, saw \(grants)")
        } catch {
            await idp.stop()
            throw error
        }
        await idp.stop()
    }
}
