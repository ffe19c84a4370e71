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

struct LoginCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Log in and keep the session (encrypted) in the store.",
        discussion: """
            Authorization code + PKCE with a loopback redirect on 127.0.0.1 (RFC 8252), or --device for the \
            device authorization grant. The browser is $BROWSER if set (a colon-separated list; %s in a command is \
            replaced by the URL), else xdg-open; --no-browser only prints the URL.

            Register this redirect URI with the provider: http://127.0.0.1/callback, any port (RFC 8252 §7.3; \
            a provider that wants the exact URI: http://127.0.0.1:PORT/callback with --port PORT).

            """ + "\n"
                + HelpText.examples(
                    "moose login --issuer https://id.example.com --client-id my-cli",
                    "moose login --device --issuer https://id.example.com --client-id tv",
                    "moose login --profile work --scope openid --scope offline_access",
                    "moose login --client-credentials --issuer https://id.example.com \\",
                    "    --client-id svc --client-secret-env SVC_SECRET"))

    // --issuer and --client-id first: what a first login needs is what `login --help` shows first.
    @Option(help: "The issuer (required the first time, unless --resource discovers it).") var issuer: String?
    @Option(name: .customLong("client-id"), help: "The client id (required the first time).") var clientID: String?
    @OptionGroup var store: StoreOptions
    @Option(
        help: "The profile to create or update (default: \"default\"; with --resource alone, the resource URL).",
        completion: ProfileNames.completion)
    var profile: String?
    @Option(
        help: ArgumentHelp(
            "The RFC 8707 resource (an MCP server, an API) the tokens are for. Without --issuer, everything is discovered from its RFC 9728 metadata and the client is registered when needed.",
            valueName: "URL"))
    var resource: String?
    @Option(
        name: .customLong("client-secret-file"),
        help: ArgumentHelp("A file with the client secret (confidential clients).", valueName: "FILE"))
    var clientSecretFile: String?
    @Option(help: "A scope to request (repeatable; default: the profile's, else openid profile email).") var scope:
        [String] = []
    @Flag(help: "Use the device authorization grant.") var device = false
    @Flag(
        name: .customLong("client-credentials"),
        help:
            "Log in as the client itself (a service, a CI job): the client credentials grant, no browser. The session has no refresh token; moose token gets a new one by the same single flight when it nears expiry."
    )
    var clientCredentials = false
    @Option(
        name: .customLong("client-secret-env"),
        help: ArgumentHelp(
            "An environment variable holding the client secret (read on every grant; nothing on disk).",
            valueName: "VAR"))
    var clientSecretEnv: String?
    @Option(
        name: .customLong("client-auth"),
        help: ArgumentHelp(
            "How the secret is sent: basic (client_secret_basic, default) or post (client_secret_post).",
            valueName: "METHOD"))
    var clientAuth: String?
    @Option(
        name: .customLong("private-key"),
        help: ArgumentHelp(
            "Authenticate with private_key_jwt (RFC 7523): a private key in PEM, or a private JWK whose kid is used (RS256, ES256 or EdDSA).",
            valueName: "FILE"))
    var privateKey: String?
    @Option(
        name: .customLong("key-id"),
        help: ArgumentHelp(
            "The kid to name in the private_key_jwt assertion (a PEM has none; many providers need it).",
            valueName: "KID"))
    var keyID: String?
    @Option(
        help: ArgumentHelp(
            "The audience a client-credentials grant names (for providers that want one).", valueName: "AUDIENCE"))
    var audience: String?
    @Option(
        help: ArgumentHelp(
            "Log in as a workload (a CI job, a pod): its own identity token, from github, gitlab[:VARIABLE], env:VARIABLE, file:PATH or command:PROGRAM, exchanged at the provider; renewed by exchanging again.",
            valueName: "SOURCE"))
    var workload: String?
    @Option(
        name: .customLong("workload-audience"),
        help: ArgumentHelp(
            "The audience to ask the workload's platform for (GitHub Actions; default: the issuer).",
            valueName: "AUDIENCE"))
    var workloadAudience: String?
    @Option(
        name: .customLong("workload-grant"),
        help: ArgumentHelp(
            "How the workload's token is used: token-exchange (RFC 8693, default) or jwt-bearer (RFC 7523).",
            valueName: "GRANT"))
    var workloadGrant: String?
    @Option(
        name: .customLong("subject-token-type"),
        help: ArgumentHelp(
            "The token exchange's subject_token_type: id_token (default), jwt, access_token, or a URI.",
            valueName: "TYPE"))
    var subjectTokenType: String?
    @Option(
        name: .customLong("device-endpoint"),
        help: ArgumentHelp("The device authorization endpoint, when discovery does not list it.", valueName: "URL"))
    var deviceEndpoint: String?
    @Flag(name: .customLong("no-browser"), help: "Print the URL instead of opening a browser.") var noBrowser = false
    @Flag(
        help:
            "Also take the address the browser ends on, pasted here (a shell on another machine than the browser: ssh, a container). On by default with --no-browser at a terminal."
    )
    var paste = false
    @Option(help: "The loopback port for the redirect (default: a random free port).") var port: UInt16?
    @Flag(
        help:
            "Bind the tokens to a new DPoP key (RFC 9449), kept with the session; proofs are then sent with every request."
    )
    var dpop = false
    @Option(
        name: .customLong("dpop-alg"),
        help: ArgumentHelp("The DPoP key's algorithm: ES256 (default), EdDSA or RS256.", valueName: "ALG"))
    var dpopAlgorithm: String?
    @Flag(
        name: .customLong("no-par"),
        help: "Never push the authorization request (RFC 9126), even when the provider offers it.")
    var noPAR = false
    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp(
            "Trust the CA certificates in this PEM file for the provider (a private CA), kept with the profile (default: $SSL_CERT_FILE, else the system's).",
            valueName: "PEM"))
    var caFile: String?
    @Option(
        name: .customLong("pin-public-key"),
        help: ArgumentHelp(
            "Accept the issuer's host only with this server key (SHA-256 of its SubjectPublicKeyInfo, base64; repeat for a backup key), kept with the profile.",
            valueName: "sha256//BASE64")) var pinPublicKey: [String] = []
    @Option(
        help: ArgumentHelp(
            "Seconds to wait for the user: for the browser's redirect (default 300), or with --device for the approval (default: the device code's own lifetime).",
            valueName: "SECONDS"))
    var timeout: Double?

    func run() throws {
        // The config file first: its profile settings and store count for every command, and a
        // file that does not parse is an error before anything else happens.
        // A login by --resource alone is the profile named by the resource, in canonical form (its key).
        var named = self.profile
        if named == nil, let resource, issuer == nil { named = try ResourceLogin.canonical(resource) }
        let resolved = try CLIConfig.resolve(named, store: store)
        // A resource login that did not finish left its client's registration: a plain login finishes it
        // (one given anything a resource login does not take — a grant, credentials, trust — does not).
        let plain = resource == nil && issuer == nil && resolved.settings?.issuer == nil && !shapesTheLogin
        let unfinished = plain ? CLISessions.unfinishedResource(of: resolved.name, store: resolved.store) : nil
        if let resource = resource ?? unfinished, issuer == nil, resolved.settings?.issuer == nil {
            try ResourceLogin(
                store: resolved.store, resource: resource, profile: resolved.name, clientID: clientID, scopes: scope,
                noBrowser: noBrowser, port: port, timeout: timeout
            ).run()
            return
        }
        let settings = try plan(resolved)
        // A first login that fails leaves no store or key behind.
        let made = FirstStore(resolved.store)
        let context = try made.open(resolved.store)
        var loggedIn = false
        defer {
            if !loggedIn { made.undo(after: context.sessions) }
        }
        do {
            // The library owns the login: it makes the client (its trust, its credentials), runs the
            // grant, checks the ID token, and stores the session with its plan.
            let manager = try context.manager(for: settings)
            var request = AuthorizationParameters(scopes: settings.scopes)
            // The manager names a client-credentials login's audience itself.
            if let audience = settings.audience, settings.grant != .clientCredentials {
                request.extra.append(("audience", audience))
            }
            try logIn(settings, manager: manager, parameters: request)
            loggedIn = true
            // The settings outlive the store: a lost key, a damaged row or a logout keeps them here.
            KeptSettings.keep(settings, store: resolved.store)
            try report(settings, in: context)
        } catch let error as OAuthError
            where error.code == OAuthError.invalidClient && settings.client.credential == .none
        {
            // A confidential client logged in as a public one: the token endpoint wants its credentials.
            // A public client refused so at a browser login: a provider that registered one exact
            // redirect URI (Glewlwyd) refuses the code sent to another port the same way.
            let port =
                settings.grant == .authorizationCode(loopbackPort: nil)
                ? "; a public client may instead have one registered redirect URI: give its port with --port PORT" : ""
            throw CLIError.failed(
                OAuthContext.text(
                    error,
                    next: "the provider wants this client's credentials: give --client-secret-file FILE "
                        + "(or --client-secret-env VARIABLE, or --private-key FILE)\(port)"))
        } catch {
            throw OAuthContext.fail(error, profile: settings.name)
        }
    }

    /// Whether an option says what a resource login (`ResourceLogin`) does not take: a grant, a client
    /// credential, DPoP, PAR, trust, an audience or a pasted address.
    var shapesTheLogin: Bool {
        device || clientCredentials || workload != nil || clientSecretFile != nil || clientSecretEnv != nil
            || privateKey != nil || dpop || dpopAlgorithm != nil || caFile != nil || !pinPublicKey.isEmpty || paste
            || noPAR || audience != nil
    }

    /// The session's plan: the library's resolution (`SessionPlan.resolve`) of the options, the config
    /// file's profile and what an earlier login of the profile kept, in that order; every usage error
    /// is thrown here, before anything is created.
    func plan(_ resolved: ResolvedProfile) throws -> Profile {
        let profile = resolved.name
        // What an earlier login kept — read without creating anything: a usage error leaves no store
        // (or key) behind. A damaged row is not read: this login replaces it. The settings file beside
        // the config keeps them when the store cannot be opened (a lost key).
        let kept = CLISessions.plan(of: profile, store: resolved.store)
        let settings: Profile
        do {
            settings = try SessionPlan.resolve(
                name: profile, given: try given(), profile: resolved.settings, kept: kept)
        } catch let error as OAuthError where error.code == OAuthError.invalidConfiguration {
            throw CLIError.usage(error.message + Self.hint(for: error, profile: profile))
        }
        if let file = settings.provider.caFile { _ = try CLITransport.caFile(file, option: "the CA file") }
        // Pins given now (an option, the config file) for a plain-http issuer would never apply.
        let pinned = !pinPublicKey.isEmpty || resolved.settings?.publicKeyPins?.isEmpty == false
        if pinned, settings.issuer.lowercased().hasPrefix("http://") {
            throw CLIError.usage(
                "public-key pins pin a TLS server's key; \(Terminal.safe(settings.issuer)) is plain http, which has "
                    + "none: give the issuer's https URL, or no pins")
        }
        return settings
    }

    /// What the options say of the plan, each checked as the option it is (a usage error naming it).
    func given() throws -> ProfileFile.ProfileSettings {
        guard [clientCredentials, device, workload != nil].filter({ $0 }).count <= 1 else {
            throw CLIError.usage("give only one of --client-credentials, --device and --workload")
        }
        guard [clientSecretFile != nil, clientSecretEnv != nil, privateKey != nil].filter({ $0 }).count <= 1 else {
            throw CLIError.usage("give only one of --client-secret-file, --client-secret-env and --private-key")
        }
        if let clientAuth, clientAuth != "basic", clientAuth != "post" {
            throw CLIError.usage("--client-auth takes basic or post")
        }
        if let workloadGrant, !WorkloadLogin.grants.contains(workloadGrant) {
            throw CLIError.usage("--workload-grant takes token-exchange or jwt-bearer")
        }
        if let subjectTokenType, ExchangeToken.type(named: subjectTokenType) == nil {
            throw CLIError.usage("--subject-token-type takes id_token, jwt, access_token, refresh_token or a URI")
        }
        if let deviceEndpoint, URL(string: deviceEndpoint)?.scheme == nil {
            throw CLIError.usage("--device-endpoint \(deviceEndpoint) is not a URL")
        }
        if let workload { _ = try WorkloadLogin.source(workload, transport: CurlTransport()) }
        var given = ProfileFile.ProfileSettings(
            issuer: issuer, clientID: clientID, scopes: scope.isEmpty ? nil : scope, resource: resource,
            dpop: try Self.dpopAlgorithm(dpopAlgorithm ?? (dpop ? JWTAlgorithm.es256.rawValue : nil))?.rawValue,
            clientSecretFile: clientSecretFile, caFile: try caFile.map { try CLITransport.caFile($0) },
            // Checked here for the option's own message (a pin's form does not depend on the host).
            publicKeyPins: try CLITransport.pins(pinPublicKey))
        given.grant = clientCredentials ? .clientCredentials : workload != nil ? .workload : device ? .deviceCode : nil
        given.clientSecretEnv = clientSecretEnv
        given.clientAuth = clientAuth
        given.privateKeyFile = privateKey
        given.privateKeyID = keyID
        given.audience = audience
        given.workload = workload
        given.workloadAudience = workloadAudience
        given.workloadGrant = workloadGrant
        given.subjectTokenType = subjectTokenType
        given.loopbackPort = port
        given.deviceEndpoint = deviceEndpoint
        return given
    }

    /// The options that give what a resolution error found missing (`SessionPlan.Missing`).
    static func hint(for error: OAuthError, profile: String) -> String {
        switch error.underlying as? SessionPlan.Missing {
        case .issuerAndClientID?:
            ": give --issuer URL and --client-id ID (or a [profiles.\(profile)] section with issuer and "
                + "client_id in \(CLIConfig.pathForMessages), or --resource alone to discover both)"
        case .clientCredentials?: " (--client-secret-file FILE, --client-secret-env VAR or --private-key FILE)"
        case nil: ""
        }
    }

    /// The DPoP algorithm a plan names, if any (ES256, EdDSA or RS256).
    static func dpopAlgorithm(_ name: String?) throws -> JWTAlgorithm? {
        guard let name else { return nil }
        guard let chosen = JWTAlgorithm(rawValue: name), DPoPKey.supportedAlgorithms.contains(chosen) else {
            throw CLIError.usage("--dpop-alg takes ES256, EdDSA or RS256")
        }
        return chosen
    }

    /// Asks the manager for the plan's login: a workload's, client credentials, the device flow or the browser.
    func logIn(_ settings: Profile, manager: TokenManager, parameters: AuthorizationParameters) throws {
        switch settings.grant {
        case .workload:
            try CLIBlocking.run { _ = try await manager.login(with: .workload, parameters: parameters) }
        case .clientCredentials:
            try CLIBlocking.run { _ = try await manager.login(with: .clientCredentials, parameters: parameters) }
        case .deviceCode:
            try deviceLogin(manager: manager, parameters: parameters, issuer: settings.issuer)
        case .authorizationCode(let port):
            try browserLogin(manager: manager, parameters: parameters, port: port)
        }
    }

    /// The library's terminal sign-in, set by the options.
    func signIn(port: UInt16? = nil) -> TerminalSignIn {
        var signIn = TerminalSignIn(
            name: "moose", opensBrowser: !noBrowser, paste: paste ? .always : .whenNoBrowser, port: port,
            timeout: timeout)
        signIn.retry = "run the same moose login --device command again"
        return signIn
    }

    /// The device flow (RFC 8628): the code and how long it lives on the terminal, the page in the browser.
    func deviceLogin(manager: TokenManager, parameters: AuthorizationParameters, issuer: String) throws {
        let signIn = self.signIn()
        do {
            try CLIBlocking.run { _ = try await signIn.logInWithDevice(manager, parameters: parameters) }
        } catch let error as OAuthError where error.code == OAuthError.missingEndpoint {
            // Usage: the command needs an option the provider's metadata did not fill in (exit 2).
            throw CLIError.usage(
                "\(Terminal.safe(issuer))'s discovery document lists no device authorization endpoint; "
                    + "name it with --device-endpoint URL (the provider's documentation gives it)")
        } catch let error as OAuthError where error.code == OAuthError.timedOut && timeout != nil {
            throw CLIError.failed(
                error.message + " (--timeout); run the same moose login --device command again (a new code)")
        }
    }

    /// Authorization code + PKCE through the browser and the loopback redirect, or a pasted address
    /// (the library's `TerminalSignIn`: no silent waits).
    func browserLogin(manager: TokenManager, parameters: AuthorizationParameters, port: UInt16?) throws {
        let signIn = self.signIn(port: port)
        let pasting = paste || (noBrowser && Terminal.stdinIsTerminal)
        if noBrowser, !pasting {
            Terminal.error(
                "moose: standard input is not a terminal, so no address can be pasted here (--paste reads it from "
                    + "standard input); waiting for the browser to come back to 127.0.0.1")
        }
        let pushed: PushedAuthorizationPolicy = noPAR ? .never : .whenAdvertised
        do {
            try CLIBlocking.run {
                _ = try await signIn.logIn(manager, parameters: parameters, pushedAuthorization: pushed)
            }
        } catch let error as OAuthError where error.code == OAuthError.timedOut && (pasting || noBrowser) {
            // Not "add --no-browser and paste": this login took a pasted address already, or had
            // --no-browser and no terminal to paste at (--paste reads standard input).
            let how =
                pasting
                ? ", pasting the whole address the browser ends on"
                : "; with the browser on another machine, add --paste and give it the address the browser ends on"
            throw CLIError.failed(
                OAuthContext.text(
                    error,
                    next: "run the same moose login command again and finish signing in sooner "
                        + "(or give --timeout SECONDS)\(how)"))
        } catch let error as OAuthError where error.code == OAuthError.pasteRefused {
            throw CLIError.usage(
                error.message
                    + ": run the same moose login command again and paste the whole address the browser ends on")
        } catch let error as OAuthError where error.code == OAuthError.noBrowser {
            throw CLIError.failed(
                CLIError.noBrowserHere
                    + ": run the same moose login command with --paste (it prints a new URL to open in "
                    + "any browser, and reads the address the browser ends on from standard input), or with "
                    + "--device, or set BROWSER to a browser command")
        }
    }

    /// One line says who logged in, read from the session the manager stored.
    func report(_ settings: Profile, in context: OAuthContext) throws {
        guard let (session, _) = try context.loadOrFail(settings.name) else {
            throw CLIError.failed(
                "the login succeeded but its session is not in the store (another process logged out?)")
        }
        let tokens = session.tokens
        let binding =
            tokens.dpopKey.map {
                tokens.isDPoPBound
                    ? "; DPoP-bound (\($0.algorithm))" : "; DPoP proofs sent, but the provider issued bearer tokens"
            } ?? ""
        // Who, when the provider said (an ID token, UserInfo) or the grant does (a client, a workload).
        let who = SessionSummary(key: settings.name, session: session).principal.map { " as \($0)" } ?? ""
        Terminal.out(
            "Logged in to \(settings.issuer)\(who) (profile \(settings.name)); access token \(expiryText(tokens)); "
                + "scopes: \(tokens.scopes.joined(separator: " "))\(binding)")
    }
}

extension LoginCommand {
    /// `--pin-public-key` pins the issuer's host, so a login that discovers its issuer from `--resource`
    /// alone refuses it rather than log in unpinned.
    func validate() throws {
        if let timeout, !(timeout.isFinite && timeout >= 0 && timeout <= 366 * 86_400) {
            throw ValidationError("--timeout takes a number of seconds (up to a year)")
        }
        if !pinPublicKey.isEmpty, resource != nil, issuer == nil {
            throw ValidationError(
                "--pin-public-key pins the issuer's host: give --issuer with it (a login by --resource alone is not pinned)"
            )
        }
    }
}
