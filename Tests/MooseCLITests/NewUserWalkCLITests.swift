import Foundation
import MooseTestSupport
import Testing

/// A new user's walk: the messages a person meets on the first day, each pointing at the next step,
/// driven through the real `moose` binary as that person would.
struct NewUserWalkCLITests {
    /// `moose git-credential get` for a host the config file does not map: nothing on stdout and
    /// exit 0 (git's protocol: git asks its next helper), and one note on stderr naming the host and
    /// where to map it. `docker-credential get` says the same beside docker's "not found".
    @Test func anUnmappedHostIsNamedOnStandardError() async throws {
        let (home, environment) = CLI.home("moose-unmapped-host")
        defer { try? FileManager.default.removeItem(at: home) }
        let configPath = home.appendingPathComponent("config/moose/config.toml").path
        let git = try await CLI.run(
            ["git-credential", "get"], stdin: Data("protocol=https\nhost=git.example.com\n\n".utf8),
            environment: environment)
        #expect(git.status == 0, "\(git.status) \(git.stderr)")
        #expect(git.stdout.isEmpty, "\(git.stdout)")
        #expect(
            git.stderr
                == "moose: note: no profile for git.example.com: add \"git.example.com\" = \"PROFILE\" under [hosts] in \(configPath), or pass --profile\n",
            "\(git.stderr)")
        // A host that would drive the terminal is escaped, on one line.
        let hostile = try await CLI.run(
            ["git-credential", "get"], stdin: Data("protocol=https\nhost=evil\u{1b}[2J.example.com\n\n".utf8),
            environment: environment)
        #expect(hostile.status == 0 && hostile.stdout.isEmpty, "\(hostile.status) \(hostile.stdout)")
        #expect(!hostile.stderr.contains("\u{1b}") && hostile.stderr.contains("evil\\u{1b}[2J.example.com"))
        // store and erase stay quiet (git calls them after every use).
        let store = try await CLI.run(
            ["git-credential", "store"], stdin: Data("protocol=https\nhost=git.example.com\n\n".utf8),
            environment: environment)
        #expect(store.status == 0 && store.stdout.isEmpty && store.stderr.isEmpty, "\(store.stderr)")
        let docker = try await CLI.run(
            ["docker-credential", "get"], stdin: Data("https://registry.example.com\n".utf8),
            environment: environment)
        #expect(docker.status == 1, "\(docker.status) \(docker.stderr)")
        #expect(docker.stdout == "credentials not found in native keychain\n", "\(docker.stdout)")
        #expect(
            docker.stderr.contains(
                "moose: note: no profile for registry.example.com: add \"registry.example.com\" = \"PROFILE\" under [hosts] in \(configPath)"
            ), "\(docker.stderr)")
    }
}
