import Foundation
import MooseTestSupport
import Testing

/// `moose login --dpop` against Glewlwyd (nonces mandatory), and the DPoP headers it prints used by
/// real curl.
@Suite(.serialized)
struct DPoPCLITests {
    @Test func loginWithDPoPThenCurlWithTheHeadersMooseTokenPrints() async throws {
        // Glewlwyd has one user and one registered loopback port: tests take turns.
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            var (home, environment) = CLI.home("moose-dpop-cli")
            defer { try? FileManager.default.removeItem(at: home) }
            environment["BROWSER"] =
                "python3 " + Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/glewlwyd/browser.py")
            let login = try await CLI.run(
                [
                    "login", "--issuer", issuer, "--client-id", "moose-public", "--port", String(Glewlwyd.redirectPort),
                    "--dpop", "--scope", "openid", "--scope", "profile", "--scope", "offline_access"
                ],
                environment: environment, timeout: 90)
            #expect(login.status == 0, "\(login.stderr)")
            #expect(login.stdout.contains("DPoP-bound (ES256)"), "\(login.stdout)")

            let userinfo = issuer + "/userinfo"
            // Without --url there is nothing to bind the proof to: a usage error, not a bearer header.
            let bare = try await CLI.run(["token", "--format", "header"], environment: environment)
            #expect(
                bare.status == 2 && bare.stderr.contains("--url") && bare.stdout.isEmpty,
                "half a header pair printed: \(bare.stdout) \(bare.stderr)")

            // curl with both headers. Glewlwyd wants its nonce: the first answer is 401 use_dpop_nonce
            // with DPoP-Nonce, and the same request with --nonce then passes.
            func curl(nonce: String?) async throws -> (status: Int, headers: String) {
                var arguments = ["token", "--format", "header", "--url", userinfo]
                if let nonce { arguments += ["--nonce", nonce] }
                let headers = try await CLI.run(arguments, environment: environment)
                #expect(headers.status == 0, "\(headers.stderr)")
                let lines = headers.stdout.split(separator: "\n").map(String.init)
                #expect(lines.count == 2 && lines[0].hasPrefix("Authorization: DPoP ") && lines[1].hasPrefix("DPoP: "))
                let dump = FileManager.default.temporaryDirectory.appendingPathComponent(
                    "moose-dpop-\(UUID().uuidString)")
                let headerFile = dump.appendingPathExtension("headers")
                defer {
                    try? FileManager.default.removeItem(at: dump); try? FileManager.default.removeItem(at: headerFile)
                }
                // The README's recipe: curl -H @<(moose token --format header --url …) reads both lines.
                try headers.stdout.write(to: headerFile, atomically: true, encoding: .utf8)
                let result = try await CLI.run(
                    [
                        "curl", "-s", "-o", "/dev/null", "-D", dump.path, "-w", "%{http_code}", "-H",
                        "@" + headerFile.path,
                        userinfo
                    ], executable: "/usr/bin/curl")
                return (Int(result.stdout) ?? 0, (try? String(contentsOf: dump, encoding: .utf8)) ?? "")
            }
            var answer = try await curl(nonce: nil)
            if answer.status == 401 {
                let line = answer.headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("dpop-nonce:") }
                let nonce = try #require(line, "401 without a DPoP-Nonce: \(answer.headers)")
                answer = try await curl(
                    nonce: String(nonce.dropFirst("dpop-nonce:".count)).trimmingCharacters(in: .whitespaces))
            }
            #expect(answer.status == 200)

            // moose dpop-proof mints the same kind of proof for scripts.
            let proof = try await CLI.run(
                ["dpop-proof", "--method", "post", "--url", issuer + "/token?x=1", "--no-ath"], environment: environment
            )
            #expect(proof.status == 0, "\(proof.stderr)")
            let script = Fixtures.root.replacingOccurrences(
                of: "/Fixtures", with: "/tools/fixtures/verify_dpop_proof.py")
            let verified = runCapturingStdout([
                "python3", script, proof.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "POST",
                issuer + "/token"
            ])
            #expect(verified.0 == 0, "\(verified.1)")

            // moose refresh signs its refresh grant with the session's key.
            let refresh = try await CLI.run(["refresh"], environment: environment, timeout: 60)
            #expect(refresh.status == 0, "\(refresh.stderr)")
            #expect(
                try await CLI.run(["token", "--format", "header", "--url", userinfo], environment: environment).stdout
                    .contains("DPoP: "))
        }
    }
}
