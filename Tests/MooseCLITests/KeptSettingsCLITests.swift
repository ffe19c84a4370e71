import Foundation
import MooseTestSupport
import Testing

/// Issue 42 §1: a lost key is not a lost setup. `moose login` keeps the profile's settings (no secret)
/// in a plain file beside the config; a store whose key is gone or is another key says the way out —
/// `moose store reset`, which this test runs exactly as printed — and a plain `moose login --profile`
/// after it logs in with the kept settings, at the real provider.
struct KeptSettingsCLITests {
    /// The reset command a failure printed: the words after "start over with " up to " (it moves".
    static func printedReset(_ stderr: String) -> [String]? {
        guard let start = stderr.range(of: "start over with "),
            let end = stderr.range(of: " (it moves", range: start.upperBound..<stderr.endIndex)
        else { return nil }
        let words = stderr[start.upperBound..<end.lowerBound].split(separator: " ").map(String.init)
        guard words.first == "moose" else { return nil }
        return Array(words.dropFirst())
    }

    @Test func aLostOrReplacedKeyHasAWayOutThatKeepsTheSettings() async throws {
        let (home, environment) = CLI.home("moose-kept-settings")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let secretFile = home.appendingPathComponent("secret")
        try Data("moose-service-secret\n".utf8).write(to: secretFile)
        let first = try await CLI.run(
            [
                "login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-service", "--client-secret-file", secretFile.path, "--scope", "read", "--profile", "ci"
            ], environment: environment)
        #expect(first.status == 0, "\(first.stdout) \(first.stderr)")

        // The settings are in a plain file beside the config: issuer, client, the secret's file — not the secret.
        let kept = home.appendingPathComponent("config/moose/profiles.json")
        let text = try String(contentsOf: kept, encoding: .utf8)
        #expect(
            text.contains(TestIdentityProvider.issuer.replacingOccurrences(of: "/", with: "\\/"))
                || text.contains(TestIdentityProvider.issuer))
        #expect(text.contains("moose-service") && text.contains(secretFile.lastPathComponent))
        #expect(!text.contains("moose-service-secret\\n") && !text.contains("accessToken"), "no secret, no token")
        #expect(try FileManager.default.attributesOfItem(atPath: kept.path)[.posixPermissions] as? Int == 0o600)

        // The key file is lost: the failure names the way out.
        let keyFile = home.appendingPathComponent("config/moose/store.key")
        try FileManager.default.removeItem(at: keyFile)
        let lost = try await CLI.run(["token", "--profile", "ci"], environment: environment)
        #expect(lost.status == 1 && lost.stderr.contains("[keyUnavailable]"), "\(lost.stderr)")
        let reset = try #require(Self.printedReset(lost.stderr), "no way out printed: \(lost.stderr)")

        // Run as printed: the store is moved aside (kept), a new one made, the settings named.
        let didReset = try await CLI.run(reset, environment: environment)
        #expect(didReset.status == 0, "\(didReset.stderr)")
        #expect(
            didReset.stdout.contains("moved the store aside to")
                && didReset.stdout.contains("moose login --profile ci"),
            "\(didReset.stdout)")
        let data = home.appendingPathComponent("data/moose")
        let entries = try FileManager.default.contentsOfDirectory(atPath: data.path)
        #expect(
            entries.contains("store.sqlite") && entries.contains { $0.hasPrefix("store.sqlite.broken-") }, "\(entries)")

        // A plain login of the profile logs in as before: a service, by client credentials, with its secret file.
        let again = try await CLI.run(["login", "--profile", "ci", "--timeout", "5"], environment: environment)
        #expect(
            again.status == 0 && again.stdout.contains("as client moose-service"), "\(again.stdout) \(again.stderr)")
        let token = try await CLI.run(["token", "--profile", "ci"], environment: environment)
        #expect(token.status == 0, "\(token.stderr)")

        // Another 32-byte key in the key file's place: wrongKey, the same way out, and the store untouched.
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: keyFile)
        let wrong = try await CLI.run(["status", "--profile", "ci"], environment: environment)
        #expect(
            wrong.status == 1 && wrong.stderr.contains("[wrongKey]") && Self.printedReset(wrong.stderr) != nil,
            "\(wrong.stderr)")
        // The profile is still listed, and shown, while the store cannot be opened.
        let list = try await CLI.run(["profile", "list"], environment: environment)
        #expect(list.stdout.contains("ci ("), "\(list.stdout) \(list.stderr)")

        // A store that is damaged, not keyless, is not moved: its own words say how to start over.
        let store = home.appendingPathComponent("data/moose/store.sqlite")
        let before = try Data(contentsOf: store)
        try Data((0..<4096).map { _ in UInt8.random(in: 0...255) }).write(to: store)
        let damaged = try await CLI.run(["store", "reset"], environment: environment)
        #expect(damaged.status == 1 && damaged.stderr.contains("left as it is"), "\(damaged.stderr)")
        #expect(FileManager.default.fileExists(atPath: store.path))
        try before.write(to: store)

        // A store that opens has nothing to reset.
        try FileManager.default.removeItem(at: keyFile)
        _ = try await CLI.run(["store", "reset"], environment: environment)
        let nothing = try await CLI.run(["store", "reset"], environment: environment)
        #expect(
            nothing.status == 0 && nothing.stdout.contains("nothing to reset"), "\(nothing.stdout) \(nothing.stderr)")
    }

    /// Issue 42 §2: a profile the config file describes whole — a service, by its grant and secret
    /// file — needs no flag: the first-contact hints name the profile alone, and a plain login is a
    /// service login (not a browser login waiting 300 s).
    @Test func theConfigFileAloneLogsAServiceIn() async throws {
        let (home, environment) = CLI.home("moose-config-service")
        defer { try? FileManager.default.removeItem(at: home) }
        let config = home.appendingPathComponent("config/moose")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        let secretFile = home.appendingPathComponent("secret")
        try Data("moose-service-secret\n".utf8).write(to: secretFile)
        let file = """
            [profiles.svc]
            issuer = "\(TestIdentityProvider.issuer)"
            client_id = "moose-service"
            grant = "client_credentials"
            client_secret_file = "\(secretFile.path)"
            scopes = ["read"]
            """
        try Data(file.utf8).write(to: config.appendingPathComponent("config.toml"))

        for command in [["token", "--profile", "svc"], ["status", "--profile", "svc"]] {
            let first = try await CLI.run(command, environment: environment)
            #expect(first.status == 1, "\(first.stderr)")
            #expect(
                first.stderr.contains("run moose login --profile svc") && !first.stderr.contains("--issuer URL"),
                "\(command): \(first.stderr)")
        }
        let login = try await CLI.run(["login", "--profile", "svc", "--timeout", "5"], environment: environment)
        #expect(
            login.status == 0 && login.stdout.contains("as client moose-service")
                && login.stdout.contains("scopes: read"),
            "\(login.stdout) \(login.stderr)")
        let token = try await CLI.run(["token", "--profile", "svc"], environment: environment)
        #expect(token.status == 0, "\(token.stderr)")
    }
}
