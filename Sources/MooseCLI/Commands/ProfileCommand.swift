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

/// `moose profile list|show|use`.
struct ProfileCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile", abstract: "List, show and choose profiles (config file and stored sessions).",
        discussion:
            "Profiles live in $XDG_CONFIG_HOME/moose/config.toml ([profiles.NAME]) and in the store (one per login).\n\n"
            + HelpText.examples("moose profile list", "moose profile show work", "moose profile use work"),
        subcommands: [List.self, Show.self, Use.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Profiles in the config file and sessions in the store.",
            discussion: HelpText.examples("moose profile list"))
        @OptionGroup var store: StoreOptions

        func run() throws {
            let config = try CLIConfig.load()
            let active = config.profileName()
            // The settings file beside the config keeps profiles even when the store cannot be opened. A
            // store that is there but cannot be read is said after the list (exit 1), never taken for "no
            // profiles": what the config and the kept settings say is still listed.
            var catalog = ProfileCatalog(rows: [:], kept: KeptSettings.profiles(store: store))
            var fault: (any Error)?
            do { catalog = try CLISessions.catalog(of: store) } catch { fault = OAuthContext.fail(error) }
            let (sessions, kept) = (catalog.sessions, catalog.loggedOut)
            let names = Set(config.profiles.keys).union(sessions).union(kept).sorted()
            if names.isEmpty, fault == nil {
                // First contact (no config file, no store): none yet, and how to make one — not an error.
                Terminal.out(
                    "no profiles yet: moose login --issuer URL --client-id ID makes one (profile default), "
                        + "or add a [profiles.NAME] section to \(CLIConfig.pathForMessages)")
            }
            for name in names {
                let marker = name.utf8.elementsEqual(active.utf8) ? "*" : " "
                let registered = catalog.rows[name]?.session?.isRegistrationOnly == true
                let state =
                    registered
                    ? "client registered, not logged in yet"
                    : sessions.contains(name)
                        ? "session" : kept.contains(name) ? "logged out, settings kept" : "no session"
                let issuer = config.profiles[name]?.issuer.map { " \($0)" } ?? ""
                Terminal.out("\(marker) \(name) (\(state))\(issuer)")
            }
            if let fault { throw fault }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A profile's settings (never a token).",
            discussion: HelpText.examples("moose profile show", "moose profile show work | jq -r .issuer"))
        @OptionGroup var store: StoreOptions
        @Argument(help: "The profile (default: the active one).", completion: ProfileNames.completion) var name: String?

        func run() throws {
            let resolved = try CLIConfig.resolve(name, store: store)
            let name = resolved.name
            let settings = resolved.settings
            let store = resolved.store
            // A store that cannot be read is said (after what the config and kept settings show), never
            // shown as "no session".
            var fault: (any Error)?
            var catalog = ProfileCatalog(rows: [:], kept: KeptSettings.profiles(store: store))
            do {
                if let opened = try CLISessions.openIfPresent(store) { catalog = try opened.catalog(only: name) }
            } catch { fault = OAuthContext.fail(error, profile: name) }
            // A profile logged out of keeps its plan: shown as it will log in again.
            let saved = catalog.plan(of: name)
            guard settings != nil || saved != nil else {
                if let fault { throw fault }
                throw CLIError.failed("no profile \(name) in \(CLIConfig.pathForMessages) and no session")
            }
            var object: JSONObject = ["name": .string(name), "store": .string(try store.resolvedStorePath)]
            object["session"] = .string(
                catalog.rows[name]?.session.map { $0.state == .active ? "active" : "needs login" })
            // What a plain `moose login --profile NAME` does: the library's resolution of the config's
            // profile over the kept plan (SessionPlan.resolve); a config section that does not say enough
            // to log in yet is shown as it is.
            if let plan = (try? SessionPlan.resolve(name: name, given: .init(), profile: settings, kept: saved))
                ?? saved
            {
                for member in ProfileCommand.fields(of: plan) { object[member.key] = member.value }
            } else if let settings {
                for member in ProfileCommand.fields(of: settings) { object[member.key] = member.value }
            }
            object["hosts"] = .array(
                try CLIConfig.load().hosts.filter { $0.value.utf8.elementsEqual(name.utf8) }.keys.sorted().map {
                    .string($0)
                })
            Terminal.out(JSONValue.object(object).serialized())
            if let fault { throw fault }
        }
    }

    /// The settings `moose profile show` prints, from the plan a login would use.
    static func fields(of plan: Profile) -> JSONObject {
        [
            "issuer": .string(plan.issuer), "client_id": .string(plan.clientID),
            "scopes": .array(plan.scopes.map { .string($0) }), "resource": .string(plan.resource),
            "dpop": .string(plan.dpop), "ca_file": .string(plan.provider.caFile),
            "grant": .string(plan.grant.kind.rawValue)
        ]
    }

    /// The same of a config section that does not say enough to log in yet (no issuer or no client id).
    static func fields(of settings: ProfileFile.ProfileSettings) -> JSONObject {
        [
            "issuer": .string(settings.issuer),
            "client_id": .string(settings.clientID),
            "scopes": .array((settings.scopes ?? SessionPlan.defaultScopes).map { .string($0) }),
            "resource": .string(settings.resource),
            "dpop": .string(settings.dpop), "ca_file": .string(settings.caFile),
            "grant": .null
        ]
    }

    struct Use: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a profile the default (writes the config file).",
            discussion: HelpText.examples("moose profile use work", "moose token    # now work's token"))
        @Argument(help: "The profile.", completion: ProfileNames.completion) var name: String

        func run() throws {
            guard !name.isEmpty, name.utf8.count <= 200, !name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
                throw CLIError.usage("a profile name is 1–200 printable characters")
            }
            let config = try CLIConfig.load(creating: true)
            // Only a profile that exists: in the config file, or as a session in the store.
            if config.profiles[name] == nil {
                let options = StoreOptions(storePath: nil, keyFile: nil, keyEnvironment: nil, passphraseFile: nil)
                let sessions = CLISessions.profileNames(in: options)
                guard sessions.contains(where: { $0.utf8.elementsEqual(name.utf8) }) else {
                    let known = Set(config.profiles.keys).union(sessions).sorted()
                    throw CLIError.usage(
                        "no profile \(name) in \(try CLIConfig.path) and no session of that name"
                            + (known.isEmpty
                                ? "; log in with moose login --profile \(name) first"
                                : " (profiles: \(known.joined(separator: ", ")))"))
                }
            }
            let path = try CLIConfig.path
            do {
                try ProfileFile.setDefault(name, inFileAt: path)
            } catch let error as OAuthError where error.code == OAuthError.invalidConfiguration {
                throw CLIError.usage(error.message)
            } catch {
                throw OAuthContext.fail(error)
            }
            Terminal.out("Default profile: \(name) (\(path))")
        }
    }
}

/// Profile names for shell completion (`--profile <TAB>`, `moose profile use <TAB>`): the config
/// file's profiles and the default file store's sessions, those starting with what is typed.
enum ProfileNames {
    static let completion = CompletionKind.custom { _, _, prefix in names(startingWith: prefix) }

    static func names(startingWith prefix: String) -> [String] {
        let config = (try? CLIConfig.load()) ?? ProfileFile()
        var sessions: [String] = []
        let options = StoreOptions(storePath: nil, keyFile: nil, keyEnvironment: nil, passphraseFile: nil)
        // A file store only: a tab press never opens a database connection.
        if (try? options.isPostgres) == false { sessions = CLISessions.profileNames(in: options) }
        // Only names a shell can take as one word: no spaces, quotes or control characters.
        return Set(config.profiles.keys).union(sessions)
            .filter { name in
                name.utf8.starts(with: prefix.utf8)
                    && name.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F && !"\"'`$\\;&|<>()".utf8.contains($0) }
            }
            .sorted()
    }
}
