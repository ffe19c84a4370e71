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

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show sessions (never a token).",
        discussion: HelpText.examples("moose status", "moose status --profile work --json"))
    @OptionGroup var store: StoreOptions
    @Option(help: "Only this profile.", completion: ProfileNames.completion) var profile: String?
    @Flag(help: "One JSON array for scripts.") var json = false

    func run() throws {
        let resolved = try CLIConfig.resolve(profile, store: store)
        let context = try OAuthContext(
            options: resolved.store, create: false, profile: profile.map { _ in resolved.name })
        let catalog: ProfileCatalog
        do { catalog = try context.sessions.catalog(only: profile, keptOutside: false) } catch {
            throw OAuthContext.fail(error, profile: profile)
        }
        // One profile asked for by name must have a session: none, or a damaged one, says what to do.
        if let profile, catalog.rows[profile]?.session == nil { _ = try context.session(of: profile) }
        var items: [JSONValue] = []
        var shown = 0
        for (name, row) in catalog.rows.sorted(by: { $0.key < $1.key }) {
            guard let session = row.session else {
                // A damaged row is listed with the way out; the other sessions are shown as usual.
                guard case .damaged = row else { continue }
                let damaged = Self.damaged(name)
                if json { items.append(damaged.json) } else { Terminal.out(damaged.text) }
                shown += 1
                continue
            }
            shown += 1
            let tokens = session.tokens
            let summary = SessionSummary(key: name, session: session)
            if json {
                var object: JSONObject = [
                    "profile": .string(name), "issuer": .string(session.issuer),
                    "client_id": .string(session.clientID), "state": .string(session.state.rawValue),
                    "subject": .string(session.subject),
                    "display_name": .string(summary.displayName),
                    "preferred_username": .string(summary.preferredUsername),
                    "email": .string(summary.email),
                    "name": .string(summary.name),
                    "scopes": .array(tokens.scopes.map { .string($0) }),
                    "has_refresh_token": .bool(tokens.refreshToken != nil),
                    "resource": .string(session.resource)
                ]
                object["expires_at"] = .string(tokens.expiresAt.map(ISO8601.string(from:)))
                items.append(.object(object))
                continue
            }
            let resource = session.resource.map { " for \($0)" } ?? ""
            if session.isRegistrationOnly {
                Terminal.out(
                    "\(name): at \(session.issuer)\(resource) — not logged in yet (a client is registered there, "
                        + "but no login finished); run \(loginHint(name))")
            } else {
                let grant = session.renewsWithoutAPerson
                let state =
                    !session.canRenew
                    ? "needs login"
                    : tokens.isValid()
                        ? "active" : grant ? "expired (renewed by a new grant on next use)" : "expired (refreshable)"
                let refresh = tokens.refreshToken != nil ? "yes" : grant ? "none (a new grant renews it)" : "none"
                Terminal.out(
                    "\(name): \(summary.principal ?? "-") at \(session.issuer)\(resource) — \(state); access token \(expiryText(tokens)); "
                        + "refresh token \(refresh); scopes: \(tokens.scopes.joined(separator: " "))")
            }
        }
        if json {
            Terminal.out(JSONValue.array(items).prettyPrinted())
        } else if shown == 0 {
            // A logout keeps a profile's settings: the login that uses them again (a bare `moose login` is
            // the config file's default profile's).
            let kept = catalog.loggedOut
            let next = kept.contains(resolved.name) || kept.isEmpty ? resolved.name : kept[0]
            let login = next == resolved.name ? "moose login" : "moose login --profile \(Terminal.safe(next))"
            Terminal.out(
                kept.isEmpty
                    ? "no sessions; run moose login"
                    : "no sessions; logged out of \(kept.map { Terminal.safe($0) }.joined(separator: ", ")) "
                        + "(settings kept); run \(login)")
        }
    }

    /// How `status` shows a row that cannot be opened.
    static func damaged(_ name: String) -> (text: String, json: JSONValue) {
        let safe = Terminal.safe(name)
        let next = "run moose login --profile \(safe) to replace it, or moose logout --profile \(safe) to remove it"
        return (
            "\(safe): damaged — the stored session cannot be opened (its sealed bytes do not authenticate); \(next)",
            .object(["profile": .string(name), "state": .string("damaged"), "next_step": .string(next)])
        )
    }
}
