import Foundation
import MooseTestSupport
import Testing

/// `moose inspect` as a whole process: stdout, stderr and exit status.
struct InspectTests {
    let tokens: [String: String]
    let jwks = Fixtures.path("joserfc/jwks.json")
    let testNow = "1800000000"

    init() throws {
        let root = try #require(
            JSONSerialization.jsonObject(with: Fixtures.data("joserfc/tokens.json")) as? [String: Any])
        tokens = try #require(root["tokens"] as? [String: String])
    }

    func token(_ name: String) throws -> String { try #require(tokens[name], "token \(name)") }

    @Test(arguments: ["hs256", "rs256", "ps256", "es256", "es384", "es512", "eddsa", "ed25519"])
    func validTokensVerify(name: String) async throws {
        var arguments = [
            "inspect", try token(name), "--now", testNow, "--json", "--iss", "https://id.example.com",
            "--aud", "moose-cli"
        ]
        arguments += name == "hs256" ? ["--secret-file", Fixtures.path("joserfc/hs256.secret")] : ["--jwks", jwks]
        let result = try await CLI.run(arguments)
        #expect(result.status == 0, "\(result.stderr)")
        let json = try result.json()
        #expect(json["verdict"] as? String == "valid")
        #expect((json["claims"] as? [String: Any])?["sub"] as? String == "248289761001")
        #expect(result.stderr.isEmpty)
    }

    @Test func humanOutputShowsHeaderClaimsTimesAndVerdict() async throws {
        let result = try await CLI.run([
            "inspect", try token("expired"), "--key", Fixtures.path("joserfc/ec256-public.pem"),
            "--now", "2027-01-15T08:00:00Z"
        ])
        #expect(result.status == 1)
        #expect(result.stdout.contains("\"alg\": \"ES256\""))
        #expect(result.stdout.contains("\"sub\": \"alice\""))
        #expect(result.stdout.contains("exp       2027-01-15T07:57:00Z  expired 3m ago"))
        #expect(result.stdout.contains("✘ invalid: token expired 3m ago"))
        let valid = try await CLI.run([
            "inspect", try token("valid_short"), "--key", Fixtures.path("joserfc/ec256-public.pem"),
            "--now", testNow, "--aud", "moose-cli"
        ])
        #expect(valid.status == 0)
        #expect(valid.stdout.contains("valid for 4m 12s"))
        #expect(valid.stdout.contains("✔ valid"))
    }

    @Test func withoutAKeyItDecodesAndSaysSo() async throws {
        let result = try await CLI.run(["inspect", try token("rs256"), "--now", testNow, "--json", "--aud", "moose-cli"]
        )
        #expect(result.status == 0)
        let json = try result.json()
        #expect(json["verdict"] as? String == "decoded")
        // Asked for nothing (no key, no audience): it decodes, shows, says what it did not check,
        // and exits 0 (issue "The first hour" §5) — a token that names an audience included.
        let unchecked = try await CLI.run(["inspect", try token("rs256"), "--now", testNow])
        #expect(unchecked.status == 0, "\(unchecked.stderr)")
        #expect(
            unchecked.stdout.contains("signature NOT verified") && unchecked.stdout.contains("audience not checked"),
            "\(unchecked.stdout)")
        #expect(try await CLI.run(["inspect", try token("rs256"), "--now", testNow, "--any-audience"]).status == 0)
        #expect((json["signature"] as? [String: Any])?["status"] as? String == "not-checked")
        // Expiry is shown without a key, and judged (exit 1) once a verification is asked for — in
        // one vocabulary (issue "The second hour" §2): decoding says "● decoded: token expired …
        // (not verified: decoded only)", never "✘ invalid" under exit 0.
        let expired = try await CLI.run(["inspect", try token("expired"), "--now", testNow])
        #expect(
            expired.status == 0 && expired.stdout.contains("● decoded: token expired")
                && expired.stdout.contains("(not verified: decoded only)"),
            "\(expired.stdout)")
        #expect(!expired.stdout.contains("✘"), "\(expired.stdout)")
        let expiredJSON = try await CLI.run(["inspect", try token("expired"), "--now", testNow, "--json"])
        let expiredVerdict = try expiredJSON.json()["verdict"] as? String
        #expect(expiredJSON.status == 0 && expiredVerdict == "decoded", "\(expiredJSON.stdout)")
        #expect(try expiredJSON.reasonCodes() == ["expired"], "\(expiredJSON.stdout)")
        let judged = try await CLI.run(["inspect", try token("expired"), "--now", testNow, "--aud", "moose-cli"])
        #expect(judged.status == 1 && judged.stdout.contains("✘ invalid: token expired"), "\(judged.stdout)")
        // A verification without --aud of a token that names one: not accepted, in the CLI's words.
        let noAudience = try await CLI.run(["inspect", try token("rs256"), "--jwks", jwks, "--now", testNow])
        #expect(noAudience.status == 1, "\(noAudience.stdout)")
        #expect(
            noAudience.stdout.contains(
                "✘ not accepted: audience not checked: pass --audience AUDIENCE (or --any-audience to accept any)"),
            "\(noAudience.stdout)")
        // An opaque token is not a broken JWT; a path that does not exist is not a token.
        let opaque = try await CLI.run(["inspect", "mat_0123456789abcdef"])
        #expect(opaque.status == 2 && opaque.stderr.contains("not a JWT"), "\(opaque.stderr)")
        let missing = try await CLI.run(["inspect", "./no/such/token.jwt"])
        #expect(
            missing.status == 2 && missing.stderr.contains("no such file: ./no/such/token.jwt"), "\(missing.stderr)")
    }

    @Test func readsFromStdinAFileAndIgnoresBearer() async throws {
        let piped = try await CLI.run(
            ["inspect", "--now", testNow, "--json", "--aud", "moose-cli"],
            stdin: Data("Bearer \(try token("es256"))\n".utf8))
        #expect(piped.status == 0, "\(piped.stderr)")
        let dash = try await CLI.run(
            ["inspect", "-", "--now", testNow, "--aud", "moose-cli"], stdin: Data(try token("es256").utf8))
        #expect(dash.status == 0)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("moose-token-\(UUID().uuidString)")
        try Data("\n  \(try token("es256"))\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let fromFile = try await CLI.run(["inspect", file.path, "--jwks", jwks, "--now", testNow, "--aud", "moose-cli"])
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
    }

    /// Every forged or malformed token class: exit 1 (invalid) or 2 (unusable), a specific reason, never 0.
    @Test(arguments: [
        ("alg_none", 1, "algorithmNone"),
        ("alg_none_uppercase", 1, "algorithmNone"),
        ("alg_confusion_hs256_with_rsa_pem", 1, "algorithmNotAllowed"),
        ("es256_der_signature", 1, "invalidSignature"),
        ("tampered_signature", 1, "invalidSignature"),
        ("tampered_payload", 1, "invalidSignature"),
        ("signed_by_other_key", 1, "invalidSignature"),
        ("unknown_kid", 1, "unknownKey"),
        ("unknown_crit", 1, "unsupportedCriticalHeader"),
        ("embedded_jwk", 1, "untrustedKeyReference"),
        ("jku_header", 1, "untrustedKeyReference"),
        ("x5u_header", 1, "untrustedKeyReference"),
        ("expired", 1, "expired"),
        ("not_yet_valid", 1, "notYetValid"),
        ("issued_in_future", 1, "issuedInFuture"),
        ("wrong_issuer", 1, "issuerMismatch"),
        ("wrong_audience", 1, "audienceMismatch"),
        ("exp_not_a_number", 1, "invalidClaim"),
        ("padded_base64", 2, "invalidBase64URL"),
        ("standard_base64_alphabet", 2, "invalidBase64URL"),
        ("two_parts", 2, "malformed"),
        ("four_parts", 2, "malformed"),
        ("header_not_json", 2, "invalidJSON"),
        ("header_not_object", 2, "invalidJSON"),
        ("duplicate_claims", 2, "invalidJSON"),
        ("no_alg", 2, "malformed"),
        ("jwe", 2, "encryptedTokenUnsupported"),
        ("deeply_nested", 2, "invalidJSON")
    ])
    func forgedAndMalformedTokensAreRefused(name: String, status: Int32, code: String) async throws {
        let result = try await CLI.run([
            "inspect", try token(name), "--jwks", jwks, "--now", testNow, "--json",
            "--iss", "https://id.example.com", "--aud", "moose-cli"
        ])
        #expect(result.status == status, "\(name): \(result.stdout) \(result.stderr)")
        #expect(try result.reasonCodes().first == code, "\(name): \(result.stdout)")
        if status == 2 { #expect(result.stderr.contains("unusable"), "\(name): \(result.stderr)") }
    }

    @Test func algorithmConfusionWithTheSecretFileIsStillRefused() async throws {
        // Even when the attacker's "secret" (the RSA public PEM) is handed over as --secret-file,
        // mixing it with the public keys is refused.
        let result = try await CLI.run([
            "inspect", try token("alg_confusion_hs256_with_rsa_pem"), "--jwks", jwks,
            "--secret-file", Fixtures.path("joserfc/rsa-public.pem"), "--now", testNow, "--json", "--aud", "moose-cli"
        ])
        #expect(result.status == 2)
        #expect(try result.reasonCodes() == ["invalidKey"])
    }

    @Test func hostileInputNeverCrashesOrHangs() async throws {
        let megabyte = Data(repeating: UInt8(ascii: "a"), count: 1 << 20)
        let big = try await CLI.run(["inspect"], stdin: megabyte, timeout: 10)
        #expect(big.status == 2)
        #expect(big.stderr.contains("65536") || big.stderr.contains("1 MiB"))
        let tooBig = try await CLI.run(["inspect"], stdin: megabyte + Data("xx".utf8), timeout: 10)
        #expect(tooBig.status == 2)
        for garbage in ["...", "a.b.c", "\u{0}\u{1}", "eyJ.eyJ.", String(repeating: ".", count: 5000), "🦌.🦌.🦌"] {
            let result = try await CLI.run(["inspect", "-"], stdin: Data(garbage.utf8), timeout: 10)
            #expect(result.status == 2, "\(garbage.prefix(20)): \(result.stderr)")
            #expect(!result.stderr.isEmpty)
        }
        let binary = try await CLI.run(["inspect", "-"], stdin: Data([0xFF, 0xFE, 0x00, 0x80]), timeout: 10)
        #expect(binary.status == 2)
    }

    @Test func usageErrorsExitTwo() async throws {
        #expect(try await CLI.run(["inspect", "x", "--alg", "none"]).status == 2)
        #expect(try await CLI.run(["inspect", "x", "--alg", "XS999"]).status == 2)
        #expect(try await CLI.run(["inspect", "x", "--now", "yesterday"]).status == 2)
        #expect(try await CLI.run(["inspect", "x", "--no-such-flag"]).status == 2)
        let missing = try await CLI.run(["inspect", try token("es256"), "--key", "/nonexistent/key.pem"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("/nonexistent/key.pem"))
        #expect(try await CLI.run(["--help"]).status == 0)
    }

    @Test func everyRFCVectorVerifiesThroughTheCLI() async throws {
        let root = try #require(
            JSONSerialization.jsonObject(with: Fixtures.data("rfc/jose-vectors.json")) as? [String: Any])
        let vectors = try #require(root["vectors"] as? [[String: Any]])
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-rfc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for (index, vector) in vectors.enumerated() {
            let keyFile = folder.appendingPathComponent("key\(index).json")
            try JSONSerialization.data(withJSONObject: try #require(vector["key"])).write(to: keyFile)
            let compact = try #require(vector["compact"] as? String)
            // RFC 7515's examples expired in 2011; judge them as of 2011-03-22.
            let result = try await CLI.run(["inspect", compact, "--key", keyFile.path, "--now", "1300819000", "--json"])
            let json = try result.json()
            if json["claims"] is [String: Any] {
                #expect(result.status == 0, "\(vector["source"] ?? ""): \(result.stdout) \(result.stderr)")
                #expect(json["verdict"] as? String == "valid")
            } else {
                // RFC 7515/7520 JWS examples with a text payload: the signature verifies, but a
                // payload that is not a JSON object is no JWT claims set (RFC 7519 §7.2 step 10).
                #expect(result.status == 1, "\(vector["source"] ?? "")")
                #expect((json["signature"] as? [String: Any])?["status"] as? String == "verified")
                #expect(try result.reasonCodes() == ["claimsNotObject"])
            }
        }
        let unsecured = try #require((root["unsecured"] as? [String: Any])?["compact"] as? String)
        let none = try await CLI.run(["inspect", unsecured, "--now", "1300819000", "--json"])
        #expect(none.status == 1)
        #expect(try none.reasonCodes() == ["algorithmNone"])
    }
}

/// `--jwks URL`: a real HTTP server on 127.0.0.1 (Python's http.server serving the fixtures).
struct InspectJWKSURLTests {
    /// Starts `python3 -m http.server` on a free port; returns the process and its base URL.
    static func startServer(directory: String) throws -> (TestProcess, String) {
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", directory]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        // "Serving HTTP on 127.0.0.1 port 43519 (http://127.0.0.1:43519/) ..."
        var text = ""
        let deadline = Date().addingTimeInterval(10)
        while !text.contains(")"), Date() < deadline {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let range = text.range(of: "http://127.0.0.1:"), let end = text[range.upperBound...].firstIndex(of: "/")
        else {
            kill(process.processIdentifier, SIGKILL)
            throw CocoaError(.fileReadUnknown)
        }
        return (process, "http://127.0.0.1:" + text[range.upperBound..<end])
    }

    @Test func verifiesAgainstAJWKSURL() async throws {
        let (server, base) = try Self.startServer(directory: Fixtures.path("joserfc"))
        // SIGKILL: children of the test runner inherit its blocked signal mask, so SIGTERM would wait forever.
        defer { kill(server.processIdentifier, SIGKILL); server.waitUntilExit() }
        let root = try #require(
            JSONSerialization.jsonObject(with: Fixtures.data("joserfc/tokens.json")) as? [String: Any])
        let token = try #require((root["tokens"] as? [String: String])?["es256"])
        let ok = try await CLI.run([
            "inspect", token, "--jwks", "\(base)/jwks.json", "--now", "1800000000", "--json", "--aud", "moose-cli"
        ])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(try ok.json()["verdict"] as? String == "valid")
        let missing = try await CLI.run(["inspect", token, "--jwks", "\(base)/missing.json"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("HTTP 404"))
        let notJWKS = try await CLI.run(["inspect", token, "--jwks", "\(base)/rsa-public.pem"])
        #expect(notJWKS.status == 2)
        #expect(notJWKS.stderr.contains("not a usable JWKS"))
        // Nothing listening (port 9 on loopback): not reached now is exit 3, as for `moose verify`, for
        // a JWKS URL and for an issuer — not 1, which says the token is bad.
        for source in [["--jwks", "http://127.0.0.1:9/jwks.json"], ["--issuer", "http://127.0.0.1:9"]] {
            let unreachable = try await CLI.run(["inspect", token, "--aud", "moose-cli"] + source)
            #expect(
                unreachable.status == 3 && unreachable.stderr.contains("try again"),
                "\(source): \(unreachable.status) \(unreachable.stderr)")
        }
    }
}
