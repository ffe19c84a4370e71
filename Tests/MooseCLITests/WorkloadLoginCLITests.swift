import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MooseTestSupport
import Testing

/// Issue "Without a person", §2–3, against authgent-server (RFC 8693 and RFC 7523, PyPI) trusting a
/// stand-in CI platform (tools/workload/issuer.py: a GitHub-Actions-shaped token endpoint, and pod
/// tokens minted for a projected-token file): a job and a pod each get an access token with no
/// secret on disk; after expiry, 10 processes cause one exchange; each side's refusal is named.
@Suite(.serialized)
struct WorkloadLoginCLITests {
    static let issuer = WorkloadPlatform.issuer
    static let platform = WorkloadPlatform.platform
    static let audience = WorkloadPlatform.audience

    /// A token the stand-in platform signs (as a kubelet projects one into a pod).
    static func mint(audience: String = issuer, lifetime: Int = 300) async throws -> String {
        try await WorkloadPlatform.mint(audience: audience, lifetime: lifetime)
    }

    @Test func aGitHubActionsShapedJobGetsAnAccessTokenWithNoSecret() async throws {
        let (home, base) = CLI.home("moose-workload-github")
        defer { try? FileManager.default.removeItem(at: home) }
        var environment = base
        environment["ACTIONS_ID_TOKEN_REQUEST_URL"] = Self.platform + "/token?api-version=2.0"
        environment["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = "ci-request-token"
        let login = try await CLI.run(
            [
                "login", "--workload", "github", "--issuer", Self.issuer, "--client-id", "moose-ci",
                "--audience", Self.audience
            ], environment: environment, timeout: 60)
        #expect(login.status == 0, "\(login.stdout) \(login.stderr)")
        #expect(login.stdout.contains("as workload github"), "\(login.stdout)")
        let token = try await CLI.run(["token"], environment: environment)
        #expect(token.status == 0, "\(token.stderr)")
        // authgent's access token says whose identity it was exchanged for.
        let claims = try await CLI.run(
            ["inspect", "--json", token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)],
            environment: environment)
        let payload = try #require(try claims.json()["claims"] as? [String: Any])
        #expect(payload["sub"] as? String == "user:repo:moose/moose:ref:refs/heads/main", "\(payload)")
        #expect(
            payload["aud"] as? String == Self.audience
                || (payload["aud"] as? [String])?.contains(Self.audience) == true, "\(payload)")

        // The platform's refusal is the platform's: a job without id-token permission.
        environment["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = "not-the-request-token"
        let refused = try await CLI.run(
            [
                "login", "--workload", "github", "--issuer", Self.issuer, "--client-id", "moose-ci",
                "--audience", Self.audience, "--profile", "other"
            ], environment: environment, timeout: 60)
        #expect(
            refused.status == 1 && refused.stderr.contains("GitHub Actions' token endpoint answered HTTP 403")
                && refused.stderr.contains("id-token: write"), "\(refused.status) \(refused.stderr)")
    }

    /// A pod's projected token file with the JWT bearer grant, whose assertions authgent takes once
    /// each (per jti): 10 processes after expiry all succeed with one token only if one exchange ran.
    @Test func aPodShapedProcessAndTenProcessesAfterExpiryCauseOneExchange() async throws {
        let (home, environment) = CLI.home("moose-workload-pod")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let file = home.appendingPathComponent("token")
        try Data(try await Self.mint().utf8).write(to: file)
        let login = try await CLI.run(
            [
                "login", "--workload", "file:" + file.path, "--workload-grant", "jwt-bearer", "--issuer", Self.issuer,
                "--client-id", "moose-ci"
            ], environment: environment, timeout: 60)
        #expect(login.status == 0, "\(login.stdout) \(login.stderr)")
        let first = try await CLI.run(["token"], environment: environment)
        #expect(first.status == 0, "\(first.stderr)")

        // The kubelet rotates the file; the session's token expires; 10 processes ask at once.
        try Data(try await Self.mint().utf8).write(to: file)
        try await TokenCLITests.expireStoredSession(environment: environment, requiringRefreshToken: false)
        let results = await BackgroundCLI.finishAll(
            try (0..<10).map { _ in try BackgroundCLI(["token"], environment: environment) })
        #expect(
            results.allSatisfy { $0.status == 0 }, "a second exchange replayed the assertion: \(results.map(\.stderr))")
        let tokens = Set(results.map { $0.stdout.trimmingCharacters(in: .whitespacesAndNewlines) })
        #expect(
            tokens.count == 1 && !tokens.contains(first.stdout.trimmingCharacters(in: .whitespacesAndNewlines)),
            "\(tokens.count) tokens")

        // The provider's refusal is the provider's: a token minted for another audience.
        try Data(try await Self.mint(audience: "https://elsewhere.example").utf8).write(to: file)
        let refused = try await CLI.run(
            [
                "login", "--workload", "file:" + file.path, "--issuer", Self.issuer, "--client-id", "moose-ci",
                "--audience", Self.audience, "--profile", "wrong"
            ], environment: environment, timeout: 60)
        #expect(
            refused.status == 1 && refused.stderr.contains("the provider refused")
                && refused.stderr.contains("audience"),
            "\(refused.status) \(refused.stderr)")
    }

    @Test func exchangeOnceForAScript() async throws {
        let (home, environment) = CLI.home("moose-exchange")
        defer { try? FileManager.default.removeItem(at: home) }
        let subject = try await Self.mint()
        let printed = try await CLI.run(
            [
                "exchange", "--issuer", Self.issuer, "--client-id", "moose-ci", "--subject-token-file", "-",
                "--audience", Self.audience
            ], stdin: Data(subject.utf8), environment: environment, timeout: 60)
        #expect(
            printed.status == 0 && printed.stdout.split(separator: ".").count == 3,
            "\(printed.stdout) \(printed.stderr)")
        var env = environment
        env["MOOSE_TEST_SUBJECT"] = try await Self.mint()
        let json = try await CLI.run(
            [
                "exchange", "--issuer", Self.issuer, "--client-id", "moose-ci", "--subject-token-env",
                "MOOSE_TEST_SUBJECT",
                "--audience", Self.audience, "--format", "json"
            ], environment: env, timeout: 60)
        let object = try json.json()
        #expect(
            object["issued_token_type"] as? String == "urn:ietf:params:oauth:token-type:access_token",
            "\(json.stdout) \(json.stderr)")
        #expect(object["token_type"] as? String == "Bearer" && object["expires_at"] is NSNumber)
        // An expired subject token: the provider's invalid_grant, exit 1, nothing printed.
        let expired = try await CLI.run(
            [
                "exchange", "--issuer", Self.issuer, "--client-id", "moose-ci", "--subject-token-file", "-",
                "--audience", Self.audience
            ], stdin: Data(try await Self.mint(lifetime: -120).utf8), environment: environment,
            timeout: 60)
        #expect(
            expired.status == 1 && expired.stdout.isEmpty && expired.stderr.contains("invalid_grant"),
            "\(expired.status) \(expired.stderr)")
        #expect(try await CLI.run(["exchange", "--issuer", Self.issuer, "--client-id", "x"]).status == 2)
        // Where the subject comes from, said when it gives nothing: an empty one (stdin, all blanks), a
        // variable that is not set (its name shown escaped) — usage errors, before any request.
        let exchange = ["exchange", "--issuer", Self.issuer, "--client-id", "moose-ci", "--audience", Self.audience]
        let blank = try await CLI.run(
            exchange + ["--subject-token-file", "-"], stdin: Data(" \n\t\n".utf8), environment: environment)
        #expect(blank.status == 2 && blank.stderr.contains("the subject token is empty"), "\(blank.stderr)")
        let unset = try await CLI.run(
            exchange + ["--subject-token-env", "MOOSE_UNSET_\u{1B}[2J"], environment: environment)
        #expect(
            unset.status == 2 && unset.stderr.contains("(the subject token) is not set") && unset.isTerminalSafe,
            "\(unset.stderr)")
    }

    /// `command:PROGRAM ARG…`: the program's output is the subject, run without a shell, asked again each time.
    @Test func aCommandsOutputIsTheWorkloadsToken() async throws {
        let (home, environment) = CLI.home("moose-workload-command")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let file = home.appendingPathComponent("token")
        try Data(try await Self.mint().utf8).write(to: file)
        let printed = try await CLI.run(
            [
                "exchange", "--issuer", Self.issuer, "--client-id", "moose-ci", "--workload",
                "command:cat " + file.path,
                "--audience", Self.audience
            ], environment: environment, timeout: 60)
        #expect(
            printed.status == 0 && printed.stdout.split(separator: ".").count == 3,
            "\(printed.stdout) \(printed.stderr)")
        let failing = try await CLI.run(
            [
                "exchange", "--issuer", Self.issuer, "--client-id", "moose-ci", "--workload", "command:false",
                "--audience", Self.audience
            ], environment: environment, timeout: 60)
        #expect(
            failing.status == 1 && failing.stderr.contains("the command false exited with status 1"),
            "\(failing.status) \(failing.stderr)")
    }

    /// Delegation (RFC 8693 §1.1): `--actor-token-file` sends actor_token and actor_token_type beside
    /// the subject. authgent ignores the actor, so what Moose sends is read by a recording proxy in
    /// front of it (tools/testserver/recording_proxy.py); the exchange itself is authgent's.
    @Test func anActorTokenTravelsWithTheSubject() async throws {
        let (home, environment) = CLI.home("moose-exchange-actor")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let proxy = "http://127.0.0.1:\(LocalServer.start("tools/testserver/recording_proxy.py"))"
        let actorFile = home.appendingPathComponent("actor")
        let actor = try await Self.mint(audience: "actor-audience")
        try Data((actor + "\n").utf8).write(to: actorFile)
        let printed = try await CLI.run(
            [
                "exchange", "--issuer", proxy, "--client-id", "moose-ci", "--subject-token-file", "-",
                "--actor-token-file", actorFile.path, "--actor-token-type", "jwt", "--audience", Self.audience
            ],
            stdin: Data(try await Self.mint().utf8), environment: environment, timeout: 60)
        #expect(
            printed.status == 0 && printed.stdout.split(separator: ".").count == 3,
            "\(printed.stdout) \(printed.stderr)")
        let (data, _) = try await URLSession.shared.data(from: try #require(URL(string: proxy + "/__recorded")))
        let recorded = try #require(JSONSerialization.jsonObject(with: data) as? [[String: Any]])
        let exchange = try #require(
            recorded.compactMap { $0["fields"] as? [String: [String]] }
                .first { $0["grant_type"] == ["urn:ietf:params:oauth:grant-type:token-exchange"] }, "\(recorded)")
        #expect(exchange["actor_token"] == [actor], "the actor token, trimmed, as read from the file")
        #expect(exchange["actor_token_type"] == ["urn:ietf:params:oauth:token-type:jwt"])
        #expect(exchange["subject_token_type"] == ["urn:ietf:params:oauth:token-type:id_token"])
        // An actor without its token: a usage error before anything is sent.
        let unset = try await CLI.run(
            [
                "exchange", "--issuer", proxy, "--client-id", "moose-ci", "--subject-token-env", "HOME",
                "--actor-token-env", "MOOSE_NO_SUCH_ACTOR"
            ], environment: environment)
        #expect(unset.status == 2 && unset.stderr.contains("MOOSE_NO_SUCH_ACTOR"), "\(unset.stderr)")
    }
}
