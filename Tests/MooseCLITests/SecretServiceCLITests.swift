import Foundation
import MooseTestSupport
import Testing

/// Issue "Without a person", §4: `--key-secret-service` keeps the store's master key in a real Secret
/// Service (gnome-keyring-daemon on a private session bus, tools/secretsvc); without one, a clear error
/// and nothing made in its place.
@Suite(.serialized)
struct SecretServiceCLITests {
    @Test func theStoreAndASessionWorkWithTheKeyInTheSecretService() async throws {
        guard let bus = SecretServiceBus.address else {
            Issue.record(Comment(rawValue: SecretServiceBus.unavailable)); return
        }
        var (home, environment) = CLI.home("moose-secretsvc")
        defer { try? FileManager.default.removeItem(at: home) }
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus
        let name = "cli-\(UUID().uuidString.prefix(8))"
        defer { _ = SecretServiceBus.secretTool(["clear", "application", "moose", "key", name]) }
        let key = ["--key-secret-service", name]

        let initialized = try await CLI.run(["store", "init"] + key, environment: environment)
        #expect(initialized.status == 0, "\(initialized.stderr)")
        #expect(
            !FileManager.default.fileExists(atPath: home.appendingPathComponent("config/moose/store.key").path),
            "a key file was made")
        let put = try await CLI.run(
            ["store", "put", "--namespace", "ci", "deploy-key"] + key, stdin: Data("s3cret".utf8),
            environment: environment)
        #expect(put.status == 0, "\(put.stderr)")
        let get = try await CLI.run(["store", "get", "--namespace", "ci", "deploy-key"] + key, environment: environment)
        #expect(get.status == 0 && get.stdout.hasPrefix("s3cret"), "\(get.stderr)")

        // A service's session in that store, and moose token's lean path reading it.
        let login = try await CLI.run(
            [
                "login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-service",
                "--client-secret-env", "MOOSE_TEST_SERVICE_SECRET"
            ] + key,
            environment: environment.merging(["MOOSE_TEST_SERVICE_SECRET": "moose-service-secret"]) { $1 })
        #expect(login.status == 0, "\(login.stderr)")
        let token = try await CLI.run(["token"] + key, environment: environment)
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token.stderr)")
        // Without the option the default key file does not exist: the store does not open.
        let without = try await CLI.run(["store", "get", "--namespace", "ci", "deploy-key"], environment: environment)
        #expect(without.status != 0)
    }

    @Test func withoutASecretServiceTheErrorSaysWhyAndNothingIsMade() async throws {
        var (home, environment) = CLI.home("moose-secretsvc-none")
        defer { try? FileManager.default.removeItem(at: home) }
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=" + home.appendingPathComponent("no-such-bus").path
        let result = try await CLI.run(["store", "init", "--key-secret-service", "nowhere"], environment: environment)
        #expect(result.status == 1 && result.stderr.contains("Secret Service could not"), "\(result.stderr)")
        #expect(
            !FileManager.default.fileExists(atPath: home.appendingPathComponent("data/moose/store.sqlite").path),
            "a store was made")
        #expect(
            !FileManager.default.fileExists(atPath: home.appendingPathComponent("config/moose/store.key").path),
            "a key file was made")
        // The same for any key source that is not there: no empty store is left to read as damaged.
        let unset = try await CLI.run(["store", "init", "--key-env", "MOOSE_NO_SUCH_KEY"], environment: environment)
        #expect(unset.status == 1 && unset.stderr.contains("MOOSE_NO_SUCH_KEY"), "\(unset.stderr)")
        #expect(
            !FileManager.default.fileExists(atPath: home.appendingPathComponent("data/moose/store.sqlite").path),
            "a store was made")
        let both = try await CLI.run(
            ["store", "init", "--key-secret-service", "a", "--key-env", "X"], environment: environment)
        #expect(both.status == 2 && both.stderr.contains("only one of"), "\(both.stderr)")
    }

    @Test func aStoreMovesFromItsKeyFileToTheSecretService() async throws {
        guard let bus = SecretServiceBus.address else {
            Issue.record(Comment(rawValue: SecretServiceBus.unavailable)); return
        }
        var (home, environment) = CLI.home("moose-secretsvc-rotate")
        defer { try? FileManager.default.removeItem(at: home) }
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus
        let name = "rotate-\(UUID().uuidString.prefix(8))"
        defer { _ = SecretServiceBus.secretTool(["clear", "application", "moose", "key", name]) }
        #expect(
            try await CLI.run(
                ["store", "put", "--namespace", "ci", "k"], stdin: Data("v1".utf8), environment: environment
            ).status == 0)
        let rotated = try await CLI.run(["store", "rotate-key", "--to-secret-service", name], environment: environment)
        #expect(rotated.status == 0, "\(rotated.stderr)")
        let get = try await CLI.run(
            ["store", "get", "--namespace", "ci", "k", "--key-secret-service", name], environment: environment)
        #expect(get.status == 0 && get.stdout.hasPrefix("v1"), "\(get.stderr)")
        let old = try await CLI.run(["store", "get", "--namespace", "ci", "k"], environment: environment)
        #expect(old.status != 0, "the old key file still opens the store")
    }
}
