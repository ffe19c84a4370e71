import ArgumentParser
import MooseHTTP
import MooseJWT
import MooseOAuth
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

struct LogoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout", abstract: "Revoke the tokens at the provider and wipe the local session (always).",
        discussion: """
            Prints the provider's end-session URL (open it to end the browser's session there) and whether \
            the refresh token was revoked; the local session is wiped even when the provider is down.

            """ + "\n" + HelpText.examples("moose logout", "moose logout --profile work"))
    @OptionGroup var store: StoreOptions
    @Option(
        help: "The profile (default: the config file's default, else \"default\").", completion: ProfileNames.completion
    ) var profile: String?
    /// Accepted for scripts written for earlier versions; the end-session URL is now always printed in full.
    @Flag(name: .customLong("show-end-session-url"), help: .hidden)
    var showEndSessionURL = false

    func run() throws {
        let resolved = try CLIConfig.resolve(self.profile, store: store)
        let profile = resolved.name
        let context = try OAuthContext(options: resolved.store, create: false, profile: profile)
        // A damaged or undecryptable row is wiped too (the engine reports that nothing was revoked); a
        // row holding only the plan an earlier logout kept is no session.
        guard context.sessions.holdsSession(profile) else { throw CLIError.failed("no session for profile \(profile)") }
        // The library's logout of whatever is under the profile, as its stored plan says: revoke,
        // end-session URL, then wipe the tokens — whatever the provider said — keeping the plan in the
        // store, so a plain `moose login` logs in again on any machine that shares it.
        let storage = context.sessions.storage, transport = context.transport
        let result = try CLIBlocking.run {
            await TokenManager.logout(key: profile, storage: storage, transport: transport, keepingPlan: true)
        }
        // The end-session URL first and in full: it is the one thing the wiped session cannot give
        // back (it carries the ID token as id_token_hint, which ends with this session anyway).
        if let url = result.endSessionURL {
            Terminal.out("To end the provider's browser session too, open:\n  \(Terminal.safe(url.absoluteString))")
        }
        if let error = result.wipeError {
            // What the provider knows now comes first: revoked tokens no longer work even though the
            // local copy could not be removed (then fix the store and run the logout again).
            Terminal.error("moose: error: " + Self.sentenceInLine(Self.revocationReport(result)))
            Terminal.error(
                "moose: the local copy of profile \(profile)'s session remains; fix the store, then run the same moose logout command again"
            )
            throw OAuthContext.fail(error)
        }
        Terminal.out("Logged out of profile \(profile): local session wiped.")
        // Nothing is said for a profile the config file describes: its settings are there.
        if result.planKept, resolved.settings?.issuer == nil {
            Terminal.out("Its settings are kept: \(loginHint(profile)) logs in again.")
        }
        // A damaged row had no tokens to revoke: removing it was the whole job.
        if let error = result.revocationError, error.code != OAuthError.sessionDamaged {
            Terminal.error("moose: error: " + Self.sentenceInLine(Self.revocationReport(result)))
            throw Status.failed
        }
        Terminal.out(Self.revocationReport(result))
    }

    /// A sentence as the rest of a `moose: error: …` line: its first letter in lower case.
    static func sentenceInLine(_ sentence: String) -> String {
        guard let first = sentence.first else { return sentence }
        return first.lowercased() + sentence.dropFirst()
    }

    /// One plain sentence on what the provider knows now: revoked, no revocation endpoint, refused,
    /// or unreachable — then the refresh token is still valid there.
    static func revocationReport(_ result: LogoutResult) -> String {
        if let error = result.revocationError {
            let reason = Terminal.safe(error.message)
            switch error.code {
            case OAuthError.transient, OAuthError.timedOut, OAuthError.offline, OAuthError.discovery:
                return
                    "The provider could not be reached (\(reason)): the refresh token is still valid there until it expires [\(error.code)]"
            case OAuthError.storeUnavailable:
                return "The stored session could not be read, so nothing was revoked at the provider (\(reason))."
            case OAuthError.sessionDamaged:
                return
                    "The stored session was damaged (it could not be opened), so nothing was revoked at the provider; "
                    + "its tokens stay valid there until they expire."
            default:
                return
                    "The provider refused the revocation (\(reason)): the refresh token may still be valid there until it expires [\(error.code)]"
            }
        }
        switch (result.refreshTokenRevoked, result.accessTokenRevoked) {
        case (true?, _): return "The refresh token and access token were revoked at the provider."
        case (nil, true?): return "The access token was revoked at the provider (the session had no refresh token)."
        default: return "The provider has no revocation endpoint: the tokens stay valid there until they expire."
        }
    }
}
