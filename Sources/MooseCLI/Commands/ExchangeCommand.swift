import ArgumentParser
import MooseHTTP
import MooseJWT
import MooseOAuth
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `moose exchange`: one RFC 8693 token exchange for a script — a token in, the provider's token out
/// on standard output. Nothing is stored (`moose login --workload` keeps a renewing session instead).
struct ExchangeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exchange",
        abstract: "Exchange a token for another at a provider (RFC 8693) and print it; nothing is stored.",
        discussion: """
            The subject token comes from a file (- for standard input), an environment variable, or a \
            workload source (github, gitlab[:VARIABLE], env:VARIABLE, file:PATH, command:PROGRAM). With \
            --requested-token-type the issued_token_type must be that type; without, an access token.

            Exit status: 0 printed; 1 refused (the provider's error is named); 2 usage; 3 unreachable.
            """ + "\n"
                + HelpText.examples(
                    "moose exchange --issuer https://sts.example.com --client-id ci \\",
                    "    --subject-token-env CI_ID_TOKEN --audience https://api.example.com",
                    "moose exchange --issuer https://sts.example.com --client-id ci \\",
                    "    --workload github --format json"))

    @Option(
        help: ArgumentHelp("The provider's issuer (its discovery document names the token endpoint).", valueName: "URL")
    ) var issuer: String
    @Option(name: .customLong("client-id"), help: "The client id.") var clientID: String
    @Option(
        name: .customLong("client-secret-file"),
        help: ArgumentHelp("A file with the client secret (confidential clients).", valueName: "FILE"))
    var clientSecretFile: String?
    @Option(
        name: .customLong("client-secret-env"),
        help: ArgumentHelp("An environment variable holding the client secret.", valueName: "VAR"))
    var clientSecretEnv: String?
    @Option(
        name: .customLong("subject-token-file"),
        help: ArgumentHelp("Read the subject token from this file (- for standard input).", valueName: "FILE"))
    var subjectTokenFile: String?
    @Option(
        name: .customLong("subject-token-env"),
        help: ArgumentHelp("Read the subject token from this environment variable.", valueName: "VAR"))
    var subjectTokenEnv: String?
    @Option(
        help: ArgumentHelp(
            "Use the workload's own identity token as the subject (as moose login --workload).", valueName: "SOURCE"))
    var workload: String?
    @Option(
        name: .customLong("workload-audience"),
        help: ArgumentHelp(
            "The audience to ask the workload's platform for (default: the issuer).", valueName: "AUDIENCE"))
    var workloadAudience: String?
    @Option(
        name: .customLong("subject-token-type"),
        help: ArgumentHelp(
            "The subject token's type: id_token, jwt, access_token, refresh_token or a URI.", valueName: "TYPE"))
    var subjectTokenType = TokenType.idToken
    @Option(
        name: .customLong("actor-token-file"),
        help: ArgumentHelp(
            "Delegation (RFC 8693 §1.1): read the actor token — who acts for the subject — from this file.",
            valueName: "FILE"))
    var actorTokenFile: String?
    @Option(
        name: .customLong("actor-token-env"),
        help: ArgumentHelp("Delegation: read the actor token from this environment variable.", valueName: "VAR"))
    var actorTokenEnv: String?
    @Option(
        name: .customLong("actor-token-type"),
        help: ArgumentHelp(
            "The actor token's type: id_token, jwt, access_token (default), refresh_token or a URI.", valueName: "TYPE")
    )
    var actorTokenType = TokenType.accessToken
    @Option(
        name: .customLong("requested-token-type"),
        help: ArgumentHelp("The type to ask for (the answer's issued_token_type must match).", valueName: "TYPE"))
    var requestedTokenType: TokenType?
    @Option(help: ArgumentHelp("An audience for the issued token (repeatable).", valueName: "AUDIENCE")) var audience:
        [String] = []
    @Option(help: ArgumentHelp("A resource for the issued token (RFC 8707; repeatable).", valueName: "URL"))
    var resource: [String] = []
    @Option(help: "A scope to ask for (repeatable).") var scope: [String] = []
    @Option(help: "token prints the issued token alone; json adds its type and expiry.") var format = "token"
    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp("Trust the CA certificates in this PEM file for the provider.", valueName: "PEM"))
    var caFile: String?

    func validate() throws {
        let subjects = [subjectTokenFile != nil, subjectTokenEnv != nil, workload != nil].filter({ $0 }).count
        guard subjects == 1 else {
            throw ValidationError(
                "give \(subjects == 0 ? "one" : "only one") of --subject-token-file, --subject-token-env and --workload"
            )
        }
        guard format == "token" || format == "json" else { throw ValidationError("--format takes token or json") }
        guard actorTokenFile == nil || actorTokenEnv == nil else {
            throw ValidationError("give only one of --actor-token-file and --actor-token-env")
        }
        if let problem = IssuerOption.problem(issuer) { throw ValidationError(problem) }
    }

    func run() throws {
        var profile = Profile(name: "exchange", issuer: issuer, clientID: clientID, scopes: scope)
        if let file = clientSecretFile {
            profile.client.credential = .secretFile(SessionPlan.absolute(file), sending: .basic)
        } else if let variable = clientSecretEnv {
            profile.client.credential = .secretVariable(variable, sending: .basic)
        }
        if let caFile { profile.provider.caFile = try CLITransport.caFile(caFile) }
        let subjectType = subjectTokenType.uri
        let requested = requestedTokenType?.uri
        let transport = CurlTransport(caFile: profile.provider.caFile)
        let subject = try subjectSource(transport: transport)
        let actor = try actorToken()
        let actorSource: (@Sendable () async throws -> ExchangeToken)? = actor.map { token in { @Sendable in token } }
        let parameters = AuthorizationParameters(scopes: scope, resources: resource)
        let audiences = audience
        let tokens: TokenSet
        do {
            // The library's manager for the exchange's plan (its client, secret and CA file), keeping
            // nothing: the issued token is printed, never stored.
            let manager: TokenManager
            do {
                manager = try TokenManager(plan: profile, storage: InMemorySessionStorage(), transport: transport)
            } catch let error as OAuthError where error.code == OAuthError.invalidConfiguration {
                throw CLIError.usage(error.message)
            }
            tokens = try CLIBlocking.run {
                try await manager.exchange(
                    parameters: parameters, requestedTokenType: requested, audiences: audiences, actor: actorSource
                ) {
                    ExchangeToken(try await subject(), type: subjectType)
                }
            }
        } catch let error as CLIError {
            throw error
        } catch {
            throw OAuthContext.fail(error)
        }
        try printIssued(tokens)
    }

    /// The subject token: read once here (a file, `-` for stdin, a variable) or asked of the
    /// workload's platform at each call.
    func subjectSource(transport: any HTTPTransport) throws -> @Sendable () async throws -> String {
        if let workload {
            let source = try WorkloadLogin.source(workload, transport: transport)
            let audience = workloadAudience ?? issuer
            return { try await source.token(audience: audience) }
        }
        guard
            let token = try SecretInput.read(
                file: subjectTokenFile, variable: subjectTokenEnv, what: "subject token", standardInput: true)
        else {
            throw CLIError.usage("give one of --subject-token-file, --subject-token-env and --workload")
        }
        return { token }
    }

    /// The actor token (delegation), read once from its file or variable; nil when none is given.
    func actorToken() throws -> ExchangeToken? {
        try SecretInput.read(file: actorTokenFile, variable: actorTokenEnv, what: "actor token").map {
            ExchangeToken($0, type: actorTokenType.uri)
        }
    }

    /// Prints the issued token: alone (checked first), or as JSON with its type and lifetime.
    func printIssued(_ tokens: TokenSet) throws {
        if format == "json" {
            var object: JSONObject = [
                "token": .string(tokens.accessToken), "token_type": .string(tokens.tokenType),
                "issued_token_type": .string(tokens.issuedTokenType)
            ]
            // As `moose token --format json`: Unix seconds.
            object["expires_at"] = .unixSeconds(tokens.expiresAt)
            object["scopes"] = .array(tokens.scopes.map { .string($0) })
            Terminal.out(JSONValue.object(object).serialized())
        } else {
            // Checked (visible ASCII, no spaces) before it reaches a terminal or a script's variable.
            guard TokenCharacters.isVisibleASCII(tokens.accessToken), !tokens.accessToken.utf8.contains(0x20) else {
                throw CLIError.failed("the issued token has characters a token cannot have; not printing it")
            }
            Terminal.out(tokens.accessToken)
        }
    }
}

extension ExchangeCommand {
    /// A token type option's value: `id_token`, `jwt`, `access_token`, `refresh_token`, or a URI
    /// (`ExchangeToken.type(named:)`); anything else is argument-parser's usage error, with the
    /// option's help.
    struct TokenType: ExpressibleByArgument, Sendable {
        /// The token type URI sent.
        let uri: String
        /// The value as given (the help's default).
        let defaultValueDescription: String

        static let idToken = TokenType(uri: ExchangeToken.idTokenType, name: "id_token")
        static let accessToken = TokenType(uri: ExchangeToken.accessTokenType, name: "access_token")

        private init(uri: String, name: String) {
            self.uri = uri
            defaultValueDescription = name
        }

        init?(argument: String) {
            guard let uri = ExchangeToken.type(named: argument) else { return nil }
            self.init(uri: uri, name: argument)
        }
    }
}
