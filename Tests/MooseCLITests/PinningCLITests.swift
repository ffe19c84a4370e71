import Foundation
import MooseHTTP
import MooseOAuth
import MooseOAuthSystem
import MooseSQLiteStorage
@testable import MooseCLI
import MooseTestSupport
import Testing

/// Issue 34 §5: `moose login --pin-public-key` (and a profile's `public_key_pins`) against a local
/// HTTPS provider whose key the test makes: a key that is none of the pins is a TLS error naming the
/// host and the pins (exit 1, one connection, no request), the right pin or a backup lets TLS pass.
@Suite(.serialized)
struct PinningCLITests {
    /// A discovery document naming another issuer, served by the TLS test provider at `base`: reaching
    /// it proves the TLS connection was accepted (discovery then fails on the issuer, not on TLS).
    static func publishDiscovery(base: String, in ca: TLSTestCA) throws {
        let document = """
            {"issuer": "\(base)/realms/moose", "authorization_endpoint": "\(base)/authorize", "token_endpoint": "\(base)/token",
             "jwks_uri": "\(base)/jwks.json", "response_types_supported": ["code"], "subject_types_supported": ["public"],
             "id_token_signing_alg_values_supported": ["RS256"]}
            """
        try Data(document.utf8).write(to: ca.root.appendingPathComponent(".well-known/openid-configuration"))
    }

    @Test func loginRefusesAProviderWhoseKeyIsNotPinned() async throws {
        let ca = try await TLSTestCA.make()
        defer { ca.remove() }
        let key = try await ca.issue("provider"), other = try await ca.issue("other")
        let server = try await ca.serve(key)
        let base = server.url.absoluteString
        try Self.publishDiscovery(base: base, in: ca)
        let (home, environment) = CLI.home("moose-pin")
        defer { try? FileManager.default.removeItem(at: home) }
        do {
            let login = [
                "login", "--issuer", base, "--client-id", "moose-cli", "--no-browser", "--timeout", "5", "--ca-file",
                ca.caFile
            ]

            let refused = try await CLI.run(
                login + ["--pin-public-key", other.pin], environment: environment, timeout: 60)
            #expect(refused.status == 1, "\(refused.status) \(refused.stderr)")
            #expect(
                refused.stderr.contains(
                    "the server's public key for 127.0.0.1 is not one of the pinned keys (pins: \(other.pin)); "
                        + "the connection was refused"), "\(refused.stderr)")
            #expect(
                refused.stderr.hasSuffix("[tls]\n") && !refused.stderr.contains("--ca-file"),
                "no private-CA hint: \(refused.stderr)")
            let counts = try server.counts()
            #expect(counts.connections == 1 && counts.requests == 0, "refused at the handshake, not retried: \(counts)")

            // The right pin after a wrong one (a backup), and the config file's public_key_pins: TLS passes.
            let config = home.appendingPathComponent("config/moose")
            try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
            try Data("[profiles.default]\npublic_key_pins = [\"\(other.pin)\", \"\(key.pin)\"]\n".utf8)
                .write(to: config.appendingPathComponent("config.toml"))
            for arguments in [login + ["--pin-public-key", other.pin, "--pin-public-key", key.pin], login] {
                let passed = try await CLI.run(arguments, environment: environment, timeout: 60)
                #expect(
                    passed.status == 1 && passed.stderr.contains("names another issuer")
                        && !passed.stderr.contains("pinned"),
                    "\(passed.stderr)")
            }
            // The config's pins, with the wrong one alone: refused again.
            try Data("[profiles.default]\npublic_key_pins = [\"\(other.pin)\"]\n".utf8).write(
                to: config.appendingPathComponent("config.toml"))
            let fromConfig = try await CLI.run(login, environment: environment, timeout: 60)
            #expect(
                fromConfig.status == 1 && fromConfig.stderr.contains("is not one of the pinned keys"),
                "\(fromConfig.stderr)")

            let unpinnable = try await CLI.run(
                ["login", "--resource", base + "/api", "--pin-public-key", key.pin], environment: environment)
            #expect(
                unpinnable.status == 2 && unpinnable.stderr.contains("give --issuer"),
                "\(unpinnable.status) \(unpinnable.stderr)")

            // Plain http has no server key to pin: refused, not kept as a pin that never applies.
            let plain = try await CLI.run(
                [
                    "login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli", "--pin-public-key",
                    key.pin
                ],
                environment: environment)
            #expect(
                plain.status == 2 && plain.stderr.contains("is plain http, which has none"),
                "\(plain.status) \(plain.stderr)")

            let malformed = try await CLI.run(
                login + ["--pin-public-key", "sha256//tooShort"], environment: environment, timeout: 60)
            #expect(
                malformed.status == 2 && malformed.stderr.contains("--pin-public-key")
                    && malformed.stderr.contains("openssl"),
                "\(malformed.status) \(malformed.stderr)")
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    /// Issue 40 §2: a pinned session is renewed pinned wherever it is renewed. The session `moose login
    /// --pin-public-key` writes (its plan with the CA file and the pin, sealed in the CLI's store) is
    /// opened by an app with `TokenManager.open(…, transport: CurlTransport(…))` — a transport that
    /// knows nothing of the pin — and its refresh refuses the server whose key is not the pinned one
    /// (it went there unpinned before: discovery was reached). An app transport that cannot pin is
    /// refused up front with `invalidConfiguration`, never used unpinned.
    @Test func aPinnedSessionOpenedByAnAppIsRenewedPinned() async throws {
        let ca = try await TLSTestCA.make()
        defer { ca.remove() }
        let key = try await ca.issue("provider"), other = try await ca.issue("other")
        let server = try await ca.serve(key)
        defer { Task { await server.stop() } }
        let base = server.url.absoluteString
        try Self.publishDiscovery(base: base, in: ca)
        let (home, environment) = CLI.home("moose-pin-app")
        defer { try? FileManager.default.removeItem(at: home) }
        let initialized = try await CLI.run(["store", "init"], environment: environment)
        #expect(initialized.status == 0, "\(initialized.stderr)")
        let storage = try CrossSurfaceSessionTests.storage(home: home)

        func store(pin: String) throws {
            var plan = SessionPlan(name: "default", issuer: base, clientID: "moose-cli", scopes: ["openid"])
            plan.provider.caFile = ca.caFile
            plan.provider.publicKeyPins = try PublicKeyPins.canonical([pin])
            let tokens = TokenSet(
                accessToken: "expired", refreshToken: "refresh-me", expiresAt: Date().addingTimeInterval(-60))
            _ = try storage.replaceNow(
                OAuthSession(issuer: base, clientID: "moose-cli", tokens: tokens, attributes: plan.stored()),
                key: "default")
        }

        // The app's transport trusts the CA, knows no pin: the session's pin (another key) refuses the server.
        try store(pin: other.pin)
        let app = try await TokenManager.open(
            key: "default", storage: storage, transport: CurlTransport(caFile: ca.caFile))
        await #expect {
            _ = try await app.accessToken()
        } throws: { error in
            let error = error as? OAuthError
            return error?.code == OAuthError.tls && error?.message.contains("is not one of the pinned keys") == true
        }
        #expect(try server.counts().requests == 0, "nothing was sent over the unpinned connection")
        // `moose token` on the same session says the same.
        let cli = try await CLI.run(["token"], environment: environment, timeout: 60)
        #expect(cli.status == 1 && cli.stderr.contains("is not one of the pinned keys"), "\(cli.stderr)")

        // An app's own plan for the same key that names no pins does not renew the pinned session.
        let unpinnedPlan = SessionPlan(name: "default", issuer: base, clientID: "moose-cli", scopes: ["openid"])
        let appPlan = try TokenManager(
            plan: unpinnedPlan, storage: storage, transport: CurlTransport(caFile: ca.caFile))
        await #expect {
            _ = try await appPlan.accessToken()
        } throws: { error in
            let error = error as? OAuthError
            return error?.code == OAuthError.invalidConfiguration && error?.message.contains("public-key pins") == true
        }
        #expect(try server.counts().requests == 0, "nothing was sent for the app's unpinned plan")

        // A transport that cannot apply pins is refused before anything is sent.
        struct Wrapped: HTTPTransport {
            let inner = CurlTransport()
            func send(_ request: APIRequest) async throws -> APIResponse { try await inner.send(request) }
        }
        await #expect {
            _ = try await TokenManager.open(key: "default", storage: storage, transport: Wrapped())
        } throws: { error in
            let error = error as? OAuthError
            return error?.code == OAuthError.invalidConfiguration
                && error?.message.contains("pins its provider's public key") == true
                && error?.message.contains("TrustConfigurableTransport") == true
        }

        // The control: with the provider's own key pinned, the same refresh passes TLS and reaches
        // discovery (whose document names another issuer) — the refusal above was the pin's.
        try store(pin: key.pin)
        let pinned = try await TokenManager.open(key: "default", storage: storage, transport: CurlTransport())
        await #expect {
            _ = try await pinned.accessToken()
        } throws: { error in
            (error as? OAuthError)?.code != OAuthError.tls
        }
        #expect(try server.counts().requests > 0)
    }

    @Test func aProfileKeepsItsPinsForTheIssuersHost() throws {
        let pin = "sha256//" + Data(repeating: 7, count: 32).base64EncodedString()
        var profile = Profile(name: "p", issuer: "https://ID.example.com/realms/x", clientID: "c", scopes: [])
        #expect(try profile.trust() == nil, "no CA file and no pins: the transport as given")
        profile.provider.publicKeyPins =
            try CLITransport.pins([String(pin.dropFirst(8))]) ?? []
        #expect(profile.provider.publicKeyPins == [pin], "kept canonically")
        let stored = try #require(profile.stored()[Profile.attribute])
        let restored = try JSONDecoder().decode(Profile.self, from: Data(stored.utf8))
        #expect(restored.provider.publicKeyPins == [pin])
        let transport = try #require(try restored.transport(over: CurlTransport()) as? CurlTransport)
        #expect(transport.pins.pins(for: "id.example.com") == [pin] && transport.pins.hosts == ["id.example.com"])
        #expect(try CLITransport.pins([]) == nil)
        var config = ProfileFile()
        var settings = ProfileFile.ProfileSettings()
        settings.publicKeyPins = [pin, pin]
        config.profiles["p"] = settings
        #expect(try ProfileFile(parsing: Array(config.serialized.utf8)) == config)
    }
}
