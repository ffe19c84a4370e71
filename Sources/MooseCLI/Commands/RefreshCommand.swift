import ArgumentParser
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseOAuthSystem
import MooseSecretStore
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

struct RefreshCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refresh", abstract: "Refresh the session's tokens now.",
        discussion: "moose token refreshes by itself when it has to; this forces one now.\n\n"
            + HelpText.examples("moose refresh", "moose refresh --profile work"))
    @OptionGroup var store: StoreOptions
    @Option(
        help: "The profile (default: the config file's default, else \"default\").", completion: ProfileNames.completion
    ) var profile: String?

    func run() throws {
        let resolved = try CLIConfig.resolve(self.profile, store: store)
        let profile = resolved.name
        let context = try OAuthContext(options: resolved.store, create: false, profile: profile)
        let (session, settings) = try SessionTokens.renewable(profile, in: context)
        // The coordinator: lease, writable-store check before the refresh token is spent, fenced
        // write — the same guarantees `moose token` has.
        let fresh = try SessionTokens.renew(
            DetachedRefresh.Request(mode: .refreshNow), profile: profile, store: resolved.store, context: context,
            settings: settings)
        let rotated = fresh.refreshToken.map { Array($0.utf8) } != session.tokens.refreshToken.map { Array($0.utf8) }
        Terminal.out(
            "Refreshed profile \(profile): access token \(expiryText(fresh))\(rotated ? "; refresh token rotated" : "")"
        )
    }
}
