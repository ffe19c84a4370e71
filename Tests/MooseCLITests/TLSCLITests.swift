import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §5: a TLS failure is a TLS error (exit 1, naming `--ca-file` and
/// `SSL_CERT_FILE`), not "transient"; `--ca-file` (and `$SSL_CERT_FILE`) trust a private CA; an issuer
/// mismatch suggests the issuer the document names; an unreachable provider's URL is printed once.
/// Against a real HTTPS server (Python's ssl module) with a certificate from a CA made here by openssl.
@Suite(.serialized)
struct TLSCLITests {
    /// A CA, a certificate for 127.0.0.1 it signed, and an HTTPS server serving `root`.
    struct PrivateCA {
        let folder: URL
        let server: SpawnedServer
        var caFile: String { folder.appendingPathComponent("ca.pem").path }
        var url: String { server.url.absoluteString }

        static func start() async throws -> PrivateCA {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-tls-\(UUID().uuidString)")
            let root = folder.appendingPathComponent("root")
            try FileManager.default.createDirectory(
                at: root.appendingPathComponent(".well-known"), withIntermediateDirectories: true)
            let path = { (name: String) in folder.appendingPathComponent(name).path }
            try Data("subjectAltName=IP:127.0.0.1\n".utf8).write(to: folder.appendingPathComponent("san.ext"))
            for command in [
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                    path("ca.key"),
                    "-out", path("ca.pem"), "-days", "2", "-subj", "/CN=Moose Test CA"
                ],
                [
                    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                    path("server.key"),
                    "-out", path("server.csr"), "-subj", "/CN=127.0.0.1"
                ],
                [
                    "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                    "-CAcreateserial",
                    "-out", path("server.pem"), "-days", "2", "-extfile", path("san.ext")
                ]
            ] {
                let result = await runProcessOffThePool(["/usr/bin/openssl"] + command)
                try #require(result.status == 0, "openssl \(command.joined(separator: " ")): \(result.output)")
            }
            let server = try await SpawnedServer.launch([
                "/usr/bin/python3", "-u", LocalServer.repositoryRoot + "/tools/testserver/tls_static_server.py",
                path("server.pem"), path("server.key"), root.path
            ])
            let base = server.url.absoluteString
            // A discovery document naming another issuer than the URL it is served under.
            let document = """
                {"issuer": "\(base)/realms/moose", "authorization_endpoint": "\(base)/authorize", "token_endpoint": "\(base)/token",
                 "jwks_uri": "\(base)/jwks.json", "response_types_supported": ["code"], "subject_types_supported": ["public"],
                 "id_token_signing_alg_values_supported": ["RS256"]}
                """
            try Data(document.utf8).write(to: root.appendingPathComponent(".well-known/openid-configuration"))
            try Fixtures.data("joserfc/jwks.json").write(to: root.appendingPathComponent("jwks.json"))
            return PrivateCA(folder: folder, server: server)
        }

        func stop() async {
            await server.stop()
            try? FileManager.default.removeItem(at: folder)
        }
    }

    @Test func anUntrustedCertificateIsATLSErrorAndTheCAFileFixesIt() async throws {
        let ca = try await PrivateCA.start()
        let (home, environment) = CLI.home("moose-tls")
        defer { try? FileManager.default.removeItem(at: home) }
        do {
            let login = ["login", "--issuer", ca.url, "--client-id", "moose-cli", "--no-browser", "--timeout", "5"]
            let untrusted = try await CLI.run(login, environment: environment, timeout: 60)
            #expect(
                untrusted.status == 1, "a TLS failure is not 'unreachable' (3): \(untrusted.status) \(untrusted.stderr)"
            )
            #expect(
                untrusted.stderr.contains("TLS") && untrusted.stderr.contains("--ca-file")
                    && untrusted.stderr.contains("SSL_CERT_FILE"),
                "\(untrusted.stderr)")
            #expect(untrusted.stderr.hasSuffix("[tls]\n"), "the code goes last: \(untrusted.stderr)")

            // Trusted through --ca-file, or $SSL_CERT_FILE: TLS passes and the mismatch names the document's issuer.
            for (arguments, extra) in [
                (login + ["--ca-file", ca.caFile], [String: String]()), (login, ["SSL_CERT_FILE": ca.caFile])
            ] {
                let trusted = try await CLI.run(arguments, environment: environment.merging(extra) { $1 }, timeout: 60)
                #expect(trusted.status == 1, "\(trusted.stderr)")
                #expect(!trusted.stderr.contains("TLS"), "\(trusted.stderr)")
                #expect(
                    trusted.stderr.contains("names another issuer")
                        && trusted.stderr.contains("If \(ca.url)/realms/moose is the provider you mean"),
                    "\(trusted.stderr)")
            }

            let missing = try await CLI.run(
                login + ["--ca-file", "/no/such/ca.pem"], environment: environment, timeout: 60)
            #expect(
                missing.status == 2 && missing.stderr.contains("/no/such/ca.pem"), "\(missing.status) \(missing.stderr)"
            )

            // moose inspect --jwks URL: the same TLS error, then verified with --ca-file.
            let root = try #require(
                JSONSerialization.jsonObject(with: Fixtures.data("joserfc/tokens.json")) as? [String: Any])
            let token = try #require((root["tokens"] as? [String: String])?["rs256"])
            let inspect = [
                "inspect", token, "--jwks", ca.url + "/jwks.json", "--now", "1800000000", "--iss",
                "https://id.example.com",
                "--aud", "moose-cli"
            ]
            let refused = try await CLI.run(inspect, environment: environment)
            #expect(
                refused.status == 1 && refused.stderr.contains("TLS") && refused.stderr.contains("--ca-file"),
                "\(refused.stderr)")
            let verified = try await CLI.run(inspect + ["--ca-file", ca.caFile], environment: environment)
            #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        } catch {
            await ca.stop()
            throw error
        }
        await ca.stop()
    }

    @Test func anUnreachableProviderIsExit3WithItsURLOnce() async throws {
        let (home, environment) = CLI.home("moose-unreachable")
        defer { try? FileManager.default.removeItem(at: home) }
        let result = try await CLI.run(
            ["login", "--issuer", "http://127.0.0.1:9", "--client-id", "moose-cli", "--no-browser"],
            environment: environment, timeout: 60)
        #expect(result.status == 3, "\(result.status) \(result.stderr)")
        #expect(
            result.stderr.components(separatedBy: "http://127.0.0.1:9").count == 2, "the URL once: \(result.stderr)")
        #expect(result.stderr.contains("try again") && result.stderr.hasSuffix("[transient]\n"), "\(result.stderr)")
    }
}
