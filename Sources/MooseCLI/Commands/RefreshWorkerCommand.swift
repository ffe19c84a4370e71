import ArgumentParser
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
        try OAuthContext.refreshInProcess(request, context: context, settings: try context.session(of: profile).profile)
    }
}
