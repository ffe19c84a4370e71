import MooseOAuth
import MooseOAuthSystem
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `moose`'s side of the library's `DetachedRefresh` (issue "A refresh survives its caller", §2):
/// `moose token`, `moose refresh` and the credential helpers run their refreshes in a detached `moose
/// __refresh` of the same program (`moose-pg` starts `moose-pg`). Where no child can be started (no
/// `/proc/self/exe`, `MOOSE_REFRESH_IN_PROCESS=1`), the refresh runs in the caller's process as before.
extension DetachedRefresh {
    /// Runs `request` for `profile` in a detached `moose __refresh`, and returns when it reported; throws
    /// what it reported. `false`: no child could be started here (the caller runs the refresh itself).
    static func run(_ request: Request, profile: String, store: StoreOptions) throws -> Bool {
        guard ProcessInfo.processInfo.environment["MOOSE_REFRESH_IN_PROCESS"] != "1", let executable = ownExecutable()
        else { return false }
        switch run(request, arguments: [executable, "__refresh", "--profile", profile] + store.commandLine) {
        case .notStarted: return false
        case .noAnswer(let status):
            throw CLIError.failed(
                "the refresh process ended without an answer (status \(status)); the session is as the store holds it: "
                    + "try again (moose status shows it)")
        case .answered(let outcome):
            // A failure that is not an `OAuthError` keeps its exit status (`OAuthContext.fail`).
            if let failure = outcome.failure { throw failure }
            return true
        }
    }

    /// `error` as the child's outcome line: an `OAuthError` with the store's words under it, a
    /// `CLIError` with its exit status, anything else as exit 1.
    static func outcome(_ error: any Error) -> Outcome {
        if let error = error as? OAuthError { return Outcome(error, cause: OAuthContext.storeCause(error)) }
        if let error = error as? CLIError { return Outcome(failure: error.message, exit: error.status) }
        return Outcome(failure: "\(error)", exit: 1)
    }
}

extension OAuthContext {
    /// Runs `request` on the profile's manager in this process (the detached child, or a caller that
    /// cannot start one).
    static func refreshInProcess(
        _ request: DetachedRefresh.Request, context: OAuthContext, settings: Profile
    ) throws {
        try refreshing(try context.manager(for: settings)) { try await DetachedRefresh.perform(request, on: $0) }
    }

    /// Runs `request` for `profile` — detached when this system can start the child, else here.
    static func renew(
        _ request: DetachedRefresh.Request, profile: String, store: StoreOptions, context: OAuthContext,
        settings: Profile
    ) throws {
        if try DetachedRefresh.run(request, profile: profile, store: store) { return }
        try refreshInProcess(request, context: context, settings: settings)
    }
}

extension StoreOptions {
    /// The options as a command line for another `moose` (paths and names only: a key itself never
    /// travels in arguments; `--key-env` names a variable the child inherits).
    var commandLine: [String] {
        var words: [String] = []
        if let storePath { words += ["--store", storePath] }
        if let keyFile { words += ["--key-file", keyFile] }
        if let keyEnvironment { words += ["--key-env", keyEnvironment] }
        if let passphraseFile { words += ["--passphrase-file", passphraseFile] }
        if let keySecretService { words += ["--key-secret-service", keySecretService] }
        return words
    }
}
