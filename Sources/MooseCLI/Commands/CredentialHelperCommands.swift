import ArgumentParser
import MooseHTTP
import MooseOAuthSystem

/// What the credential helpers share: reading standard input, the note for a host no profile is
/// mapped to, and the exit statuses of the library's protocol errors.
enum CredentialInput {
    /// Standard input, at most `limit` bytes (more is a usage error).
    static func read(limit: Int) throws -> [UInt8] {
        guard let bytes = try Terminal.readStandardInput(limit: limit) else {
            throw CLIError.usage("standard input is larger than \(limit) bytes")
        }
        return bytes
    }

    /// A protocol error as the CLI says it: what the caller sent is a usage error (2), an answer
    /// that cannot be written a failure (1).
    static func cliError(_ error: CredentialHelperError) -> CLIError {
        switch error.code {
        case CredentialHelperError.malformedInput, CredentialHelperError.inputTooLarge: CLIError.usage(error.message)
        default: CLIError.failed(error.message)
        }
    }

    /// The note a credential helper writes to stderr when `host` maps to no profile: git and docker
    /// read only stdout, so the person at the terminal learns what to add where.
    static func noteUnmapped(host: String) {
        let path = Terminal.safe(CLIConfig.pathForMessages, keepNewlines: false)
        let host = Terminal.safe(host, keepNewlines: false)
        guard !host.isEmpty else {
            Terminal.error("moose: note: no host was named, so no profile: pass --profile")
            return
        }
        Terminal.error(
            "moose: note: no profile for \(host): add \"\(host)\" = \"PROFILE\" under [hosts] in \(path), or pass --profile"
        )
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
    @Argument(help: "get, store or erase (another action is ignored, as git asks of its helpers)") var action: String

    func run() throws {
        let request: GitCredentialRequest
        do {
            request = try GitCredentialRequest(parsing: CredentialInput.read(limit: GitCredentialRequest.maximumSize))
        } catch let error as CredentialHelperError { throw CredentialInput.cliError(error) }
        let host = request.host ?? ""
        guard let name = try profile ?? CLIConfig.load().profile(forHost: host) else {
            // Not ours: no answer on stdout (git asks its next helper); a `get` says why on stderr.
            if action == "get" { CredentialInput.noteUnmapped(host: host) }
            return
        }
        switch GitCredentialAction(rawValue: action) {
        case .get:
            let tokens = try SessionTokens.valid(store: store, profile: name, minimumValidity: 30)
            guard !tokens.isDPoPBound else {
                throw CLIError.failed("profile \(name) has DPoP-bound tokens, which git cannot present")
            }
            do {
                let answer = try GitCredentialAnswer.accessToken(
                    tokens.accessToken, expiresAt: tokens.expiresAt, username: username, for: request)
                Terminal.writeStandardOutput(Array(try answer.serialized().utf8))
            } catch { throw CredentialInput.cliError(error) }
        case .store:
            return // the session lives in moose's store; nothing of git's to keep
        case .erase:
            // git got a 401 with this password: refresh, but only if it is still the current token —
            // never wipe the session (another remote may still accept it).
            guard let rejected = request.presentedSecret else { return }
            try SessionTokens.refresh(store: store, profile: name, rejecting: rejected)
        case nil:
            return // an action git added later: ignored, as git asks of its helpers (gitcredentials(7))
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

    func run() throws {
        let config = try CLIConfig.load()
        switch DockerCredentialHelper.Action(rawValue: action) {
        case .get:
            let serverURL: String
            do {
                serverURL = try DockerCredentialHelper.serverURL(parsing: CredentialInput.read(limit: 8192))
            } catch let error as CredentialHelperError { throw CredentialInput.cliError(error) }
            let host = DockerCredentialHelper.host(ofServerURL: serverURL)
            guard let name = profile ?? config.profile(forHost: host) else {
                CredentialInput.noteUnmapped(host: host)
                Terminal.outPreSanitized(DockerCredentialHelper.notFound)
                throw ExitCode(1)
            }
            let tokens = try SessionTokens.valid(store: store, profile: name, minimumValidity: 30)
            guard TokenCharacters.isB64Token(tokens.accessToken) else {
                throw CLIError.failed("the access token is not a b64token")
            }
            let answer = DockerCredentials(serverURL: serverURL, username: username, secret: tokens.accessToken)
            Terminal.outPreSanitized(answer.serialized())
        case .list:
            Terminal.outPreSanitized(DockerCredentialHelper.listAnswer(config.hosts.mapValues { _ in username }))
        case .store, .erase:
            // docker login / logout: the session is moose's (moose login / logout); nothing to keep or wipe here.
            _ = try CredentialInput.read(limit: DockerCredentialHelper.maximumInputSize)
        case nil:
            throw CLIError.usage("moose docker-credential takes get, store, erase or list")
        }
    }
}
