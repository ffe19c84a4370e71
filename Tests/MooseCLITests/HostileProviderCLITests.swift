import Foundation
import MooseTestSupport
import Testing

/// tools/hostile/hostile_idp.py, started once per test process on 127.0.0.1 (it exits with us).
enum HostileIdP {
    static let base: String = {
        // The test IdP's virtualenv has `cryptography` (for RS256); tools/test creates it first.
        let venv = LocalServer.repositoryRoot + "/tools/idp/.state/venv/bin/python"
        let python = FileManager.default.isExecutableFile(atPath: venv) ? venv : "/usr/bin/python3"
        return "http://127.0.0.1:\(LocalServer.start("tools/hostile/hostile_idp.py", python: python))"
    }()

    static func issuer(_ scenario: String) -> String { "\(base)/\(scenario)" }

    /// The scenario's request counters (tools/hostile/README.md).
    static func stats(_ scenario: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(string: "\(base)/_stats/\(scenario)")!)
        return try #require(JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func tokenCalls(_ scenario: String, _ grant: String) throws -> Int {
        (try stats(scenario)["token"] as? [String: Any])?[grant] as? Int ?? -1
    }

    /// A fresh home whose $BROWSER follows loopback redirects only.
    static func home(_ label: String) -> (URL, [String: String]) {
        var (home, environment) = CLI.home(label)
        environment["BROWSER"] = "python3 \(LocalServer.repositoryRoot)/tools/hostile/browser.py"
        return (home, environment)
    }

    /// `moose login` against `scenario` in a fresh home.
    static func login(_ scenario: String, timeout: Int = 20, extra: [String] = []) async throws -> (
        CLIResult, URL, [String: String]
    ) {
        let (home, environment) = Self.home("moose-hostile-\(scenario)")
        let result = try await CLI.run(
            ["login", "--issuer", issuer(scenario), "--client-id", "moose-cli", "--timeout", String(timeout)] + extra,
            environment: environment, timeout: Double(timeout) + 30)
        return (result, home, environment)
    }
}

extension CLIResult {
    /// Nothing that could drive a terminal reached it: no ESC, BEL, C1 CSI or bidi override.
    var isTerminalSafe: Bool {
        !(stdout + stderr).unicodeScalars.contains { [0x1B, 0x07, 0x9B, 0x202E].contains($0.value) }
    }
    /// Exited with a status (not killed by a signal: a trap would be 132/133/134 or a signal).
    var didNotCrash: Bool { status <= 3 }
}

/// The CLI against an identity provider gone bad (issue "Untrusted input"): every hostile answer
/// gets a clear error (or is safely bounded), never a crash, a shell payload or terminal escapes.
@Suite(.serialized) struct HostileProviderCLITests {
    @Test func theBaselineScenarioLogsIn() async throws {
        let (login, home, environment) = try await HostileIdP.login("ok")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(login.status == 0, "\(login.stderr)")
        #expect(try await CLI.run(["token"], environment: environment).status == 0)
    }

    /// The README's own recipe, `eval "$(moose token --format env)"`, with a token carrying a shell payload.
    @Test func aShellPayloadInTheAccessTokenNeverReachesAShell() async throws {
        let marker = "/tmp/moose-pwned"
        try? FileManager.default.removeItem(atPath: marker)
        let (login, home, environment) = try await HostileIdP.login("shell-token")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(login.status == 0, "VSCHAR tokens are valid token responses: \(login.stderr)")
        for format in ["env", "header", "token"] {
            let token = try await CLI.run(["token", "--format", format], environment: environment)
            #expect(token.status == 1 && token.stdout.isEmpty, "\(format): \(token.stdout)")
            #expect(token.stderr.contains("b64token"))
        }
        let eval = try await CLI.run(
            ["/bin/sh", "-c", "eval \"$(\"$0\" token --format env)\"", CLI.binary], environment: environment,
            executable: "/bin/sh")
        #expect(eval.stdout.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: marker), "the provider ran a command on this machine")
        // JSON is no shell text: the token is there, escaped.
        let json = try await CLI.run(["token", "--format", "json"], environment: environment)
        #expect(json.status == 0 && json.stdout.contains(#"x'; touch /tmp/moose-pwned; echo '"#))
    }

    @Test func aShellPayloadInTheTokenTypeIsRefused() async throws {
        let (login, home, _) = try await HostileIdP.login("shell-token-type")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(login.status == 1 && login.stderr.contains("token_type"), "\(login.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "/tmp/moose-pwned"))
    }

    @Test func escapeSequencesFromTheProviderNeverReachTheTerminal() async throws {
        let (login, home, _) = try await HostileIdP.login("ansi-error")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(login.status == 1)
        #expect(login.isTerminalSafe, "\(login.stderr.debugDescription)")
        #expect(login.stderr.contains("\\u{1b}") && login.stderr.contains("FAKE OUTPUT"), "\(login.stderr)")
        let (named, home2, _) = try await HostileIdP.login("control-in-username")
        defer { try? FileManager.default.removeItem(at: home2) }
        #expect(named.status == 0 && named.isTerminalSafe, "\(named.stdout.debugDescription)")
    }

    /// Huge or negative lifetimes are bounded; every later command still works.
    @Test(arguments: ["huge-expires", "huge-expires-string", "negative-expires", "date-far-future", "date-huge-hour"])
    func boundedNumbersAndDates(scenario: String) async throws {
        let (login, home, environment) = try await HostileIdP.login(scenario)
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(login.status == 0, "\(scenario): \(login.stderr)")
        for arguments in [["status"], ["status", "--json"], ["token", "--format", "json"]] {
            let result = try await CLI.run(arguments, environment: environment)
            #expect(result.status == 0, "\(scenario) \(arguments): \(result.stderr)")
        }
    }

    /// Each of these must fail with exit 1 and a message naming the problem — never a crash.
    @Test(arguments: [
        ("huge-exp-claim", "NumericDate"), ("huge-iat-claim", "NumericDate"), ("exp-2pow64", "NumericDate"),
        ("non-object-json", "no JSON object"), ("null-json", "no JSON object"),
        ("missing-members", "lacks jwks_uri, subject_types_supported, id_token_signing_alg_values_supported"),
        ("plain-http-endpoints", "not https"), ("wrong-iss", "RFC 9207"), ("missing-iss", "RFC 9207"),
        ("extra-aud", "does not trust"), ("bad-at-hash", "at_hash"), ("html-error", "HTML page")
    ])
    func refusedWithAClearError(scenario: String, words: String) async throws {
        let (login, home, _) = try await HostileIdP.login(scenario)
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(login.status == 1, "\(scenario): \(login.status) \(login.stderr)")
        #expect(login.didNotCrash && login.isTerminalSafe)
        #expect(login.stderr.contains(words), "\(scenario): \(login.stderr)")
    }

    @Test func aMixUpNeverRedeemsTheCode() async throws {
        for scenario in ["wrong-iss", "missing-iss"] {
            let (login, home, _) = try await HostileIdP.login(scenario)
            defer { try? FileManager.default.removeItem(at: home) }
            #expect(login.status == 1)
            #expect(
                try HostileIdP.tokenCalls(scenario, "authorization_code") == 0, "\(scenario): the code was redeemed")
        }
    }

    @Test func secretsInAnErrorBodyAreNeverPrinted() async throws {
        let (login, home, _) = try await HostileIdP.login("secret-in-4xx")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(login.status == 1)
        #expect(!(login.stdout + login.stderr).contains("SECRET-"), "\(login.stderr)")
        #expect(login.stderr.contains("access_token") && login.stderr.contains("values not shown"), "\(login.stderr)")
    }

    /// A redirect with a forged state is ignored: the login keeps waiting (here until its timeout).
    @Test func aForgedStateNeverEndsTheLogin() async throws {
        let started = Date()
        let (login, home, _) = try await HostileIdP.login("wrong-state", timeout: 3)
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(login.status == 1 && login.stderr.contains("in time"), "\(login.stderr)")
        #expect(Date().timeIntervalSince(started) >= 2.5, "the login ended before its deadline")
        #expect(try HostileIdP.tokenCalls("wrong-state", "authorization_code") == 0)
    }

    @Test func aHugeRetryAfterIsNotWaitedFor() async throws {
        let started = Date()
        let (login, home, _) = try await HostileIdP.login("retry-after-huge")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(login.status == 3, "\(login.stderr)")
        #expect(Date().timeIntervalSince(started) < 60)
    }

    /// `moose inspect` on tokens whose NumericDates would overflow: a verdict, not a trap.
    @Test func inspectOfHugeNumericDatesIsAVerdict() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-huge-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let secret = folder.appendingPathComponent("secret")
        let key = Data(repeating: 7, count: 32)
        try key.write(to: secret)
        for payload in [#"{"exp":1e300}"#, #"{"iat":-1e300}"#, #"{"nbf":18446744073709551616}"#] {
            let token = try await Self.hs256(payload, key: key)
            for extra in [[], ["--secret-file", secret.path], ["--json"]] {
                let result = try await CLI.run(["inspect", token] + extra)
                #expect(result.status == 1, "\(payload) \(extra): \(result.status) \(result.stderr)")
                #expect(result.stdout.contains("NumericDate"), "\(payload): \(result.stdout)")
            }
        }
    }

    static func hs256(_ payload: String, key: Data) async throws -> String {
        func b64(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let input = b64(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "." + b64(Data(payload.utf8))
        // HMAC-SHA256 through openssl's command line: an independent implementation. Bounded and off
        // the cooperative pool (its wait blocks a thread; two block every test on 2 cores).
        let run = try await offThePool {
            try runBounded(
                [
                    "/usr/bin/env", "openssl", "dgst", "-sha256", "-mac", "HMAC", "-macopt",
                    "hexkey:" + key.map { String(format: "%02x", $0) }.joined(), "-binary"
                ], stdin: Data(input.utf8), environment: ProcessInfo.processInfo.environment, timeout: 30)
        }
        #expect(run.status == 0 && !run.timedOut && run.stdout.count == 32, "openssl dgst: \(run.status)")
        let mac = run.stdout
        return input + "." + b64(mac)
    }
}
