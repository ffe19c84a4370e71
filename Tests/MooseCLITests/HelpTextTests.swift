import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §5: help gives a usage example per command, whole (never broken
/// mid-command on an 80-column terminal), the exit statuses (3 included) and the redirect URI to
/// register; no "(default: …). (default: 0)"; profile names complete in a real bash.
struct HelpTextTests {
    static let commands: [[String]] = [
        [], ["inspect"], ["login"], ["status"], ["refresh"], ["logout"], ["token"], ["dpop-proof"], ["exchange"],
        ["store"], ["profile"], ["mcp", "login"], ["git-credential"], ["docker-credential"], ["completion"],
        // Issue "Nothing a person set up is lost" §6: the subcommands of store, profile and mcp too.
        ["verify"], ["mcp"], ["store", "init"], ["store", "put"], ["store", "get"], ["store", "list"], ["store", "rm"],
        ["store", "rotate-key"], ["store", "check"], ["store", "reset"], ["profile", "list"], ["profile", "show"],
        ["profile", "use"]
    ]

    @Test(arguments: commands)
    func everyCommandHasWholeExamples(command: [String]) async throws {
        let result = try await CLI.run(command + ["--help"], environment: ["COLUMNS": "80"])
        #expect(result.status == 0, "\(result.stderr)")
        let help = result.stdout
        #expect(help.contains("Examples:"), "moose \(command.joined(separator: " ")) --help has no example")
        let lines = help.components(separatedBy: "\n")
        guard let start = lines.firstIndex(of: "Examples:") else { return }
        // Every example line is indented and starts with a command or continues one: never a wrapped tail.
        for line in lines[(start + 1)...].prefix(while: { !$0.isEmpty }) {
            #expect(line.hasPrefix("  ") && line.count <= 80, "an example broken or too wide: \(line)")
            // A continuation is one backslash: "\\" would end the command in a shell (issue "The second hour" §2).
            #expect(!line.hasSuffix("\\\\"), "an example that does not paste into a shell: \(line)")
        }
        #expect(!help.contains(")). (default:") && !help.contains("). (default:"), "a doubled default in \(command)")
        // One value list per option (issue "Nothing a person set up is lost" §6): never "a | b" beside the
        // parser's own "(values: …)".
        #expect(
            help.range(of: #"\w \| \w[^\n]*\(values:"#, options: .regularExpression) == nil,
            "two value lists for one option in \(command)")
    }

    @Test func theRootHelpNamesEveryExitStatusAndLoginTheRedirectURI() async throws {
        let root = try await CLI.run(["--help"])
        #expect(
            root.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ").contains(
                "3 the provider could not be reached"), "\(root.stdout)")
        let login = try await CLI.run(["login", "--help"])
        #expect(login.stdout.contains("http://127.0.0.1/callback"), "\(login.stdout)")
        #expect(login.stdout.contains("--ca-file"))
    }

    /// The completion script bash really loads completes `--profile` with the config file's profiles.
    @Test func bashCompletesProfileNames() async throws {
        let (home, environment) = try FirstHourCLITests.home(
            "moose-completion",
            config: """
                [profiles.work]
                issuer = "https://id.example.com"
                client_id = "a"

                [profiles.weekend]
                issuer = "https://id.example.com"
                client_id = "b"

                [profiles."odd name"]
                issuer = "https://id.example.com"
                client_id = "c"
                """)
        defer { try? FileManager.default.removeItem(at: home) }
        let script = try await CLI.run(["completion", "bash"], environment: environment)
        #expect(script.status == 0)
        let file = home.appendingPathComponent("moose.bash")
        try Data(script.stdout.utf8).write(to: file)
        let binary = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent().path
        for (words, expected) in [
            ("moose token --profile w", ["weekend", "work"]), ("moose token --profile wo", ["work"]),
            ("moose profile use we", ["weekend"])
        ] {
            let driver = """
                source '\(file.path)'
                COMP_WORDS=(\(words)); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMP_LINE='\(words)'; COMP_POINT=${#COMP_LINE}
                _moose moose "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"   # as bash's complete -F calls it
                printf '%s\\n' "${COMPREPLY[@]}" | sort
                """
            var env = environment
            env["PATH"] = binary + ":/usr/bin:/bin"
            let result = await runProcessOffThePool(["/bin/bash", "-c", driver], environment: env)
            let offered = result.output.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
            #expect(offered == expected, "\(words) → \(result.output)")
        }
    }
}
