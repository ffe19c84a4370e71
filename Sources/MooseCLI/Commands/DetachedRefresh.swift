import ArgumentParser
import MooseOAuth
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
            guard outcome.ok else {
                throw outcome.error
                    ?? CLIError(message: outcome.message ?? "the refresh failed", status: outcome.exit ?? 1)
            }
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

/// `moose __refresh --profile P [store options]`: the detached refresher (`DetachedRefresh`). Not for
/// people: it reads its request on stdin and answers one JSON line on stdout.
struct RefreshWorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "__refresh", abstract: "The detached refresher (internal).",
        shouldDisplay: false)
    @OptionGroup var store: StoreOptions
    @Option var profile: String

    func run() throws {
        let outcome: DetachedRefresh.Outcome
        do {
            guard let request = DetachedRefresh.readRequest() else {
                throw CLIError.usage("moose __refresh is moose's own refresher: it takes a request on stdin")
            }
            try Self.perform(request, profile: profile, store: store)
            outcome = .success
        } catch {
            outcome = DetachedRefresh.outcome(error)
        }
        DetachedRefresh.answer(outcome)
    }

    /// The coordinator call `request` names, on `profile`'s session, as the caller would have made it.
    static func perform(_ request: DetachedRefresh.Request, profile: String, store: StoreOptions) throws {
        let context = try OAuthContext(options: store, create: false, profile: profile)
        defer { context.sessions.close() }
        guard let (_, settings) = try context.loadOrFail(profile) else {
            throw CLIError.failed("no session for profile \(profile); run moose login --profile \(profile)")
        }
        try OAuthContext.refreshInProcess(request, context: context, settings: settings)
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
