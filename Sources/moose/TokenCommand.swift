import ArgumentParser
import MooseHTTP
import MooseJWT
import MooseOAuth
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
            curl -H "$(moose token --format header)" https://api.example.com/me
            eval "$(moose token --format env)"   # exports MOOSE_ACCESS_TOKEN, MOOSE_TOKEN_TYPE, MOOSE_TOKEN_EXPIRES_AT
            Exit status: 0 ok, 1 the session needs `moose login`, 2 usage, 3 the provider is unreachable.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case token, header, env, json }

    @OptionGroup var store: StoreOptions
    @Option(help: "The profile.") var profile = "default"
    @Option(name: .customLong("min-validity"), help: ArgumentHelp("Seconds the token must still be valid (e.g. 60 or 60s).", valueName: "SECONDS"))
    var minValidity: String = "30"
    @Flag(name: .customLong("id-token"), help: "Print the ID token instead.") var idToken = false
    @Option(help: "token | header | env | json") var format: Format = .token

    func run() throws {
        guard let minimum = Double(minValidity.hasSuffix("s") ? String(minValidity.dropLast()) : minValidity),
              minimum >= 0, minimum <= 86_400 * 365 else {
            throw CLIError.usage("--min-validity \(minValidity): expected seconds (at most a year), like 60 or 60s")
        }
        let sessions = try CLISessions(options: store, create: false)
        defer { sessions.close() }
        let stored: StoredSession?
        do { stored = try sessions.load(profile) } catch { throw OAuthContext.fail(error) }
        guard let session = stored?.session else { throw CLIError.failed("no session for profile \(profile); run moose login") }
        guard session.state == .active else { throw CLIError.failed("profile \(profile) needs a new login; run moose login --profile \(profile)") }
        var tokens = session.tokens
        if !tokens.isValid(for: minimum) {
            // Slow path: the network, through the one refresh path every command shares.
            do {
                let context = OAuthContext(sessions: sessions)
                let coordinator = try context.coordinator(for: session, profile: Profile.of(session, key: profile))
                try OAuthContext.refreshing(coordinator) { try await $0.accessToken(minimumValidity: minimum) }
            } catch let error as OAuthError where error.code == OAuthError.invalidGrant || error.code == OAuthError.needsLogin {
                throw CLIError.failed("the session of profile \(profile) needs a new login (\(error.oauthError ?? error.code.description)); run moose login --profile \(profile)")
            } catch {
                throw OAuthContext.fail(error)
            }
            tokens = try sessions.load(profile)?.session.tokens ?? tokens
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
                throw CLIError.failed("the \(idToken ? "ID" : "access") token has characters outside RFC 6750's b64token set; "
                                      + "refusing to print it as shell or header text (--format json shows it JSON-escaped)")
            }
            guard TokenCharacters.isHTTPToken(tokenType) else {
                throw CLIError.failed("the token type is not an HTTP token (RFC 9110); refusing to print it as shell or header text")
            }
        }
        let expiresAt = tokens.expiresAt.map { Int64(saturating: $0.timeIntervalSince1970) }
        switch format {
        case .token: Terminal.out(value)
        case .header: Terminal.out("Authorization: \(tokenType) \(value)")
        case .env:
            Terminal.out("export MOOSE_ACCESS_TOKEN=\(Shell.quote(value))")
            Terminal.out("export MOOSE_TOKEN_TYPE=\(Shell.quote(tokenType))")
            Terminal.out("export MOOSE_TOKEN_EXPIRES_AT=\(Shell.quote(expiresAt.map(String.init) ?? ""))")
        case .json:
            var object: JSONObject = ["token": .string(value), "token_type": .string(tokenType),
                                      "scopes": .array(tokens.scopes.map { .string($0) })]
            object["expires_at"] = expiresAt.map { .number(JSONNumber($0)) } ?? .null
            Terminal.out(JSONValue.object(object).serialized())
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
