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

/// The configuration file (`$MOOSE_CONFIG`, else `$XDG_CONFIG_HOME/moose/config.toml`): profiles
/// and host → profile mappings, so credential helpers need no flags.
enum CLIConfig {
    static var path: String {
        get throws {
            if let path = getenv("MOOSE_CONFIG").map({ String(cString: $0) }), !path.isEmpty { return path }
            return try StoreOptions.xdg("XDG_CONFIG_HOME", fallback: ".config") + "/moose/config.toml"
        }
    }

    /// The file, or an empty configuration when there is none. A file that exists but cannot be
    /// read or parsed is an error (exit 2) that names the line.
    static func load() throws -> ProfileFile {
        let path = try self.path
        do {
            return try ProfileFile.load(path: path)
        } catch let error as OAuthError {
            throw CLIError.usage(error.message)
        }
    }

    /// The profile a command works on: `--profile`, else the file's `default`, else "default".
    static func profileName(_ option: String?) -> String {
        if let option { return option }
        return (try? load())?.defaultProfile ?? "default"
    }

    /// What a session command works on, read from the config file once: the profile (`--profile`,
    /// else the file's `default`, else "default"), its settings there, and the store — `--store`,
    /// else `$MOOSE_STORE`, else the profile's `store`, else the default file. A config file that
    /// exists but does not parse is an error (exit 2, naming the file and line) for every command.
    static func resolve(_ option: String?, store: StoreOptions) throws -> ResolvedProfile {
        let config = try load()
        let name = option ?? config.defaultProfile ?? "default"
        let settings = config.profiles[name]
        var store = store
        if store.storePath == nil, getenv("MOOSE_STORE") == nil, let path = settings?.store, !path.isEmpty {
            store.storePath = path
        }
        return ResolvedProfile(name: name, settings: settings, store: store)
    }
}

/// A command's profile after the config file was read (`CLIConfig.resolve`).
struct ResolvedProfile {
    /// The profile's name (the session's storage key).
    let name: String
    /// Its settings in the config file, if it has any there.
    let settings: ProfileFile.ProfileSettings?
    /// The store to use for it.
    let store: StoreOptions
}

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
            abstract: "Profiles in the config file and sessions in the store.")
        @OptionGroup var store: StoreOptions

        func run() throws {
            let config = try CLIConfig.load()
            let active = CLIConfig.profileName(nil)
            var sessions: [String] = []
            if let opened = try? CLISessions(options: store, create: false) { sessions = (try? opened.keys()) ?? [] }
            let names = Set(config.profiles.keys).union(sessions).sorted()
            if names.isEmpty {
                // First contact (no config file, no store): none yet, and how to make one — not an error.
                Terminal.out(
                    "no profiles yet: moose login --issuer URL --client-id ID makes one (profile default), "
                        + "or add a [profiles.NAME] section to \(try CLIConfig.path)")
            }
            for name in names {
                let marker = name.utf8.elementsEqual(active.utf8) ? "*" : " "
                let state = sessions.contains(name) ? "session" : "no session"
                let issuer = config.profiles[name]?.issuer.map { " \($0)" } ?? ""
                Terminal.out("\(marker) \(name) (\(state))\(issuer)")
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A profile's settings (never a token).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The profile (default: the active one).", completion: ProfileNames.completion) var name: String?

        func run() throws {
            let resolved = try CLIConfig.resolve(name, store: store)
            let name = resolved.name
            let settings = resolved.settings
            let store = resolved.store
            let stored = (try? CLISessions(options: store, create: false)).flatMap { try? $0.load(name) }?.session
            guard settings != nil || stored != nil else {
                throw CLIError.failed("no profile \(name) in \(try CLIConfig.path) and no session")
            }
            var object: JSONObject = ["name": .string(name)]
            let saved = stored.map { Profile.of($0, key: name) }
            object["issuer"] = (settings?.issuer ?? saved?.issuer).map { .string($0) } ?? .null
            object["client_id"] = (settings?.clientID ?? saved?.clientID).map { .string($0) } ?? .null
            // What a login of this profile asks for: the config's scopes, the session's, else Moose's default.
            object["scopes"] = .array(
                (settings?.scopes ?? saved?.scopes ?? LoginCommand.defaultScopes).map { .string($0) })
            object["resource"] = (settings?.resource ?? saved?.resource).map { .string($0) } ?? .null
            object["store"] = .string(try store.resolvedStorePath)
            object["dpop"] = (settings?.dpop ?? saved?.dpop).map { .string($0) } ?? .null
            object["ca_file"] = (settings?.caFile ?? saved?.caFile).map { .string($0) } ?? .null
            object["session"] = stored.map { .string($0.state == .active ? "active" : "needs login") } ?? .null
            object["hosts"] = .array(
                try CLIConfig.load().hosts.filter { $0.value.utf8.elementsEqual(name.utf8) }.keys.sorted().map {
                    .string($0)
                })
            Terminal.out(JSONValue.object(object).serialized())
        }
    }

    struct Use: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a profile the default (writes the config file).")
        @Argument(help: "The profile.", completion: ProfileNames.completion) var name: String

        func run() throws {
            guard !name.isEmpty, name.utf8.count <= 200, !name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
                throw CLIError.usage("a profile name is 1–200 printable characters")
            }
            var config = try CLIConfig.load()
            // Only a profile that exists: in the config file, or as a session in the store.
            if config.profiles[name] == nil {
                let sessions =
                    (try? CLISessions(
                        options: StoreOptions(storePath: nil, keyFile: nil, keyEnvironment: nil, passphraseFile: nil),
                        create: false)).flatMap { try? $0.keys() } ?? []
                guard sessions.contains(where: { $0.utf8.elementsEqual(name.utf8) }) else {
                    let known = Set(config.profiles.keys).union(sessions).sorted()
                    throw CLIError.failed(
                        "no profile \(name) in \(try CLIConfig.path) and no session of that name"
                            + (known.isEmpty
                                ? "; log in with moose login --profile \(name) first"
                                : " (profiles: \(known.joined(separator: ", ")))"))
                }
            }
            config.defaultProfile = name
            let path = try CLIConfig.path
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try Data(config.serialized.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
            Terminal.out("Default profile: \(name) (\(path))")
        }
    }
}

/// `moose completion bash|zsh|fish`: the shell completion script (generated by swift-argument-parser).
struct CompletionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "completion", abstract: "Print a shell completion script.",
        discussion: "Completes commands, options, their values and profile names.\n\n"
            + HelpText.examples(
                "source <(moose completion bash)                     # bash",
                "moose completion zsh > \"${fpath[1]}/_moose\"         # zsh",
                "moose completion fish > ~/.config/fish/completions/moose.fish"))
    @Argument(help: "bash, zsh or fish") var shell: String

    func run() throws {
        guard let kind = CompletionShell(rawValue: shell) else {
            throw CLIError.usage("moose completion takes bash, zsh or fish")
        }
        Terminal.outPreSanitized(MooseCommand.completionScript(for: kind))
    }
}

/// Reads a credential helper's `key=value` lines from standard input (git's protocol), bounded.
enum CredentialInput {
    static func read(limit: Int = 64 * 1024) throws -> [(String, String)] {
        let bytes = try readStandardInput(limit: limit)
        var attributes: [(String, String)] = []
        // Split on the LF byte; a blank line ends the attributes (git's protocol).
        for rawLine in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            var line = Array(rawLine)
            if line.last == 0x0D { line.removeLast() }
            if line.isEmpty { break }
            guard !line.contains(0), let equals = line.firstIndex(of: UInt8(ascii: "=")) else {
                throw CLIError.usage("credential input lines are key=value")
            }
            attributes.append(
                (
                    String(decoding: line[..<equals], as: UTF8.self),
                    String(decoding: line[(equals + 1)...], as: UTF8.self)
                ))
            guard attributes.count <= 256 else { throw CLIError.usage("too many credential attributes") }
        }
        return attributes
    }

    static func readStandardInput(limit: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = Glibc.read(0, &buffer, buffer.count)
            if count < 0 { if errno == EINTR { continue }; throw CLIError.failed("cannot read standard input") }
            if count == 0 { return bytes }
            bytes.append(contentsOf: buffer[0..<count])
            guard bytes.count <= limit else { throw CLIError.usage("standard input is larger than \(limit) bytes") }
        }
    }

    /// The first value of `key` (keys are ASCII protocol words: compared byte for byte).
    static func value(_ key: String, in attributes: [(String, String)]) -> String? {
        attributes.first { $0.0.utf8.elementsEqual(key.utf8) }?.1
    }
}

/// `moose git-credential get|store|erase`: git's credential helper protocol
/// (`git config credential.https://git.example.com.helper '!moose git-credential'`). The remote's
/// host picks the profile through the config file's `[hosts]` (or `--profile`). `get` answers with
/// the access token as the password and `password_expiry_utc`; with git ≥ 2.46's
/// `capability[]=authtype` it answers `authtype=Bearer` and `credential=<token>` instead. A refresh
/// token never reaches git.
struct GitCredentialCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential", abstract: "A git credential helper.",
        discussion: "git asks it for the token of the profile the config file's [hosts] maps the remote's host to.\n\n"
            + HelpText.examples(
                "git config --global credential.https://git.example.com.helper \\",
                "    '!moose git-credential'"))
    @OptionGroup var store: StoreOptions
    @Option(
        help: "The profile (default: the one the config file maps the remote's host to).",
        completion: ProfileNames.completion) var profile: String?
    @Option(
        help:
            "The username git sends with the token, as the host expects it: x-access-token for GitHub, oauth2 for GitLab."
    ) var username = "x-access-token"
    @Argument(help: "get, store or erase") var action: String

    func run() throws {
        let attributes = try CredentialInput.read()
        let host = CredentialInput.value("host", in: attributes) ?? ""
        let name: String
        if let profile {
            name = profile
        } else if let mapped = try CLIConfig.load().profile(forHost: host) {
            name = mapped
        } else {
            return // not ours: no answer, git asks its next helper
        }
        switch action {
        case "get":
            let tokens = try TokenCommand.validTokens(store: store, profile: name, minimumValidity: 30)
            guard TokenCharacters.isB64Token(tokens.accessToken) else {
                throw CLIError.failed(
                    "the access token has characters outside RFC 6750's b64token set; not handing it to git")
            }
            guard !tokens.isDPoPBound else {
                throw CLIError.failed("profile \(name) has DPoP-bound tokens, which git cannot present")
            }
            let capabilities = attributes.filter { $0.0.utf8.elementsEqual("capability[]".utf8) }.map(\.1)
            var lines: [String] = []
            if capabilities.contains(where: { $0.utf8.elementsEqual("authtype".utf8) }) {
                lines += ["capability[]=authtype", "authtype=Bearer", "credential=\(tokens.accessToken)"]
            } else {
                lines += ["username=\(username.filter { $0 != "\n" && $0 != "\r" })", "password=\(tokens.accessToken)"]
            }
            if let expiresAt = tokens.expiresAt {
                lines.append("password_expiry_utc=\(Int64(saturating: expiresAt.timeIntervalSince1970))")
            }
            Terminal.outPreSanitized(lines.joined(separator: "\n"))
        case "store":
            return // the session lives in moose's store; nothing of git's to keep
        case "erase":
            // git got a 401 with this password: refresh, but only if it is still the current token —
            // never wipe the session (another remote may still accept it).
            guard
                let rejected = CredentialInput.value("password", in: attributes)
                    ?? CredentialInput.value("credential", in: attributes)
            else { return }
            try RefreshCommand.refresh(store: store, profile: name, rejecting: rejected)
        default:
            throw CLIError.usage("moose git-credential takes get, store or erase")
        }
    }
}

/// `moose docker-credential get|store|erase|list`: the docker-credential-helpers protocol, for
/// registries that take OAuth access tokens. Install as `docker-credential-moose` (a two-line script
/// running `moose docker-credential "$@"`) and set `"credHelpers": {"registry.example.com": "moose"}`.
struct DockerCredentialCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docker-credential", abstract: "A docker credential helper.",
        discussion: """
            Put a docker-credential-moose script on PATH and name it in ~/.docker/config.json: \
            "credHelpers": {"registry.example.com": "moose"}.

            """ + "\n"
                + HelpText.examples(
                    "printf '#!/bin/sh\\nexec moose docker-credential \"$@\"\\n' \\",
                    "    > ~/bin/docker-credential-moose",
                    "chmod +x ~/bin/docker-credential-moose"))
    @OptionGroup var store: StoreOptions
    @Option(
        help: "The profile (default: the one the config file maps the registry's host to).",
        completion: ProfileNames.completion) var profile: String?
    @Option(help: "The username sent with the token.") var username = "oauth2accesstoken"
    @Argument(help: "get, store, erase or list") var action: String

    /// The helpers' "not found" answer (docker looks for this text).
    static let notFound = "credentials not found in native keychain"

    /// `bytes` without leading and trailing ASCII spaces, tabs, CR and LF (on bytes: "\r\n" is one Swift Character).
    static func trimmed(_ bytes: [UInt8]) -> String {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    static func host(of serverURL: String) -> String {
        let trimmed = Self.trimmed(Array(serverURL.utf8))
        if let url = URL(string: trimmed), let host = url.host { return url.port.map { "\(host):\($0)" } ?? host }
        return String(trimmed.split(separator: "/").first ?? "")
    }

    func run() throws {
        let config = try CLIConfig.load()
        switch action {
        case "get":
            let input = try CredentialInput.readStandardInput(limit: 8192)
            let serverURL = Self.trimmed(input)
            guard let name = profile ?? config.profile(forHost: Self.host(of: serverURL)) else {
                Terminal.outPreSanitized(Self.notFound)
                throw ExitCode(1)
            }
            let tokens = try TokenCommand.validTokens(store: store, profile: name, minimumValidity: 30)
            guard TokenCharacters.isB64Token(tokens.accessToken) else {
                throw CLIError.failed("the access token is not a b64token")
            }
            let answer: JSONObject = [
                "ServerURL": .string(serverURL), "Username": .string(username), "Secret": .string(tokens.accessToken)
            ]
            Terminal.outPreSanitized(JSONValue.object(answer).serialized())
        case "list":
            var answer: JSONObject = [:]
            for host in config.hosts.keys.sorted() { answer[host] = .string(username) }
            Terminal.outPreSanitized(JSONValue.object(answer).serialized())
        case "store", "erase":
            // docker login / logout: the session is moose's (moose login / logout); nothing to keep or wipe here.
            _ = try CredentialInput.readStandardInput(limit: 64 * 1024)
        default:
            throw CLIError.usage("moose docker-credential takes get, store, erase or list")
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
        if (try? options.isPostgres) == false, let opened = try? CLISessions(options: options, create: false) {
            sessions = (try? opened.keys()) ?? []
        }
        // Only names a shell can take as one word: no spaces, quotes or control characters.
        return Set(config.profiles.keys).union(sessions)
            .filter { name in
                name.utf8.starts(with: prefix.utf8)
                    && name.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F && !"\"'`$\\;&|<>()".utf8.contains($0) }
            }
            .sorted()
    }
}
