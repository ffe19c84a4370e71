import ArgumentParser
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseOAuthSystem
import MooseSQLiteStorage
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `moose token`: a valid access token for scripts, refreshed (once, across processes) when needed.
struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print a valid access token (refreshing once, however many scripts ask at the same moment).",
        discussion: """
            --format env exports MOOSE_ACCESS_TOKEN, MOOSE_TOKEN_TYPE and MOOSE_TOKEN_EXPIRES_AT; \
            --format exec-credential is a kubectl exec credential (with --id-token for Kubernetes' OIDC).

            Exit status: 0 ok, 1 the session needs `moose login`, 2 usage, 3 the provider is unreachable.

            """ + "\n"
                + HelpText.examples(
                    "curl -H \"$(moose token --format header)\" https://api.example.com/me",
                    "eval \"$(moose token --format env)\"",
                    "moose token --id-token --format exec-credential",
                    "moose token --profile work --min-validity 120"))

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case token, header, env, json
        /// A Kubernetes `ExecCredential` for kubectl's exec credential plugins.
        case execCredential = "exec-credential"
    }

    @OptionGroup var store: StoreOptions
    @Option(
        help: "The profile (default: the config file's default, else \"default\").", completion: ProfileNames.completion
    ) var profile: String?
    @Option(
        name: .customLong("min-validity"),
        help: ArgumentHelp(
            "How long the token must still be valid: seconds, or a duration like 90s, 2m, 1h (default: 30s; at most a quarter of the provider's token lifetime).",
            valueName: "DURATION"))
    var minValidity: String?
    @Flag(name: .customLong("id-token"), help: "Print the ID token instead.") var idToken = false
    @Option(
        help:
            "What to print: the bare token, an Authorization header, shell variables, JSON, or a kubectl exec credential."
    )
    var format: Format = .token
    @Option(
        help: ArgumentHelp(
            "For a DPoP-bound session with --format header: the request's URL (the proof's htu).", valueName: "URL"))
    var url: String?
    @Option(
        help: ArgumentHelp("For a DPoP-bound session with --format header: the request's method.", valueName: "METHOD"))
    var method = "GET"
    @Option(help: ArgumentHelp("A DPoP nonce the resource server sent (its DPoP-Nonce header).", valueName: "NONCE"))
    var nonce: String?
    @Option(
        help: ArgumentHelp(
            "The token of the session for this resource (an MCP server, an API; see moose login --resource).",
            valueName: "URL"))
    var resource: String?

    /// The command line as plain values.
    var values: Values {
        Values(
            store: store, profile: profile, minValidity: minValidity, idToken: idToken, format: format,
            url: url, method: method, nonce: nonce, resource: resource)
    }

    func run() throws { try values.run() }

    /// `moose token`'s options as plain values, with the defaults declared above: what
    /// `LeanCommandLine` makes without argument-parser (whose property wrappers cost start-up time
    /// even to create), and what `run()` runs.
    struct Values {
        var store: StoreOptions
        var profile: String? = nil
        /// `--min-validity` as given (`nil`: the default, 30 s).
        var minValidity: String? = nil
        var idToken = false
        var format: Format = .token
        var url: String? = nil
        var method = "GET"
        var nonce: String? = nil
        var resource: String? = nil

        func run() throws {
            var minimum: TimeInterval = 30
            if let minValidity {
                guard let parsed = DurationText.parse(minValidity) else {
                    throw CLIError.usage(
                        "--min-validity \(minValidity): expected a duration of at most a year, like 60, 90s, 2m or 1h")
                }
                minimum = parsed
            }
            // A resource that cannot be one is a usage error before anything is read or sent.
            let canonical = try resource.map(ResourceLogin.canonical)
            let profile: String
            let store: StoreOptions
            if let resource, let canonical, self.profile == nil {
                // The config file as `moose login --resource` read it: its errors, and the store it names for
                // the resource's profile.
                store = try CLIConfig.resolve(canonical, store: self.store).store
                profile = try ResourceLogin.profile(for: resource, store: store)
            } else {
                let resolved = try CLIConfig.resolve(self.profile, store: self.store)
                profile = resolved.name
                store = resolved.store
            }
            let tokens = try SessionTokens.valid(
                store: store, profile: profile, minimumValidity: minimum, idToken: idToken)
            // Asked for more than the provider's tokens live: say so (the token printed is the freshest there is).
            if minValidity != nil, let lifetime = tokens.lifetime, let expiresAt = tokens.expiresAt, minimum > lifetime
            {
                Terminal.error(
                    "moose: note: --min-validity \(DurationText.describe(minimum)) is longer than the provider's tokens live "
                        + "(\(DurationText.describe(lifetime))); printing a token valid for \(DurationText.describe(max(expiresAt.timeIntervalSinceNow, 0)))"
                )
            }
            // A token goes only to the resource it was issued for.
            if let canonical, self.profile != nil {
                guard let stored = tokens.resource, stored.utf8.elementsEqual(canonical.utf8) else {
                    throw CLIError.failed(
                        "profile \(profile)'s tokens are not for \(canonical)\(tokens.resource.map { " (they are for \($0))" } ?? "")"
                    )
                }
            }
            let value: String
            if idToken {
                guard let id = tokens.idToken else { throw CLIError.failed("the session has no ID token") }
                value = id
            } else {
                value = tokens.accessToken
            }
            let tokenType = idToken ? "Bearer" : tokens.tokenType
            // Shell and header text only from safe characters: RFC 6750's b64token for the token, an
            // RFC 9110 token for its type. Anything else could run commands in `eval "$(…)"` or inject
            // a header; it is refused, not escaped into something that might still be pasted raw.
            if format != .json {
                guard TokenCharacters.isB64Token(value) else {
                    throw CLIError.failed(
                        "the \(idToken ? "ID" : "access") token has characters outside RFC 6750's b64token set; "
                            + "refusing to print it as shell or header text (--format json shows it JSON-escaped)")
                }
                guard TokenCharacters.isHTTPToken(tokenType) else {
                    throw CLIError.failed(
                        "the token type is not an HTTP token (RFC 9110); refusing to print it as shell or header text")
                }
            }
            try write(value, tokenType: tokenType, tokens: tokens, profile: profile)
        }

        /// Writes `value` (the access or ID token, checked) in the chosen format; a DPoP-bound access
        /// token as a header also gets its proof for `--url`.
        func write(_ value: String, tokenType: String, tokens: TokenSet, profile: String) throws {
            // The printed token's own expiry: the ID token's `exp` with --id-token.
            let printedExpiry = idToken ? tokens.idTokenExpiresAt : tokens.expiresAt
            let expiresAt = printedExpiry.map { Int64(saturating: $0.timeIntervalSince1970) }
            switch format {
            case .token: Terminal.out(value)
            case .header:
                // RFC 9449 §7.1: a DPoP-bound token goes with a proof for this very request, made before
                // anything is printed (half a header pair would reach curl's -H).
                var lines = ["Authorization: \(tokenType) \(value)"]
                if tokens.isDPoPBound, !idToken {
                    guard let url else {
                        throw CLIError.usage(
                            "profile \(profile) has DPoP-bound tokens: --format header needs --url (and --method unless GET) for the proof"
                        )
                    }
                    lines.append(
                        "DPoP: \(try DPoPProofCommand.proof(tokens: tokens, method: method, url: url, nonce: nonce, accessTokenHash: true))"
                    )
                }
                Terminal.out(lines.joined(separator: "\n"))
            case .env:
                Terminal.out("export MOOSE_ACCESS_TOKEN=\(Shell.quote(value))")
                Terminal.out("export MOOSE_TOKEN_TYPE=\(Shell.quote(tokenType))")
                Terminal.out("export MOOSE_TOKEN_EXPIRES_AT=\(Shell.quote(expiresAt.map(String.init) ?? ""))")
            case .json:
                var object: JSONObject = [
                    "token": .string(value), "token_type": .string(tokenType),
                    "scopes": .array(tokens.scopes.map { .string($0) })
                ]
                object["expires_at"] = .unixSeconds(printedExpiry)
                Terminal.out(JSONValue.object(object).serialized())
            case .execCredential:
                Terminal.out(try ExecCredential.document(token: value, expiresAt: printedExpiry))
            }
        }
    }
}

/// Shell quoting for text the CLI prints for `eval`.
enum Shell {
    /// `text` as one POSIX shell word: single-quoted, each `'` written as `'\''`. Safe for any
    /// input (the shell interprets nothing inside single quotes).
    static func quote(_ text: String) -> String {
        var out = "'"
        for character in text.unicodeScalars {
            if character == "'" { out += "'\\''" } else { out.unicodeScalars.append(character) }
        }
        return out + "'"
    }
}

/// `moose dpop-proof`: a DPoP proof (RFC 9449 §4) made with the session's key, for scripts.
struct DPoPProofCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dpop-proof",
        abstract: "Print a DPoP proof for one request, signed with the session's DPoP key.",
        discussion: """
            The proof carries ath (the access token's hash) unless --no-ath; a nonce when --nonce is given.

            """ + "\n"
                + HelpText.examples(
                    "url=https://api.example.com/me",
                    "curl -H \"Authorization: DPoP $(moose token)\" \\",
                    "     -H \"DPoP: $(moose dpop-proof --url $url)\" \"$url\""))

    @OptionGroup var store: StoreOptions
    @Option(
        help: "The profile (default: the config file's default, else \"default\").", completion: ProfileNames.completion
    ) var profile: String?
    @Option(help: ArgumentHelp("The request's method, its htm claim.", valueName: "METHOD")) var method = "GET"
    @Option(help: ArgumentHelp("The request's URL (htu: query and fragment are dropped).", valueName: "URL")) var url:
        String
    @Option(help: ArgumentHelp("The server's DPoP-Nonce.", valueName: "NONCE")) var nonce: String?
    @Flag(name: .customLong("no-ath"), help: "Leave out ath (a proof for a token endpoint rather than a resource).")
    var noAccessTokenHash = false

    func run() throws {
        let resolved = try CLIConfig.resolve(self.profile, store: store)
        let profile = resolved.name
        let context = try OAuthContext(options: resolved.store, create: false, profile: profile)
        let session = try context.session(of: profile).session
        Terminal.out(
            try Self.proof(
                tokens: session.tokens, method: method, url: url, nonce: nonce, accessTokenHash: !noAccessTokenHash))
    }

    /// A proof with the key kept with `tokens` (`TokenSet.dpopProof`): a request the proof cannot name
    /// is a usage error.
    static func proof(tokens: TokenSet, method: String, url: String, nonce: String?, accessTokenHash: Bool) throws
        -> String
    {
        guard tokens.dpopKey != nil else {
            throw CLIError.failed("the session has no DPoP key (log in with moose login --dpop)")
        }
        do {
            return try tokens.dpopProof(method: method, url: url, nonce: nonce, bindsAccessToken: accessTokenHash)
        } catch let error as OAuthError where error.code == OAuthError.invalidConfiguration {
            throw CLIError.usage(error.message)
        } catch {
            throw OAuthContext.fail(error)
        }
    }
}

/// kubectl's exec credential plugin protocol: what `moose token --format exec-credential` prints
/// (`KubernetesExecCredential`, in the version `KUBERNETES_EXEC_INFO` asks for).
enum ExecCredential {
    /// The `ExecCredential` document for `token`; an unreadable `KUBERNETES_EXEC_INFO` is a usage
    /// error, a version moose does not speak a failure.
    static func document(token: String, expiresAt: Date?) throws -> String {
        do {
            let info = try KubernetesExecCredential.ExecInfo.current()
            return KubernetesExecCredential(token: token, expiresAt: expiresAt, answering: info).serialized()
        } catch {
            throw CLIError(
                message: error.message, status: error.code == CredentialHelperError.unsupportedVersion ? 1 : 2)
        }
    }
}
