import Foundation
import MooseTestSupport
import Testing

/// `moose verify`, the real binary: real access tokens — RFC 9068 JWTs from Glewlwyd, opaque ones from
/// the django-oauth-toolkit test provider, both got by `moose login --client-credentials` and `moose
/// token` — checked as a resource server would, and the exit statuses scripts rely on.
@Suite(.serialized)
struct VerifyCLITests {
    static let resource = "https://api.moose.test"

    /// A fresh home with a client-credentials session of `moose-service` at `issuer`; its access token.
    static func serviceToken(issuer: String, arguments: [String], label: String) async throws -> (
        token: String, home: URL
    ) {
        let (home, environment) = CLI.home(label)
        var withSecret = environment
        withSecret["MOOSE_TEST_SERVICE_SECRET"] = "moose-service-secret"
        let login = try await CLI.run(
            [
                "login", "--client-credentials", "--issuer", issuer, "--client-id", "moose-service",
                "--client-secret-env", "MOOSE_TEST_SERVICE_SECRET"
            ] + arguments, environment: withSecret)
        #expect(login.status == 0, "\(login.stdout) \(login.stderr)")
        let token = try await CLI.run(["token"], environment: environment)
        #expect(token.status == 0, "\(token.stderr)")
        return (token.stdout.trimmingCharacters(in: .whitespacesAndNewlines), home)
    }

    @Test func aRealJWTAccessTokenIsAcceptedAndRefusedForAnotherAudienceScopeOrAlgorithm() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let (token, home) = try await Self.serviceToken(
                issuer: issuer, arguments: ["--scope", "api.read", "--resource", Self.resource],
                label: "moose-verify-jwt")
            defer { try? FileManager.default.removeItem(at: home) }
            #expect(token.split(separator: ".").count == 3, "Glewlwyd's access tokens are JWTs")
            let verify = ["verify", "--issuer", issuer, "--audience", Self.resource]

            // From standard input: accepted, the principal printed.
            let valid = try await CLI.run(verify + ["--scope", "api.read", "-"], stdin: Data(token.utf8))
            #expect(valid.status == 0, "\(valid.stderr)")
            #expect(valid.stdout.contains("valid: the token is accepted for \(Self.resource)"), "\(valid.stdout)")
            #expect(
                valid.stdout.contains("client    moose-service") && valid.stdout.contains("api.read"), "\(valid.stdout)"
            )
            #expect(valid.stdout.contains("valid for"), "the expiry is shown: \(valid.stdout)")

            // From a variable, as JSON.
            let json = try await CLI.run(
                verify + ["--token-env", "MOOSE_TEST_TOKEN", "--json"], environment: ["MOOSE_TEST_TOKEN": token])
            #expect(json.status == 0, "\(json.stderr)")
            let object = try json.json()
            #expect(object["valid"] as? Bool == true && object["client_id"] as? String == "moose-service")
            #expect(
                (object["scopes"] as? [String])?.contains("api.read") == true
                    && object["checked_by"] as? String == "jwt")
            #expect((object["audiences"] as? [String])?.contains(Self.resource) == true)
            let expiresAt = try #require((object["expires_at"] as? NSNumber)?.doubleValue)
            #expect(expiresAt > Date().timeIntervalSince1970)

            // Another resource: invalid_token, the failed check named; nothing on standard output.
            let elsewhere = try await CLI.run(
                ["verify", "--issuer", issuer, "--audience", "https://other.moose.test", "-"], stdin: Data(token.utf8))
            #expect(elsewhere.status == 1 && elsewhere.stdout.isEmpty, "\(elsewhere.stdout)")
            #expect(
                elsewhere.stderr.contains("moose: refused: invalid_token")
                    && elsewhere.stderr.contains("audienceMismatch"), "\(elsewhere.stderr)")

            // A scope the token does not grant: insufficient_scope, naming what was needed.
            let scope = try await CLI.run(
                verify + ["--scope", "api.read", "--scope", "api.write", "--json", "-"], stdin: Data(token.utf8))
            #expect(
                scope.status == 1 && scope.stderr.contains("insufficient_scope") && scope.stderr.contains("api.write"),
                "\(scope.stderr)")
            #expect(
                try scope.json()["error"] as? String == "insufficient_scope"
                    && (try scope.json()["valid"] as? Bool) == false)

            // An algorithm not allowed (Glewlwyd signs moose-service's tokens with RS256).
            let algorithm = try await CLI.run(verify + ["--alg", "ES256", "-"], stdin: Data(token.utf8))
            #expect(algorithm.status == 1 && algorithm.stderr.contains("algorithmNotAllowed"), "\(algorithm.stderr)")

            // The token itself is never printed.
            for result in [valid, json, elsewhere, scope, algorithm] {
                #expect(!result.stdout.contains(token) && !result.stderr.contains(token))
            }
        }
    }

    @Test func anOpaqueTokenIsCheckedByIntrospection() async throws {
        let issuer = TestIdentityProvider.issuer
        let (token, home) = try await Self.serviceToken(
            issuer: issuer, arguments: ["--scope", "read"], label: "moose-verify-opaque")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(!token.contains("."), "the test provider's access tokens are opaque")
        let secrets = ["MOOSE_TEST_RS_SECRET": "moose-resource-server-secret"]
        let introspect = [
            "verify", "--issuer", issuer, "--audience", "https://api.example.com", "--introspect",
            "--client-id", "moose-resource-server", "--client-secret-env", "MOOSE_TEST_RS_SECRET"
        ]

        let valid = try await CLI.run(
            introspect + ["--scope", "read", "-"], stdin: Data(token.utf8), environment: secrets)
        #expect(valid.status == 0, "\(valid.stderr)")
        #expect(
            valid.stdout.contains("client    moose-service") && valid.stdout.contains("by introspection"),
            "\(valid.stdout)")
        // django-oauth-toolkit's answer has no aud (RFC 7662 makes it optional): never "accepted for" the
        // resource, which nothing checked.
        #expect(
            valid.stdout.contains(
                "its answer names no audience, so it was not checked to be for https://api.example.com")
                && !valid.stdout.contains("accepted for"), "\(valid.stdout)")
        let json = try await CLI.run(introspect + ["--json", "-"], stdin: Data(token.utf8), environment: secrets)
        #expect(
            try json.json()["checked_by"] as? String == "introspection"
                && (try json.json()["scopes"] as? [String]) == ["read"])

        // The secret from a file, sent with client_secret_post.
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let secretFile = home.appendingPathComponent("rs-secret")
        try Data("moose-resource-server-secret\n".utf8).write(to: secretFile)
        let post = try await CLI.run(
            [
                "verify", "--issuer", issuer, "--audience", "https://api.example.com", "--introspect", "--client-id",
                "moose-resource-server", "--client-secret-file", secretFile.path, "--client-auth", "post", "-"
            ],
            stdin: Data(token.utf8))
        #expect(post.status == 0, "\(post.stderr)")

        // Inactive at the issuer (a token it never issued): invalid_token. Without --introspect an opaque
        // token is no JWT: invalid_token too.
        let unknown = try await CLI.run(
            introspect + ["-"], stdin: Data("not-a-token-\(UUID().uuidString)".utf8), environment: secrets)
        #expect(
            unknown.status == 1 && unknown.stderr.contains("invalid_token") && unknown.stderr.contains("not active"),
            "\(unknown.stderr)")
        let local = try await CLI.run(
            ["verify", "--issuer", issuer, "--audience", "https://api.example.com", "-"], stdin: Data(token.utf8))
        #expect(local.status == 1 && local.stderr.contains("invalid_token"), "\(local.stderr)")

        // A wrong client secret: the endpoint refuses moose, which is no verdict on the token (never 0).
        let wrong = try await CLI.run(
            introspect + ["-"], stdin: Data(token.utf8), environment: ["MOOSE_TEST_RS_SECRET": "wrong"])
        #expect(wrong.status == 1 && wrong.stderr.contains("--client-id"), "\(wrong.stderr)")
        for result in [valid, json, post, unknown, local, wrong] {
            #expect(!result.stdout.contains(token) && !result.stderr.contains(token))
            #expect(!result.stderr.contains("moose-resource-server-secret"))
        }
    }

    @Test func garbageAndHostileTokensAreRefusedWithoutCrashOrRawEcho() async throws {
        let verify = ["verify", "--issuer", TestIdentityProvider.issuer, "--audience", "https://api.example.com"]
        let hostile = "eyJhbGciOiJub25lIn0\u{1b}]0;pwned\u{07}\u{1b}[2J\u{9b}31m\u{202e}evil"
        let cases: [(String, Data)] = [
            ("garbage", Data("garbage".utf8)),
            ("a broken JWS", Data("eyJhbGciOi.eyJzdWIi.c2ln".utf8)),
            ("alg none", Data("eyJhbGciOiJub25lIiwidHlwIjoiYXQrand0In0.eyJzdWIiOiJhbGljZSJ9.".utf8)),
            ("terminal escapes", Data(hostile.utf8)),
            ("not UTF-8", Data([0xff, 0xfe, 0x1b, 0x5b, 0x33, 0x31, 0x6d, 0xc0])),
            ("20 KiB", Data(String(repeating: "a", count: 20_000).utf8))
        ]
        for (label, bytes) in cases {
            let result = try await CLI.run(verify + ["-"], stdin: bytes)
            #expect(result.status == 1, "\(label): \(result.status) \(result.stderr)")
            #expect(result.stderr.hasPrefix("moose: refused: invalid_"), "\(label): \(result.stderr)")
            #expect(
                !result.stderr.contains("\u{1b}") && !result.stderr.contains("\u{07}")
                    && !result.stderr.contains("\u{9b}"), "\(label)")
            #expect(
                !result.stderr.contains("pwned") && result.stdout.isEmpty,
                "\(label): the token was echoed: \(result.stderr)")
        }
        // As an argument too (argument-parser reads it, moose judges it).
        let argument = try await CLI.run(verify + [hostile])
        #expect(
            argument.status == 1 && !argument.stderr.contains("\u{1b}") && !argument.stderr.contains("pwned"),
            "\(argument.stderr)")
        // Empty, or more than 1 MiB on standard input: usage (2), nothing checked.
        let empty = try await CLI.run(verify + ["-"], stdin: Data("  \n".utf8))
        #expect(empty.status == 2 && empty.stderr.contains("the token is empty"), "\(empty.stderr)")
        let huge = try await CLI.run(verify + ["-"], stdin: Data(count: (1 << 20) + 10))
        #expect(huge.status == 2, "\(huge.stderr)")
        let unset = try await CLI.run(verify + ["--token-env", "MOOSE_NO_SUCH_VARIABLE"])
        #expect(unset.status == 2 && unset.stderr.contains("MOOSE_NO_SUCH_VARIABLE"), "\(unset.stderr)")
    }

    @Test func usageErrorsExitTwoAndAnUnreachableIssuerThree() async throws {
        let usage: [[String]] = [
            ["verify", "--issuer", "https://id.example.com", "-"], // no --audience
            ["verify", "--issuer", "http://id.example.com", "--audience", "a", "-"], // plain http elsewhere
            ["verify", "--issuer", "https://id.example.com", "--audience", "a", "--alg", "HS256", "-"],
            ["verify", "--issuer", "https://id.example.com", "--audience", "a", "--alg", "none", "-"],
            ["verify", "--issuer", "https://id.example.com", "--audience", "a", "--introspect", "-"], // no client
            // no --introspect
            ["verify", "--issuer", "https://id.example.com", "--audience", "a", "--client-id", "x", "-"],
            ["verify", "--issuer", "https://id.example.com", "--audience", "a", "--token-env", "T", "tok"] // two tokens
        ]
        for arguments in usage {
            let result = try await CLI.run(arguments, stdin: Data("t".utf8))
            #expect(result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
        }
        // Nothing listens on port 9: the issuer cannot be reached — try again later, not "refused".
        let down = try await CLI.run(
            ["verify", "--issuer", "http://127.0.0.1:9", "--audience", "a", "-"], stdin: Data("t".utf8))
        #expect(down.status == 3 && down.stderr.contains("cannot use issuer"), "\(down.status) \(down.stderr)")

        let help = try await CLI.run(["verify", "--help"], environment: ["COLUMNS": "80"])
        #expect(
            help.status == 0 && help.stdout.contains("Examples:") && help.stdout.contains("--token-env"),
            "\(help.stderr)")
        let root = try await CLI.run(["--help"])
        #expect(root.stdout.contains("verify"))
    }
}
