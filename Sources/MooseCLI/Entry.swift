import ArgumentParser
import MooseCrypto

/// `moose`: OAuth 2.0 / OpenID Connect tokens from the shell.
///
/// Exit status: 0 ok, 1 the token or the operation failed, 2 usage or input error.
/// (A program runs it with `MooseCLIProgram.run(postgres:)`.)
struct MooseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "moose",
        abstract: "OAuth 2.0 / OpenID Connect tokens from the shell.",
        discussion: "Exit status: 0 ok, 1 the token or the operation failed, 2 usage or input error.",
        version: "0.3.0",
        subcommands: [InspectCommand.self, LoginCommand.self, StatusCommand.self, RefreshCommand.self, LogoutCommand.self, TokenCommand.self, DPoPProofCommand.self,
                      StoreCommand.self, ProfileCommand.self, MCPCommand.self, GitCredentialCommand.self, DockerCredentialCommand.self, CompletionCommand.self]
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
        LibCrypto.skipCleanupAtExit()
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            if let command = LeanCommandLine.command(arguments) {
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
            terminate(code.rawValue == 64 ? 2 : code.rawValue)
        }
    }
}

/// Moose's exit statuses.
enum Status {
    /// The token or the operation failed.
    static let failed = ExitCode(1)
    /// Usage or input error.
    static let usage = ExitCode(2)
}
