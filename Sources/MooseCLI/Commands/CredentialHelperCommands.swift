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

    /// The note a credential helper writes to stderr when `host` maps to no profile: git and docker
    /// read only stdout, so the person at the terminal learns what to add where.
    static func noteUnmapped(host: String) {
        let path = Terminal.safe((try? CLIConfig.path) ?? "the config file", keepNewlines: false)
        let host = Terminal.safe(host, keepNewlines: false)
        guard !host.isEmpty else {
            Terminal.error("moose: note: no host was named, so no profile: pass --profile")
            return
        }
        Terminal.error(
            "moose: note: no profile for \(host): add \"\(host)\" = \"PROFILE\" under [hosts] in \(path), or pass --profile"
        )
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
            // Not ours: no answer on stdout (git asks its next helper); a `get` says why on stderr.
            if action == "get" { CredentialInput.noteUnmapped(host: host) }
            return
        }
        switch action {
        case "get":
            let tokens = try SessionTokens.valid(store: store, profile: name, minimumValidity: 30)
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
            try SessionTokens.refresh(store: store, profile: name, rejecting: rejected)
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
            let host = Self.host(of: serverURL)
            guard let name = profile ?? config.profile(forHost: host) else {
                CredentialInput.noteUnmapped(host: host)
                Terminal.outPreSanitized(Self.notFound)
                throw ExitCode(1)
            }
            let tokens = try SessionTokens.valid(store: store, profile: name, minimumValidity: 30)
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
