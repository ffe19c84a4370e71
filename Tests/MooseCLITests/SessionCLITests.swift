import Foundation
import MooseTestSupport
import Testing

/// `moose login / status / refresh / logout` against the real test IdP, the "browser" being the
/// scripted one (tools/idp/headless_browser.py) set as $BROWSER.
struct SessionCLITests {
    @Test func loginStatusRefreshLogout() async throws {
        let (home, environment) = CLI.home("moose-cli-session")
        defer { try? FileManager.default.removeItem(at: home) }
        func moose(_ arguments: [String]) async throws -> CLIResult {
            try await CLI.run(arguments, environment: environment, timeout: 60)
        }

        let login = try await moose(["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"])
        #expect(login.status == 0, "\(login.stderr)")
        #expect(login.stdout.contains("Logged in to \(TestIdentityProvider.issuer)"))
        #expect(login.stderr.contains("/authorize/?response_type=code"))

        let status = try await moose(["status", "--json"])
        #expect(status.status == 0)
        let sessions = try #require(JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
        #expect(
            sessions.first?["state"] as? String == "active" && sessions.first?["has_refresh_token"] as? Bool == true)
        // Never a token in status output.
        let session = try await CLI.storedSession(environment: environment)
        let tokens = try #require(session["tokens"] as? [String: Any])
        let accessToken = try #require(tokens["accessToken"] as? String)
        #expect(!status.stdout.contains(accessToken))

        // The provider's JWKS is cached in the store for the next process.
        await #expect(try moose(["store", "list", "--namespace", "moose.jwks"]).stdout.contains("jwks.json"))

        let refresh = try await moose(["refresh"])
        #expect(refresh.status == 0 && refresh.stdout.contains("refresh token rotated"))

        let logout = try await moose(["logout"])
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(logout.stdout.contains("id_token_hint=ey"), "the end-session URL is printed in full: \(logout.stdout)")
        let after = try await moose(["status"])
        #expect(
            after.stdout.contains("no sessions; logged out of default (settings kept); run moose login"),
            "\(after.stdout)")
        await #expect(try moose(["refresh"]).status == 1)
        // The logout kept the profile's settings (issue "The second hour" §2): a plain login works again.
        await #expect(try moose(["login"]).status == 0)
    }
}

extension SessionCLITests {
    /// A login without `openid` gets no ID token to name the user by: the line names someone only
    /// when someone is known, never "as (no ID token)".
    @Test func aLoginWithoutAnIDTokenNamesNobody() async throws {
        let (home, environment) = CLI.home("moose-cli-no-id-token")
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli", "--scope", "email"],
            environment: environment, timeout: 60)
        #expect(
            login.status == 0
                && login.stdout.contains("Logged in to \(TestIdentityProvider.issuer) (profile default); access token"),
            "\(login.stdout) \(login.stderr)")
    }
}

struct InspectIssuerCLITests {
    @Test func inspectVerifiesThroughTheIssuersDiscoveryAndJWKS() async throws {
        let (home, environment) = try await CLI.logIn("moose-cli-inspect")
        defer { try? FileManager.default.removeItem(at: home) }
        let session = try await CLI.storedSession(environment: environment)
        let idToken = try #require((session["tokens"] as? [String: Any])?["idToken"] as? String)
        let verified = try await CLI.run([
            "inspect", idToken, "--issuer", TestIdentityProvider.issuer, "--aud", "moose-cli", "--json"
        ])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try verified.json()["verdict"] as? String == "valid")
        // The same token judged against another issuer: refused.
        let wrong = try await CLI.run([
            "inspect", idToken, "--issuer",
            TestIdentityProvider.issuer.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        ])
        #expect(wrong.status == 1 && wrong.stderr.contains("issuer"))
    }

    /// Issue "The second hour", §2: the top-level help's own example, `moose inspect --issuer ISS
    /// "$(moose token --id-token)"`, without --aud: the verdict says in the CLI's words that the
    /// audience was not checked and what to pass — "not accepted", exit 1 (a script's `&&` must not
    /// go on) — and the help's example passes --aud.
    @Test func withoutAudTheVerdictSaysWhatToPass() async throws {
        let (home, environment) = try await CLI.logIn("moose-cli-inspect-aud")
        defer { try? FileManager.default.removeItem(at: home) }
        let token = try await CLI.run(["token", "--id-token"], environment: environment)
        #expect(token.status == 0, "\(token.stderr)")
        let idToken = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let unchecked = try await CLI.run(
            ["inspect", "--issuer", TestIdentityProvider.issuer, idToken], environment: environment)
        #expect(unchecked.status == 1, "\(unchecked.stdout) \(unchecked.stderr)")
        #expect(
            unchecked.stdout.contains(
                "✘ not accepted: audience not checked: pass --audience AUDIENCE (or --any-audience to accept any) "
                    + "(the token is for \"moose-cli\")"), "\(unchecked.stdout)")
        #expect(
            !unchecked.stdout.contains("configure this verifier") && !unchecked.stdout.contains("✘ invalid"),
            "\(unchecked.stdout)")
        let json = try await CLI.run(
            ["inspect", "--issuer", TestIdentityProvider.issuer, idToken, "--json"], environment: environment)
        #expect(try json.reasonCodes() == ["audienceNotChecked"], "\(json.stdout)")
        let checked = try await CLI.run(
            ["inspect", "--issuer", TestIdentityProvider.issuer, "--aud", "moose-cli", idToken],
            environment: environment)
        #expect(checked.status == 0 && checked.stdout.contains("✔ valid"), "\(checked.stdout) \(checked.stderr)")
        let help = try await CLI.run(["--help"])
        #expect(help.stdout.contains("moose inspect --issuer https://id.example.com --aud my-api"), "\(help.stdout)")
    }
}

/// `moose token` from many processes at once: one refresh at the provider.
struct TokenCLITests {
    /// How many refresh tokens the provider has issued in the family of `refreshToken` (login + refreshes),
    /// read from its database by tools/idp/token_family.py (django-oauth-toolkit keeps a token_family and
    /// a SHA-256 checksum per token); -1 when the script fails. Exact even while other tests use the same
    /// provider. The token goes in on standard input, never on a command line a failure message repeats;
    /// the wait is on a thread of its own (CLI.run), not one of the two cooperative ones.
    static func familySize(of refreshToken: String) async throws -> Int {
        let result = try await CLI.run(
            ["env", "python3", LocalServer.repositoryRoot + "/tools/idp/token_family.py"],
            stdin: Data(refreshToken.utf8), timeout: 60, executable: "/usr/bin/env")
        guard result.status == 0 else {
            Issue.record("tools/idp/token_family.py failed (\(result.status)): \(result.stdout) \(result.stderr)")
            return -1
        }
        return Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// Rewrites the stored session so its access token looks expired; returns its refresh token.
    static func expireStoredSession(environment: [String: String]) async throws -> String {
        try #require(try await expireStoredSession(environment: environment, requiringRefreshToken: true))
    }

    /// Rewrites the stored session so its access token looks expired; returns its refresh token, if any.
    @discardableResult
    static func expireStoredSession(environment: [String: String], requiringRefreshToken: Bool) async throws -> String?
    {
        var row = try await CLI.storedRow(environment: environment)
        var session = try #require(row["session"] as? [String: Any])
        var tokens = try #require(session["tokens"] as? [String: Any])
        let refreshToken = tokens["refreshToken"] as? String
        if requiringRefreshToken { try #require(refreshToken != nil, "the stored session has no refresh token") }
        tokens["expiresAt"] = 0 // 2001-01-01 in JSONEncoder's default date format
        session["tokens"] = tokens
        row["session"] = session
        let edited = try JSONSerialization.data(withJSONObject: row)
        #expect(
            try await CLI.run(
                ["store", "put", "default", "--namespace", "moose.session"], stdin: edited, environment: environment
            ).status == 0)
        return refreshToken
    }

    /// 8 processes × 50 tasks, each process with its own RefreshCoordinator on the one store: one
    /// refresh at the provider in all, every task gets the same token, and the stored refresh token works.
    @Test func eightProcessesOfFiftyTasksCauseOneRefresh() async throws {
        let (home, environment) = try await CLI.logIn("moose-cli-8x50")
        defer { try? FileManager.default.removeItem(at: home) }
        let firstRefreshToken = try await Self.expireStoredSession(environment: environment)

        let worker = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent().appendingPathComponent(
            "moose-store-worker"
        ).path
        let store = home.appendingPathComponent("data/moose/store.sqlite").path
        let key = home.appendingPathComponent("config/moose/store.key").path
        let processes = try (0..<8).map { _ -> (TestProcess, Pipe) in
            let process = TestProcess()
            process.executableURL = URL(fileURLWithPath: worker)
            process.arguments = ["tokens", store, key, "default", "50"]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            return (process, pipe)
        }
        var printed: [String] = []
        // The workers' outputs and exits, collected off the cooperative pool (their waits block a thread).
        let outcomes = try await offThePool {
            processes.map { process, pipe in
                let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                return (process.terminationStatus, output)
            }
        }
        for (status, output) in outcomes {
            #expect(status == 0, "worker said: \(output)")
            let lines = output.split(separator: "\n").filter { $0.hasPrefix("token ") }
            #expect(lines.count == 1, "one process's 50 tasks got different tokens: \(output)")
            printed += lines.map(String.init)
        }
        #expect(printed.count == 8 && Set(printed).count == 1, "the processes got different tokens: \(printed)")
        #expect(
            try await Self.familySize(of: firstRefreshToken) == 2,
            "the provider issued more than one refresh for this session")

        // The refresh token the store ends with is the live one: the provider accepts it.
        let refresh = try await CLI.run(["refresh"], environment: environment)
        #expect(refresh.status == 0, "\(refresh.stderr)")
        #expect(try await Self.familySize(of: firstRefreshToken) == 3)
    }

    @Test func twelveConcurrentScriptsCauseOneRefresh() async throws {
        let (home, environment) = try await CLI.logIn("moose-cli-token")
        defer { try? FileManager.default.removeItem(at: home) }
        // A valid token is printed straight from the store.
        let cached = try await CLI.run(["token"], environment: environment)
        #expect(cached.status == 0 && !cached.stdout.isEmpty)
        let header = try await CLI.run(["token", "--format", "header"], environment: environment)
        #expect(header.stdout.hasPrefix("Authorization: Bearer "))

        // Make the stored access token look expired (as time would), then ask from 12 processes at once.
        let firstRefreshToken = try await Self.expireStoredSession(environment: environment)
        let sizeBefore = try await Self.familySize(of: firstRefreshToken)
        #expect(sizeBefore == 1, "family of \(sizeBefore) refresh tokens before any refresh")
        let results = await BackgroundCLI.finishAll(
            try (0..<12).map { _ in try BackgroundCLI(["token", "--format", "json"], environment: environment) })
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr))")
        let values = Set(results.compactMap { try? $0.json()["token"] as? String })
        #expect(values.count == 1, "the processes got different tokens")
        #expect(
            try await Self.familySize(of: firstRefreshToken) == 2,
            "the provider issued more than one refresh for this session")
    }
}

/// A `moose` process started now and collected later (for concurrency tests).
final class BackgroundCLI {
    let process = TestProcess()
    let out = Pipe(), err = Pipe()

    init(_ arguments: [String], environment: [String: String], executable: String? = nil) throws {
        process.executableURL = URL(fileURLWithPath: executable ?? CLI.binary)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Waits for the process and returns what it printed. The wait happens on a thread of its own
    /// (as `CLI.run`'s does), never on one of Swift's cooperative threads; both pipes are drained at
    /// once, so a child that fills one while the other is read cannot stall.
    func finish() async -> CLIResult {
        let process = self.process, out = self.out, err = self.err
        return await withCheckedContinuation { continuation in
            Thread {
                // Written by the reader thread before it signals, read here only after the wait.
                nonisolated(unsafe) var stderr = Data()
                let done = DispatchSemaphore(value: 0)
                Thread {
                    stderr = err.fileHandleForReading.readDataToEndOfFile(); done.signal()
                }.start()
                let stdout = out.fileHandleForReading.readDataToEndOfFile()
                done.wait()
                process.waitUntilExit()
                continuation.resume(
                    returning: CLIResult(
                        status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                        stderr: String(decoding: stderr, as: UTF8.self)))
            }.start()
        }
    }

    /// Waits for every one of `processes`, in order.
    static func finishAll(_ processes: [BackgroundCLI]) async -> [CLIResult] {
        var results: [CLIResult] = []
        for process in processes { results.append(await process.finish()) }
        return results
    }
}
