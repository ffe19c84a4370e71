import ArgumentParser
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseResourceServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `moose verify`: checks an access token as a resource server would — MooseResourceServer's
/// `ResourceServer`, configured from the issuer's discovery document (its `jwks_uri` for RFC 9068 JWT
/// access tokens, its `introspection_endpoint` for opaque ones with `--introspect`) — and exits 0 when
/// the token is accepted, 1 when it is refused (the refusal's code and reason on standard error).
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check an access token as a resource server would (RFC 9068 JWT, or RFC 7662 introspection).",
        discussion: """
            The token comes from standard input (- or no argument), from --token-env VAR, or from the \
            argument (which other users of this machine can see in ps). A leading "Bearer " is ignored. \
            The token is presented as Bearer: a DPoP-bound token is refused, as a resource server must.

            The issuer's discovery document gives its keys (jwks_uri) and, with --introspect, its \
            introspection_endpoint, where opaque tokens are checked as --client-id. Without --alg, any \
            asymmetric algorithm (RS, PS, ES, EdDSA) is accepted, each with keys of its own kind only.

            Exit status: 0 valid (the principal on standard output); 1 refused (code and reason on \
            standard error), or the issuer's answer unusable; 2 usage; 3 the issuer, its keys or its \
            introspection endpoint could not be reached: try again later.

            """ + "\n"
                + HelpText.examples(
                    "moose token | moose verify --issuer https://id.example.com \\",
                    "    --audience https://api.example.com --scope api.read -",
                    "moose verify --issuer https://id.example.com --audience my-api \\",
                    "    --token-env TOKEN --json",
                    "moose verify --issuer https://id.example.com --audience my-api \\",
                    "    --introspect --client-id my-api --client-secret-env SECRET -"))

    @Argument(help: "The access token, or - for standard input (the default when input is piped).")
    var token: String?

    @Option(
        name: .customLong("token-env"),
        help: ArgumentHelp("Read the token from this environment variable.", valueName: "VAR"))
    var tokenEnv: String?

    @Option(
        help: ArgumentHelp(
            "The issuer the token must come from (iss, exactly); its discovery document is read.", valueName: "URL"))
    var issuer: String

    @Option(
        name: [.customLong("audience"), .customLong("aud")],
        help: ArgumentHelp(
            "This resource's identifier (RFC 8707): the token's aud must contain it.", valueName: "RESOURCE"))
    var audience: String

    @Option(help: ArgumentHelp("A scope the token must grant (repeatable).", valueName: "SCOPE"))
    var scope: [String] = []

    @Option(
        help: ArgumentHelp(
            "Accept this signing algorithm (repeatable; default: every asymmetric one).", valueName: "ALG"))
    var alg: [String] = []

    @Option(
        name: .customLong("token-type"),
        help: ArgumentHelp(
            "Accept this typ (repeatable; default at+jwt, RFC 9068; JWT for providers that send that).",
            valueName: "TYP"))
    var tokenType: [String] = []

    @Option(help: "Clock-skew tolerance for exp, nbf and iat, in seconds.")
    var leeway: Double = 30

    @Flag(
        help:
            "Check opaque tokens by introspection (RFC 7662) at the issuer's introspection_endpoint (needs --client-id)."
    )
    var introspect = false

    @Option(name: .customLong("client-id"), help: "With --introspect: the resource server's client id at the issuer.")
    var clientID: String?

    @Option(
        name: .customLong("client-secret-env"),
        help: ArgumentHelp("With --introspect: a variable holding the client secret.", valueName: "VAR"))
    var clientSecretEnv: String?

    @Option(
        name: .customLong("client-secret-file"),
        help: ArgumentHelp("With --introspect: a file holding the client secret.", valueName: "FILE"))
    var clientSecretFile: String?

    @Option(
        name: .customLong("client-auth"),
        help: ArgumentHelp("With --introspect: basic (client_secret_basic) or post.", valueName: "basic|post"))
    var clientAuth = "basic"

    @Flag(
        help:
            "Print one JSON object (valid, subject, client_id, scopes, expires_at… or error and reason) on standard output."
    )
    var json = false

    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp(
            "Trust the CA certificates in this PEM file for the issuer (default: $SSL_CERT_FILE, else the system's).",
            valueName: "PEM"))
    var caFile: String?

    func validate() throws {
        if let problem = IssuerOption.problem(issuer) { throw ValidationError(problem) }
        guard !audience.isEmpty else {
            throw ValidationError("--audience is empty: name this resource (https://api.example.com)")
        }
        guard leeway >= 0, leeway.isFinite, leeway <= 3600 else {
            throw ValidationError("--leeway must be 0 to 3600 seconds")
        }
        for name in alg where !JWTAlgorithm.asymmetric.contains(where: { $0.rawValue == name }) {
            throw ValidationError(
                "--alg \(Terminal.safe(name)): access tokens are accepted only with an asymmetric algorithm "
                    + "(RS256…RS512, PS256…PS512, ES256…ES512, EdDSA)")
        }
        guard token == nil || tokenEnv == nil else {
            throw ValidationError("give the token once: as TOKEN (or -) or with --token-env")
        }
        guard clientAuth == "basic" || clientAuth == "post" else {
            throw ValidationError("--client-auth takes basic or post")
        }
        let secrets = [clientSecretEnv, clientSecretFile].compactMap { $0 }.count
        if introspect {
            guard clientID != nil, secrets == 1 else {
                throw ValidationError(
                    "--introspect needs --client-id and one of --client-secret-env and --client-secret-file")
            }
        } else if clientID != nil || secrets > 0 {
            throw ValidationError("--client-id and its secret are for --introspect")
        }
    }

    func run() throws {
        let text = try readToken()
        var transport = CurlTransport(caFile: try caFile.map { try CLITransport.caFile($0) })
        transport.maximumResponseSize = 1 << 20
        let server = try resourceServer(transport: transport)
        let scopes = scope
        let result: Result<VerifiedPrincipal, ResourceServerRefusal> = try CLIBlocking.run {
            do throws(ResourceServerRefusal) {
                return .success(try await server.verify(accessToken: text, requiredScopes: scopes))
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let principal):
            Terminal.out(json ? principal.jsonReport.serialized() : principal.textReport(resource: audience))
        case .failure(let refusal): try report(refusal, token: text)
        }
    }

    /// The token from `--token-env`, standard input or the argument (`ResourceServer.accessToken(in:)`:
    /// trimmed, a leading `Bearer ` dropped). Only an absent or empty token is a usage error; anything
    /// else is the verifier's to judge.
    func readToken() throws -> String {
        let raw: [UInt8]
        if let tokenEnv {
            guard let value = ProcessInfo.processInfo.environment[tokenEnv], !value.isEmpty else {
                throw CLIError.usage("the environment variable \(Terminal.safe(tokenEnv)) (the token) is not set")
            }
            raw = Array(value.utf8)
        } else if let token, token != "-" {
            raw = Array(token.utf8)
        } else {
            if token == nil, Terminal.stdinIsTerminal {
                throw CLIError.usage(
                    "no token: pipe it in (-), name a variable with --token-env, or pass it as an argument")
            }
            guard let bytes = try Terminal.readStandardInput(limit: 1 << 20) else {
                throw CLIError.usage("standard input is larger than 1 MiB; that is not an access token")
            }
            raw = bytes
        }
        guard let token = ResourceServer.accessToken(in: raw) else { throw CLIError.usage("the token is empty") }
        return token
    }

    /// The verifier a resource server for `--audience` at this issuer would run, its metadata discovered
    /// now (`ResourceServer(discovering:…)`). Unreachable (network, timeout, 5xx): exit 3; anything else
    /// exit 1, as every command says it.
    func resourceServer(transport: CurlTransport) throws -> ResourceServer {
        let algorithms = alg.isEmpty ? JWTAlgorithm.asymmetric : Set(alg.compactMap(JWTAlgorithm.init(rawValue:)))
        // --introspect comes with --client-id and its secret (validate()). Neither the secret nor the
        // token is kept: one process, one check.
        let introspection = try introspectionClient()
        let (issuer, audience, leeway) = (self.issuer, self.audience, self.leeway)
        let tokenTypes = tokenType.isEmpty ? ["at+jwt"] : tokenType
        do {
            return try CLIBlocking.run {
                try await ResourceServer(
                    discovering: issuer, resource: audience, algorithms: algorithms, transport: transport,
                    introspection: introspection
                ) {
                    $0.acceptedTokenTypes = tokenTypes
                    $0.leeway = leeway
                }
            }
        } catch let error as OAuthError where error.code == OAuthError.missingEndpoint {
            // The issuer's documents are fine; they lack what this check needs.
            throw CLIError.failed(
                error.message.replacing("(opaque tokens: introspection)", with: "(opaque tokens: --introspect)"))
        } catch let error as OAuthError {
            let context = "cannot use issuer \(issuer)"
            if let failure = ConnectionFailure.cliError(error, context: context) { throw failure }
            if error.code == OAuthError.transient {
                Terminal.error(
                    "moose: error: \(context): \(OAuthContext.text(error, next: "check the network (or the issuer's status) and try again"))"
                )
                throw Status.unreachable
            }
            // The CLI's words for the rest (a TLS error names --ca-file), after what was being done.
            let mapped = OAuthContext.fail(error)
            if let failure = mapped as? CLIError {
                throw CLIError(message: "\(context): \(failure.message)", status: failure.status)
            }
            throw mapped
        }
    }

    /// The introspection client `--introspect` names (validate() makes sure of its id and secret), or
    /// `nil` without it. Its secret is read from its variable or file, whitespace around it dropped.
    func introspectionClient() throws -> ResourceServer.IntrospectionClient? {
        guard introspect else { return nil }
        guard let clientID else { throw CLIError.usage("--introspect needs --client-id (the introspecting client)") }
        guard
            let secret = try SecretInput.read(
                file: clientSecretFile, variable: clientSecretEnv, what: "client secret", limit: 64 * 1024)
        else {
            throw CLIError.usage(
                "--introspect needs the client's secret: --client-secret-env VAR or --client-secret-file FILE")
        }
        return ResourceServer.IntrospectionClient(
            clientID: clientID, clientSecret: secret, authentication: clientAuth == "post" ? .post : .basic)
    }

    /// A refused token: the code and reason on standard error (and `--json` on standard output), exit
    /// 1; a token that could not be checked now (keys or introspection unreachable), exit 3.
    func report(_ refusal: ResourceServerRefusal, token: String) throws {
        if json { Terminal.out(refusal.jsonReport.serialized()) }
        if refusal.code == ResourceServerRefusal.temporarilyUnavailable {
            // The endpoint refusing this command's own client (HTTP 4xx) is no outage: exit 1, what to check.
            if let status = refusal.introspectionStatus, (400..<500).contains(status) {
                Terminal.error(
                    "moose: error: the token could not be checked: \(refusal.reason); the issuer refused the introspection "
                        + "client: check --client-id, its secret and --client-auth [\(refusal.code)]")
                throw Status.failed
            }
            Terminal.error(
                "moose: error: the token could not be checked now: \(refusal.reason); try again later [\(refusal.code)]"
            )
            throw Status.unreachable
        }
        var line = "moose: refused: \(refusal.code): \(refusal.reason)"
        // A token that is no JWT may be an opaque one: only introspection can check it.
        if !introspect, !ResourceServer.isCompactJWS(token), refusal.code != ResourceServerRefusal.invalidRequest {
            line +=
                "; an opaque access token (not a JWT) is checked by introspection: add --introspect --client-id ID "
                + "--client-secret-env VAR"
        }
        if refusal.code == ResourceServerRefusal.insufficientScope {
            line += " (needed: \(scope.joined(separator: " ")))"
        }
        Terminal.error(line)
        throw Status.failed
    }
}
