import ArgumentParser

/// `moose`: OAuth 2.0 / OpenID Connect tokens from the shell.
///
/// Exit status: 0 ok, 1 the token or the operation failed, 2 usage or input error.
@main
struct MooseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "moose",
        abstract: "OAuth 2.0 / OpenID Connect tokens from the shell.",
        discussion: "Exit status: 0 ok, 1 the token or the operation failed, 2 usage or input error.",
        version: "0.1.0",
        subcommands: [InspectCommand.self]
    )

    /// Runs the command line; maps argument-parser's usage exit status (64) to 2, Moose's usage status.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as CLIError {
            Terminal.error("moose: error: \(error.message)")
            terminate(error.status)
        } catch {
            let code = exitCode(for: error)
            let message = fullMessage(for: error)
            if code == .success {
                if !message.isEmpty { print(message) }
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
