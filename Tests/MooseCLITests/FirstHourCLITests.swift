import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §2 and §3: what a person at the keyboard meets with a config file, a
/// fresh machine, a mistyped command line — each as the CLI is run from a shell.
@Suite(.serialized)
struct FirstHourCLITests {
    /// A fresh home whose config file (under its XDG_CONFIG_HOME) says `contents`.
    static func home(_ label: String, config contents: String?) throws -> (URL, [String: String]) {
        let (home, environment) = CLI.home(label)
        if let contents {
            let folder = home.appendingPathComponent("config/moose")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(contents.utf8).write(to: folder.appendingPathComponent("config.toml"))
        }
        return (home, environment)
    }

    @Test func everySessionCommandTakesTheConfigFilesDefaultProfileAndItsStore() async throws {
        let (home, _) = CLI.home("moose-config")
        let store = home.appendingPathComponent("work-store.sqlite").path
        let (_, environment) = try Self.home(
            home.lastPathComponent,
            config: """
                default = "work"

                [profiles.work]
                issuer = "\(TestIdentityProvider.issuer)"
                client_id = "moose-cli"
                scopes = ["openid", "profile"]
                store = "\(store)"
                """)
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(["login"], environment: environment, timeout: 60)
        #expect(login.status == 0 && login.stdout.contains("(profile work)"), "\(login.stdout) \(login.stderr)")
        #expect(FileManager.default.fileExists(atPath: store), "the profile's store was not used")
        let defaultStore = home.appendingPathComponent("data/moose/store.sqlite").path
        #expect(!FileManager.default.fileExists(atPath: defaultStore), "a store was created at the default place")

        let status = try await CLI.run(["status", "--json"], environment: environment)
        #expect(status.status == 0 && status.stdout.contains("\"work\""), "\(status.stdout) \(status.stderr)")
        let sessions = try #require(JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
        #expect(
            sessions.first?["scopes"] as? [String] == ["openid", "profile"],
            "the config file's scopes were not asked for: \(status.stdout)")
        let token = try await CLI.run(["token"], environment: environment)
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token.stderr)")
        let refresh = try await CLI.run(["refresh"], environment: environment)
        #expect(refresh.status == 0 && refresh.stdout.contains("profile work"), "\(refresh.stdout) \(refresh.stderr)")
        let proof = try await CLI.run(["dpop-proof", "--url", "https://api.example.com/"], environment: environment)
        #expect(proof.stderr.contains("no DPoP key"), "dpop-proof read the profile's session: \(proof.stderr)")
        let logout = try await CLI.run(["logout"], environment: environment)
        #expect(logout.stdout.contains("Logged out of profile work"), "\(logout.stdout) \(logout.stderr)")
    }

    @Test func aConfigFileThatDoesNotParseIsAnErrorForEveryCommand() async throws {
        let (home, environment) = try Self.home(
            "moose-bad-config", config: "default = \"work\"\n[profiles.work]\nissuer = https://no-quotes\n")
        defer { try? FileManager.default.removeItem(at: home) }
        for arguments in [
            ["login"], ["status"], ["token"], ["refresh"], ["logout"], ["dpop-proof", "--url", "https://a.example/"],
            ["profile", "show"], ["profile", "use", "work"]
        ] {
            let result = try await CLI.run(arguments, environment: environment)
            #expect(result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
            #expect(
                result.stderr.contains("config.toml") && result.stderr.contains("line 3"),
                "\(arguments): \(result.stderr)")
        }
    }

    @Test func profileUseRefusesAProfileThatDoesNotExistAndShowPrintsTheRealDefaultScopes() async throws {
        let (home, environment) = try Self.home(
            "moose-profiles",
            config: """
                [profiles.work]
                issuer = "https://id.example.com"
                client_id = "app"
                """)
        defer { try? FileManager.default.removeItem(at: home) }
        let configFile = home.appendingPathComponent("config/moose/config.toml")
        let before = try Data(contentsOf: configFile)
        let use = try await CLI.run(["profile", "use", "nosuch"], environment: environment)
        #expect(
            use.status == 2 && use.stderr.contains("no profile nosuch") && use.stderr.contains("work"), "\(use.stderr)")
        #expect(try Data(contentsOf: configFile) == before, "the config file was written")
        let show = try await CLI.run(["profile", "show", "work"], environment: environment)
        #expect(
            show.status == 0 && show.stdout.contains("\"scopes\":[\"openid\",\"profile\",\"email\"]"),
            "\(show.stdout) \(show.stderr)")
        let good = try await CLI.run(["profile", "use", "work"], environment: environment)
        #expect(good.status == 0, "\(good.stderr)")
    }

    /// A config file `moose profile use` cannot write is a fault of the file system (exit 1, the file
    /// named and left as it was), not a usage error (exit 2, as it was): nothing on the command line
    /// is wrong. The file's name is as long as a name may be, so its temporary sibling cannot be made —
    /// a write that fails even for root, who may write any folder.
    @Test func profileUseThatCannotWriteTheConfigIsAFileSystemFault() async throws {
        var (home, environment) = CLI.home("moose-profile-unwritable")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let config = home.appendingPathComponent(String(repeating: "c", count: 250) + ".toml")
        let text = "[profiles.work]\nissuer = \"https://id.example.com\"\nclient_id = \"app\"\n"
        try Data(text.utf8).write(to: config)
        environment["MOOSE_CONFIG"] = config.path
        let use = try await CLI.run(["profile", "use", "work"], environment: environment)
        #expect(
            use.status == 1 && use.stderr.contains("cannot write") && use.stderr.contains("[fileSystem]"),
            "\(use.status) \(use.stderr)")
        #expect(try String(contentsOf: config, encoding: .utf8) == text, "the config file was changed")
    }

    /// `moose profile use` changes only the `default` line: the config's comments, order and mode stay,
    /// and a config that is a link (kept in a dotfiles repository) stays a link to the file it edits.
    @Test func profileUseKeepsTheFileAPersonWrote() async throws {
        let original = """
            # work and play
            [profiles.work]   # the office
            issuer = "https://id.example.com"
            client_id = "app"

            [profiles.play]
            client_id = "fun"
            issuer = "https://id.example.org"

            """
        let (home, environment) = try Self.home("moose-profile-use", config: original)
        defer { try? FileManager.default.removeItem(at: home) }
        let link = home.appendingPathComponent("config/moose/config.toml")
        let dotfiles = home.appendingPathComponent("dotfiles")
        try FileManager.default.createDirectory(at: dotfiles, withIntermediateDirectories: true)
        let file = dotfiles.appendingPathComponent("moose.toml")
        try FileManager.default.moveItem(at: link, to: file)
        // A relative link, as dotfiles managers make them.
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "../../dotfiles/moose.toml")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)

        let work = try await CLI.run(["profile", "use", "work"], environment: environment)
        #expect(work.status == 0, "\(work.stderr)")
        #expect(try String(contentsOf: file, encoding: .utf8) == "default = \"work\"\n\n" + original)
        let play = try await CLI.run(["profile", "use", "play"], environment: environment)
        #expect(play.status == 0, "\(play.stderr)")
        #expect(try String(contentsOf: file, encoding: .utf8) == "default = \"play\"\n\n" + original)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == "../../dotfiles/moose.toml")
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let status = try await CLI.run(["profile", "list"], environment: environment)
        #expect(status.stdout.contains("* play"), "\(status.stdout)")
    }

    @Test func withoutHOMENothingLandsInTheCurrentDirectory() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-nohome-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for arguments in [
            ["token"], ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"], ["store", "init"]
        ] {
            let result = try await CLI.run(
                [
                    "env", "-u", "HOME", "-u", "XDG_DATA_HOME", "-u", "XDG_CONFIG_HOME", "-u", "MOOSE_STORE",
                    "-u", "MOOSE_CONFIG", "-C", folder.path, CLI.binary
                ] + arguments,
                environment: ["BROWSER": "/bin/false"], executable: "/usr/bin/env")
            #expect(
                result.status == 2 && result.stderr.contains("HOME is not set"),
                "\(arguments): \(result.status) \(result.stderr)")
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty,
            "files appeared in the current directory")

        // The way out the message gives works as given: the store and key named, no config file needed.
        let places = FileManager.default.temporaryDirectory.appendingPathComponent("moose-nohome-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: places) }
        let named = ["--store", places.path + "/store.sqlite", "--key-file", places.path + "/store.key"]
        for arguments in [
            [
                "login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-service", "--client-secret-env", "MOOSE_TEST_SECRET"
            ], ["status"], ["token"]
        ] {
            let result = try await CLI.run(
                [
                    "env", "-u", "HOME", "-u", "XDG_DATA_HOME", "-u", "XDG_CONFIG_HOME", "-u", "MOOSE_STORE",
                    "-u", "MOOSE_CONFIG", "-C", folder.path, "MOOSE_TEST_SECRET=moose-service-secret", CLI.binary
                ] + arguments + named, executable: "/usr/bin/env")
            #expect(result.status == 0 && result.stderr.isEmpty, "\(arguments): \(result.status) \(result.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    @Test func aUsageErrorCreatesNothingAndFirstContactSaysHowToLogIn() async throws {
        let (home, environment) = try Self.home("moose-first-contact", config: nil)
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(["login"], environment: environment)
        #expect(login.status == 2 && login.stderr.contains("--issuer"), "\(login.stderr)")
        let badIssuer = try await CLI.run(
            ["login", "--issuer", "id.example.com", "--client-id", "app"], environment: environment)
        #expect(badIssuer.status == 2 && badIssuer.stderr.contains("not an absolute https URL"), "\(badIssuer.stderr)")
        #expect(!FileManager.default.fileExists(atPath: home.path), "a usage error created \(home.path)")
        for arguments in [["token"], ["status"], ["refresh"], ["logout"]] {
            let result = try await CLI.run(arguments, environment: environment)
            #expect(result.status == 1, "\(arguments): \(result.status)")
            #expect(
                result.stderr.contains("not logged in")
                    && result.stderr.contains("moose login --issuer URL --client-id ID"),
                "\(arguments): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: home.path), "a first command created \(home.path)")
    }
}

/// §3: one damaged session row locks nobody out: logout wipes it (saying nothing was revoked), and
/// a login of that profile replaces it.
@Suite(.serialized)
struct DamagedSessionCLITests {
    @Test func logoutWipesADamagedRowAndLoginReplacesIt() async throws {
        let (home, environment) = try await CLI.logIn("moose-damaged")
        defer { try? FileManager.default.removeItem(at: home) }
        let put = try await CLI.run(
            ["store", "put", "default", "--namespace", "moose.session"], stdin: Data("{not a session".utf8),
            environment: environment)
        #expect(put.status == 0, "\(put.stderr)")
        let token = try await CLI.run(["token"], environment: environment)
        #expect(token.status != 0, "a damaged row gave a token")
        let login = try await CLI.run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"],
            environment: environment, timeout: 60)
        #expect(login.status == 0, "a damaged row blocked a new login: \(login.stderr)")
        #expect(try await CLI.run(["token"], environment: environment).status == 0)
        _ = try await CLI.run(
            ["store", "put", "default", "--namespace", "moose.session"], stdin: Data("{not a session".utf8),
            environment: environment)
        let logout = try await CLI.run(["logout"], environment: environment)
        #expect(
            logout.status == 0 && logout.stdout.contains("local session wiped")
                && logout.stdout.contains("nothing was revoked"),
            "\(logout.stdout) \(logout.stderr)")
        let status = try await CLI.run(["status"], environment: environment)
        #expect(status.stdout.contains("no sessions"), "\(status.stdout) \(status.stderr)")
    }
}
