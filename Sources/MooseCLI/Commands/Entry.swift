import ArgumentParser
import MooseCrypto

/// `moose`: OAuth 2.0 / OpenID Connect tokens from the shell.
///
/// Exit status: 0 ok, 1 the token or the operation failed, 2 usage or input error, 3 the provider
/// could not be reached. (A program runs it with `MooseCLIProgram.run(postgres:)`.)
struct MooseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "moose",
        abstract: "OAuth 2.0 / OpenID Connect tokens from the shell.",
        discussion: """
            Exit status: 0 ok; 1 the operation failed (a refused token or login, a provider's error, a TLS \
            error); 2 usage or input error; 3 the provider could not be reached (network, timeout, HTTP 5xx): \
            try again later.

            """ + "\n"
                + HelpText.examples(
                    "moose login --issuer https://id.example.com --client-id my-cli",
                    "curl -H \"Authorization: Bearer $(moose token)\" https://api.example.com/",
                    "moose status",
                    "moose inspect --issuer https://id.example.com --aud my-api \"$(moose token)\""),
        version: "0.3.0",
        subcommands: [
            InspectCommand.self, VerifyCommand.self, LoginCommand.self, StatusCommand.self, RefreshCommand.self,
            LogoutCommand.self, TokenCommand.self, ExchangeCommand.self, DPoPProofCommand.self,
            StoreCommand.self, ProfileCommand.self, MCPCommand.self, GitCredentialCommand.self,
            DockerCredentialCommand.self, CompletionCommand.self,
            RefreshWorkerCommand.self
        ]
    )

    /// Parses the arguments. `inspect` (the start-up-sensitive command) is parsed directly by its own
    /// type, which spares building the whole command tree.
    static func parse(_ arguments: [String]) throws -> any ParsableCommand {
        if arguments.first == "inspect", !arguments.contains(where: { $0 == "--help" || $0 == "-h" || $0 == "help" }) {
            do {
                return try InspectCommand.parse(Array(arguments.dropFirst()))
            } catch {
                // Parse again through the tree so that usage messages read "moose inspect".
                return try parseAsRoot(arguments)
            }
        }
        return try parseAsRoot(arguments)
    }

    /// Runs the command line; maps argument-parser's usage exit status (64) to 2, Moose's usage status.
    ///
    /// Synchronous on purpose: commands that only read local data (`inspect` of a file, `token` with a
    /// cached token) never start the concurrency runtime's thread pool; commands that need the network
    /// block on their async work (`CLIBlocking.run`).
    ///
    /// `inspect` and `token` command lines in the plain subset `LeanCommandLine` reads skip
    /// argument-parser (the start-up cost of reflecting over the commands); anything else, `--help`
    /// and every usage error included, goes through it.
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let lean = LeanCommandLine.command(arguments)
        // `moose token` (called by kubectl, git, scripts, for every request) does not load
        // libcrypto's error texts: its only OpenSSL errors would be a damaged DPoP key, reported by
        // code. Every other command keeps OpenSSL's reasons in its messages.
        var isToken = false
        if case .token = lean { isToken = true }
        LibCrypto.skipCleanupAtExit(loadingErrorStrings: !isToken)
        // A store read (`moose token`) opens AES-GCM and checks an HMAC through the default provider's
        // own tables when libcrypto's configuration allows it (no FIPS, no other provider): EVP's
        // first fetch would cost this process more than everything else it does (BENCHMARKS.md).
        DefaultProviderPath.prefer()
        do {
            if let command = lean {
                try command.run()
            } else {
                var command = try parse(arguments)
                try command.run()
            }
        } catch let error as CLIError {
            Terminal.error("moose: error: \(error.message)")
            terminate(error.status)
        } catch let error as ExitCode {
            // What argument-parser's exitCode(for:) and fullMessage(for:) give for an ExitCode (its
            // status, no message), without their help generator: `inspect` of an invalid token ends here.
            terminate(error.rawValue == 64 ? 2 : error.rawValue)
        } catch {
            let code = exitCode(for: error)
            let message = fullMessage(for: error)
            if code == .success {
                if !message.isEmpty { Terminal.out(message) }
                terminate(0)
            }
            if !message.isEmpty { Terminal.error(message) }
            if let first = arguments.first, let suggestion = suggestion(for: first) {
                Terminal.error("moose: did you mean `moose \(suggestion)`?")
            }
            terminate(code.rawValue == 64 ? 2 : code.rawValue)
        }
    }

    /// The subcommand `word` was probably meant as (an edit distance of at most 2, or a unique prefix),
    /// when `word` is no subcommand and no option.
    static func suggestion(for word: String) -> String? {
        guard !word.hasPrefix("-"), word.utf8.count <= 64 else { return nil }
        let names = configuration.subcommands.filter { $0.configuration.shouldDisplay }.compactMap {
            $0.configuration.commandName
        }
        guard !names.contains(word) else { return nil }
        let typed = Array(word.lowercased().utf8)
        let prefixed = names.filter { $0.utf8.starts(with: typed) }
        if prefixed.count == 1 { return prefixed[0] }
        let ranked = names.map { ($0, editDistance(typed, Array($0.utf8))) }.filter { $0.1 <= 2 }.sorted { $0.1 < $1.1 }
        guard let best = ranked.first, ranked.dropFirst().first?.1 != best.1 else { return nil }
        return best.0
    }

    /// Levenshtein distance between two byte strings (both short: command names).
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

/// Help text pieces shared by the commands.
enum HelpText {
    /// An "Examples:" block: one command per line, indented, each short enough (≤ 78 columns with its
    /// indent) that help never wraps it mid-command on an 80-column terminal.
    static func examples(_ lines: String...) -> String {
        "Examples:\n" + lines.map { "  " + $0 }.joined(separator: "\n")
    }
}

/// The `moose` command line, for a program's `main`.
public enum MooseCLIProgram {
    /// Runs the command line of this process with `postgres` for `postgres://` stores, and exits
    /// with Moose's status: 0 ok, 1 the token or the operation failed, 2 usage or input error,
    /// 3 the provider could not be reached.
    public static func run(postgres: PostgresStores) -> Never {
        RegisteredBackends.postgres.withLock { $0 = postgres }
        MooseCommand.main()
        terminate(0)
    }
}
