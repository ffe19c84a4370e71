import Foundation
import MooseCrypto
import MooseOAuth
import MooseOAuthSystem
import MooseSQLiteStorage
import MooseSecretStore
import MooseTestSupport
import MooseURLSession
import Testing

/// The library has the workload login the CLI has (issue "One session, whatever made it", §1), at
/// authgent-server with the stand-in CI platform's tokens: a `TokenManager` with a `WorkloadGrant`
/// logs in with a pod's projected token file and renews with a fresh one; and it renews a session
/// that `moose login --workload file:…` made in another process, on the same store.
@Suite(.serialized)
struct WorkloadManagerTests {
    static let issuer = WorkloadPlatform.issuer
    static let audience = WorkloadPlatform.audience
    static func mint() async throws -> String { try await WorkloadPlatform.mint() }

    /// A session `moose login --workload source` made in a store under `home` (the default profile): that
    /// store's storage, the session, and the environment that names the store and its key.
    static func cliWorkloadSession(in home: URL, source: String) async throws -> (
        EncryptedSessionStorage, OAuthSession, [String: String]
    ) {
        let environment = [
            "XDG_DATA_HOME": home.appendingPathComponent("data").path,
            "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
            "MOOSE_STORE_KEY": ""
        ]
        let login = await runProcessOffThePool(
            [
                builtExecutable("moose"), "login", "--workload", source, "--issuer", issuer, "--client-id", "moose-ci",
                "--audience", audience
            ], environment: environment)
        #expect(login.status == 0, "\(login.output)")
        let store = try SecretStore(
            path: home.appendingPathComponent("data/moose/store.sqlite").path,
            masterKey: .keyFile(home.appendingPathComponent("config/moose/store.key").path))
        let shared = EncryptedSessionStorage(store: store)
        return (shared, try #require(try await shared.load("default")).session, environment)
    }

    @Test func aManagerLogsInAsAWorkloadAndRenewsACLIsWorkloadSession() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-workload-manager-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: home) }
        let file = home.appendingPathComponent("token")
        try Data(try await Self.mint().utf8).write(to: file)
        let workload = WorkloadGrant(identity: .file(file.path), audiences: [Self.audience])

        // An app: the same few lines as an interactive login.
        let storage = InMemorySessionStorage()
        let app = TokenManager(
            issuer: Self.issuer, clientID: "moose-ci", storage: storage, transport: URLSessionTransport(), scopes: [],
            workload: workload)
        let user = try await app.login(with: .workload)
        #expect(user.state == .active)
        let first = try await app.accessToken()
        try Data(try await Self.mint().utf8).write(to: file) // the kubelet rotates the file
        let renewed = try await app.coordinator.refreshNow()
        #expect(renewed.value != first.value, "the renewal was not a new grant")

        // A session `moose login --workload` made, renewed by a manager in this process on the same store.
        let (shared, made, environment) = try await Self.cliWorkloadSession(in: home, source: "file:" + file.path)
        try Data(try await Self.mint().utf8).write(to: file)
        let service = TokenManager(
            issuer: Self.issuer, clientID: "moose-ci", storage: shared, transport: URLSessionTransport(), scopes: [],
            workload: workload)
        let fresh = try await service.coordinator.refreshNow()
        #expect(fresh.value != made.tokens.accessToken, "the CLI's workload session was not renewed")
        // …and the CLI serves what the manager committed.
        let token = await runProcessOffThePool([builtExecutable("moose"), "token"], environment: environment)
        #expect(
            token.status == 0 && token.output.trimmingCharacters(in: .whitespacesAndNewlines) == fresh.value,
            "\(token.output)")
    }

    /// MooseOAuth starts no process: a session whose workload source is a command (`moose login
    /// --workload command:…`) is opened by an app only with the runner given (`commands:`,
    /// MooseOAuthSystem's `WorkloadIdentity.command`) — without it, `open` fails with a clear
    /// `invalidConfiguration` (no manager, so nothing to send with); with it, the renewal runs the command again.
    @Test func aCommandSourcedSessionRenewsOnlyWhereCommandsAreGiven() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-workload-command-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: home) }
        let file = home.appendingPathComponent("token")
        try Data(try await Self.mint().utf8).write(to: file)
        let (shared, made, _) = try await Self.cliWorkloadSession(in: home, source: "command:cat " + file.path)

        let refused = await #expect(throws: OAuthError.self) {
            _ = try await TokenManager.open(key: "default", storage: shared, transport: URLSessionTransport())
        }
        #expect(
            refused?.code == OAuthError.invalidConfiguration && refused?.message.contains("commands:") == true
                && refused?.message.contains("cat") == true, "\(String(describing: refused))")

        try Data(try await Self.mint().utf8).write(to: file)
        let app = try await TokenManager.open(
            key: "default", storage: shared, transport: URLSessionTransport(), commands: WorkloadIdentity.command)
        let fresh = try await app.coordinator.refreshNow()
        #expect(fresh.value != made.tokens.accessToken, "the command-sourced session was not renewed")
    }
}
