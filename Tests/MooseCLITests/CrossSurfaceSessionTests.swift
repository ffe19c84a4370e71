import Foundation
import MooseHTTP
import MooseOAuth
import MooseOAuthSystem
import MooseSealing
import MooseSecretStore
import MooseSQLiteStorage
import MooseTestSupport
import Testing

/// Issue "One session, whatever made it", §1: how a session renews is stored with it (its
/// `SessionPlan`), so a session `moose login` made is renewed by an app's `TokenManager.open` in
/// another process (this test process), and an app's session by `moose token` — at the real servers:
/// authgent (a workload's token exchange), Glewlwyd (`private_key_jwt`), django-oauth-toolkit (a
/// client secret in a file).
@Suite(.serialized)
struct CrossSurfaceSessionTests {
    /// The CLI's store under `home`, opened by the library as an app would: where `moose` keeps it by
    /// default (`EncryptedSessionStorage.moose`), in the environment `CLI.home` gave `moose`.
    static func storage(home: URL) throws -> EncryptedSessionStorage {
        try EncryptedSessionStorage.moose(environment: [
            "XDG_DATA_HOME": home.appendingPathComponent("data").path,
            "XDG_CONFIG_HOME": home.appendingPathComponent("config").path, "MOOSE_STORE_KEY": ""
        ])
    }

    @Test func aWorkloadSessionMadeByMooseLoginIsRenewedByAnAppsTokenManager() async throws {
        let (home, environment) = CLI.home("moose-plan-workload")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let file = home.appendingPathComponent("token")
        try Data(try await WorkloadPlatform.mint().utf8).write(to: file)
        let login = try await CLI.run(
            [
                "login", "--workload", "file:" + file.path, "--workload-grant", "jwt-bearer",
                "--issuer", WorkloadPlatform.issuer, "--client-id", "moose-ci"
            ], environment: environment, timeout: 60)
        #expect(login.status == 0, "\(login.stdout) \(login.stderr)")
        let first = try await CLI.run(["token"], environment: environment)
        #expect(first.status == 0, "\(first.stderr)")

        // The pod's file is rotated and the token expires; the app knows only the store and the key.
        try Data(try await WorkloadPlatform.mint().utf8).write(to: file)
        try await TokenCLITests.expireStoredSession(environment: environment, requiringRefreshToken: false)
        let manager = try await TokenManager.open(
            key: "default", storage: try Self.storage(home: home), transport: CurlTransport())
        #expect(manager.plan.grant.workload?.source == "file:" + file.path)
        let renewed = try await manager.accessToken()
        #expect(
            !renewed.value.utf8.elementsEqual(first.stdout.trimmingCharacters(in: .whitespacesAndNewlines).utf8),
            "the app handed out the expired token")
        // The app's renewal is the session's: `moose token` now answers with it, without a new exchange.
        let after = try await CLI.run(["token"], environment: environment)
        #expect(
            after.status == 0 && after.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == renewed.value,
            "\(after.stderr)")
    }

    @Test func aPrivateKeyServiceSessionMadeByMooseLoginIsRenewedByAnApp() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let (home, environment) = CLI.home("moose-plan-pkjwt")
            defer { try? FileManager.default.removeItem(at: home) }
            let login = try await CLI.run(
                [
                    "login", "--client-credentials", "--issuer", issuer, "--client-id", "moose-pkjwt",
                    "--private-key", Fixtures.root + "/glewlwyd/pkjwt-es256.pem", "--key-id", "moose-pkjwt-1",
                    "--scope", "api.read"
                ], environment: environment)
            #expect(login.status == 0, "\(login.stdout) \(login.stderr)")
            try await TokenCLITests.expireStoredSession(environment: environment, requiringRefreshToken: false)
            let before = try #require(try await CLI.storedSession(environment: environment)["tokens"] as? [String: Any])
            let manager = try await TokenManager.open(
                key: "default", storage: try Self.storage(home: home), transport: CurlTransport())
            // The key is referenced, not copied: the plan names the file and the kid.
            guard case .privateKey(let keyFile, let keyID) = manager.plan.client.credential else {
                Issue.record("not a private key: \(manager.plan.client.credential)")
                return
            }
            #expect(keyFile.hasSuffix("pkjwt-es256.pem") && keyID == "moose-pkjwt-1")
            let renewed = try await manager.accessToken()
            #expect(renewed.value != before["accessToken"] as? String, "no new grant: the expired token came back")
            let status = try await CLI.run(["status", "--json"], environment: environment)
            #expect(status.status == 0 && status.stdout.contains("moose-pkjwt"), "\(status.stdout) \(status.stderr)")
        }
    }

    @Test func anAppsServiceSessionIsRenewedByMooseToken() async throws {
        let (home, environment) = CLI.home("moose-plan-app")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(try await CLI.run(["store", "init"], environment: environment).status == 0)
        let secretFile = home.appendingPathComponent("secret")
        try Data("moose-service-secret\n".utf8).write(to: secretFile)
        let plan = SessionPlan(
            name: "default", issuer: TestIdentityProvider.issuer, clientID: "moose-service", scopes: ["read"],
            grant: .clientCredentials, credential: .secretFile(secretFile.path, sending: .basic))
        let manager = try TokenManager(plan: plan, storage: try Self.storage(home: home), transport: CurlTransport())
        try await manager.login(with: .clientCredentials)
        let appToken = try await manager.accessToken()

        try await TokenCLITests.expireStoredSession(environment: environment, requiringRefreshToken: false)
        let token = try await CLI.run(["token"], environment: environment)
        #expect(token.status == 0, "\(token.stderr)")
        let renewed = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!renewed.isEmpty && renewed != appToken.value, "moose token did not renew the app's session")
        let status = try await CLI.run(["status", "--json"], environment: environment)
        #expect(status.stdout.contains("moose-service"), "\(status.stdout)")

        // An app whose client secret is its own (a value, not a reference): the session says so, and
        // another process cannot renew it — it is told why instead of being sent without credentials.
        let heldByApp = TokenManager(
            issuer: TestIdentityProvider.issuer, clientID: "moose-service",
            authentication: .clientSecretBasic("moose-service-secret"), storage: try Self.storage(home: home),
            key: "held", transport: CurlTransport(), scopes: ["read"])
        try await heldByApp.login(with: .clientCredentials)
        await #expect(throws: OAuthError.self) {
            _ = try await TokenManager.open(
                key: "held", storage: try Self.storage(home: home), transport: CurlTransport())
        }
    }

    /// The config file's profile is the app's plan too (`ProfileFile`): an app that logs in from
    /// `[profiles.svc]` makes the session `moose token --profile svc` hands out, at the real provider.
    @Test func aProfileInTheConfigFileIsAnAppsPlan() async throws {
        let (home, environment) = CLI.home("moose-profile-file")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(try await CLI.run(["store", "init"], environment: environment).status == 0)
        let secretFile = home.appendingPathComponent("secret")
        try Data("moose-service-secret\n".utf8).write(to: secretFile)
        let path = try #require(ProfileFile.defaultPath(environment: environment))
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let config = """
            [profiles.svc]
            issuer = "\(TestIdentityProvider.issuer)"
            client_id = "moose-service"
            scopes = ["read"]
            client_secret_file = "\(secretFile.path)"

            """
        try Data(config.utf8).write(to: URL(fileURLWithPath: path))
        var plan = try #require(try ProfileFile.load(path: path).plan(for: "svc"))
        #expect(plan.name == "svc" && plan.clientID == "moose-service" && plan.scopes == ["read"])
        plan.grant = .clientCredentials
        let manager = try TokenManager(plan: plan, storage: try Self.storage(home: home), transport: CurlTransport())
        try await manager.login(with: .clientCredentials)
        let appToken = try await manager.accessToken()
        let token = try await CLI.run(["token", "--profile", "svc"], environment: environment)
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == appToken.value)
    }

    /// A session written by Moose 0.3 (its CLI's profile under the old attribute) opens as plan version
    /// 0 and is written back as the current version.
    @Test func aSessionWrittenByMoose03OpensWithItsPlan() throws {
        let legacy =
            #"{"name":"x","issuer":"https://id.example","clientID":"svc","scopes":["read"],"grant":"client_credentials","#
            + #""clientSecretFile":"/run/secret","endpoints":{},"audience":"https://api.example"}"#
        let session = OAuthSession(
            issuer: "https://id.example", clientID: "svc", tokens: TokenSet(accessToken: "a"),
            attributes: [OAuthSession.legacyProfileAttribute: legacy])
        let plan = try #require(SessionPlan.stored(in: session, key: "work"))
        #expect(plan.version == 0 && plan.name == "work" && plan.grant == .clientCredentials)
        #expect(
            plan.client.credential == .secretFile("/run/secret", sending: .basic)
                && plan.audience == "https://api.example"
        )
        let written = plan.stored(in: session.attributes)
        #expect(written[OAuthSession.legacyProfileAttribute] == nil)
        let again = try #require(
            SessionPlan.stored(
                in: OAuthSession(
                    issuer: "https://id.example", clientID: "svc",
                    tokens: TokenSet(accessToken: "a"), attributes: written), key: "work"))
        #expect(again.version == SessionPlan.currentVersion && again.client.credential == plan.client.credential)
    }
}
