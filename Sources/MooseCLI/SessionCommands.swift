import ArgumentParser
import Dispatch
import Synchronization
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

extension Status {
    /// The identity provider could not be reached (try again later).
    static let unreachable = ExitCode(3)
}

/// What every session command shares: the store, the transport, discovery and the flows.
struct OAuthContext {
    let sessions: CLISessions
    let transport: any HTTPTransport = CLITransport.make(caFile: nil)

    init(options: StoreOptions, create: Bool) throws {
        sessions = try CLISessions(options: options, create: create)
    }

    init(sessions: CLISessions) {
        self.sessions = sessions
    }

    /// The stored session of `profile` and its profile settings, if any; a store that cannot be
    /// read is an error (exit 1), never "no session".
    func loadOrFail(_ profile: String) throws -> (session: OAuthSession, profile: Profile)? {
        let stored: StoredSession?
        do { stored = try sessions.load(profile) } catch { throw OAuthContext.fail(error, profile: profile) }
        guard let stored else { return nil }
        return (stored.session, Profile.of(stored.session, key: profile))
    }

    /// How this command's clients are made (Sendable: the coordinator's refresher makes one when,
    /// and only when, it has to refresh — discovery never runs before the coordinator could adopt
    /// another process's tokens).
    var clients: CLIClients { CLIClients(transport: transport, fileStore: sessions.fileStore) }

    /// The client of `profile` (discovery, then its own id and secret file, or — for a client Moose
    /// registered (RFC 7591) — the registration kept with the session), for the synchronous commands.
    func client(for profile: Profile, registration: RegisteredClient? = nil) throws -> OAuthClient {
        let clients = self.clients
        return try CLIBlocking.run { try await clients.client(for: profile, registration: registration) }
    }

    /// The ID-token validator for `client` (`SessionEngine`'s one factory), its JWKS kept in the file store.
    func validator(for client: OAuthClient) -> IDTokenValidator? { clients.validator(for: client) }

    /// The one object every CLI refresh goes through (`moose token`, `moose refresh`): the session
    /// engine's coordinator, with the store's lease across processes; the refresh step discovers the
    /// provider and makes the session's client only when a refresh is really needed.
    func coordinator(for session: OAuthSession, profile: Profile) -> RefreshCoordinator {
        let clients = self.clients
        let name = profile.name
        return engine(profile.name).coordinator(current: session, client: { stored in
            let client = try await clients.client(for: Profile.of(stored, key: name), registration: stored.registration)
            return (client, clients.validator(for: client))
        }, renew: { stored, client in
            // A workload session is renewed by a new exchange of a fresh identity token.
            let profile = Profile.of(stored, key: name)
            guard profile.workload != nil else { return nil }
            return try await WorkloadLogin.tokens(profile: profile, client: client)
        })
    }

    /// The session engine for `profile` on this command's store.
    func engine(_ profile: String) -> SessionEngine { SessionEngine(key: profile, storage: sessions.storage) }

    /// Runs `body` on the coordinator and, before the process exits, writes any rotated tokens a
    /// failed store write left in memory (the coordinator's background retry dies with the
    /// process): a rotated refresh token is never dropped silently. If the store still refuses
    /// them, the command fails and says so.
    static func refreshing(_ coordinator: RefreshCoordinator,
                           _ body: @escaping @Sendable (RefreshCoordinator) async throws -> AccessToken) throws {
        let persisted = try CLIBlocking.run { () async throws -> Bool in
            _ = try await body(coordinator)
            guard await coordinator.hasPendingWrite else { return true }
            return await coordinator.persistPendingWrite(timeout: 5)
        }
        guard persisted else {
            throw CLIError.failed("the provider rotated the tokens but the store refused them for 5 s; "
                                  + "the session may need a new login (check the store with moose store check)")
        }
    }

    /// Maps library errors to the CLI's exit statuses and messages: plain words and the next step
    /// first, the library's code last, in brackets (for a bug report or a search). `profile` names the
    /// session concerned, for the next step's command line.
    static func fail(_ error: any Error, profile: String? = nil) -> any Error {
        if let error = error as? OAuthError {
            if let failure = ConnectionFailure.cliError(error) { return failure }
            if error.code == OAuthError.sessionDamaged {
                let option = profile.map { " --profile \(Terminal.safe($0))" } ?? ""
                return CLIError.failed(text(error, next: "run moose login\(option) to replace it, or moose logout\(option) to remove it "
                                                  + "(other profiles are not affected)"))
            }
            if error.code == OAuthError.transient {
                Terminal.error("moose: error: \(text(error, next: "check the network (or the provider's status) and try again"))")
                return Status.unreachable
            }
            if error.code == OAuthError.invalidClient, !error.message.contains("credentials were refused") {
                return CLIError.failed(text(error, next: "the client's credentials were refused: check the client id, its secret or key, and the key's kid"))
            }
            if error.code == OAuthError.renewalRefused {
                return CLIError.failed(text(error, next: "check the workload's token source (or the client's credentials); the next moose token tries again"))
            }
            if error.code == OAuthError.tls, !error.message.contains("is not one of the pinned keys") {
                return CLIError.failed(text(error, next: "if the provider's certificate comes from a private CA, pass --ca-file PEM "
                                                    + "(or set SSL_CERT_FILE); otherwise its certificate is wrong or expired"))
            }
            return CLIError.failed(text(error))
        }
        if let error = error as? SecretStoreError { return StoreOptions.cliError(error) }
        return error
    }

    /// `error` for a person: its message (and the provider's own error), then `next`, then the code.
    static func text(_ error: OAuthError, next: String? = nil) -> String {
        var text = error.message
        if let oauthError = error.oauthError { text += " (\(oauthError)\(error.errorDescription.map { ": \($0)" } ?? ""))" }
        if let next { text += "; \(next)" }
        return text + " [\(error.code)]"
    }
}

/// The CLI's HTTP transport: libcurl, trusting `--ca-file` (or a profile's `ca_file`), else
/// `$SSL_CERT_FILE` (the variable OpenSSL, curl's tool, Python and Go read), else the system's CAs.
enum CLITransport {
    static func make(caFile: String?) -> CurlTransport {
        let names: [String] = ["SSL_CERT_FILE", "CURL_CA_BUNDLE"]
        let environment = names.lazy.compactMap { name in getenv(name).map { String(cString: $0) } }.first { !$0.isEmpty }
        return CurlTransport(caFile: caFile ?? environment)
    }

    /// `path` checked as a readable file, made absolute (a profile is used from any directory later).
    static func caFile(_ path: String, option: String = "--ca-file") throws -> String {
        let absolute = LoginCommand.absolute(path)
        guard access(absolute, R_OK) == 0 else {
            throw CLIError.usage("\(option) \(path): no such readable file (a PEM file of the CA certificates to trust)")
        }
        return absolute
    }
}

/// Makes a profile's client and ID-token validator; Sendable, so a coordinator's refresher can
/// make them when it refreshes.
struct CLIClients: Sendable {
    let transport: any HTTPTransport
    let fileStore: SecretStore?

    /// How `profile`'s client authenticates, read afresh on every use (a rotated secret file or
    /// variable is picked up): the plan's references resolved (`SessionPlan.clientAuthentication`), an
    /// unreadable source a usage error.
    static func authentication(for profile: Profile) throws -> ClientAuthentication {
        do {
            return try profile.clientAuthentication()
        } catch let error as OAuthError where error.code == OAuthError.invalidConfiguration {
            throw CLIError.usage(error.message)
        }
    }

    func client(for profile: Profile, registration: RegisteredClient?) async throws -> OAuthClient {
        let transport = try CLITransport.make(for: profile) ?? self.transport
        let metadata = try await Discovery(transport: transport).metadata(for: profile.issuer, overrides: profile.endpoints)
        var authentication = try Self.authentication(for: profile)
        if let registration, registration.clientID.utf8.elementsEqual(profile.clientID.utf8),
           registration.issuer.utf8.elementsEqual(metadata.issuer.utf8) {
            authentication = registration.authentication
        }
        var client = OAuthClient(metadata: metadata, clientID: profile.clientID, authentication: authentication, transport: transport)
        client.resource = profile.resource
        return client
    }

    /// `SessionEngine`'s validator, its JWKS kept in a file store so a new process does not refetch it
    /// while its keys still match (with a PostgreSQL store each process fetches it: the database holds
    /// sessions only).
    func validator(for client: OAuthClient) -> IDTokenValidator? {
        guard let jwksURI = client.metadata.jwksURI else { return nil }
        let name = jwksURI.absoluteString
        let persistence = fileStore.map { store in JWKSCache.Persistence(
            load: {
                guard let bytes = try? store.get(namespace: "moose.jwks", name: name), bytes.count > 8 else { return nil }
                let seconds = bytes.prefix(8).reduce(0) { $0 << 8 | Int64($1) }
                return (Array(bytes.dropFirst(8)), Date(timeIntervalSince1970: TimeInterval(seconds)))
            },
            save: { document, fetchedAt in
                let seconds = Int64(fetchedAt.timeIntervalSince1970)
                let stamp = (0..<8).map { UInt8(truncatingIfNeeded: seconds >> (56 - 8 * $0)) }
                try? store.put(stamp + document, namespace: "moose.jwks", name: name)
            }) }
        return SessionEngine.idTokenValidator(for: client, persistence: persistence)
    }
}

func expiryText(_ tokens: TokenSet) -> String {
    guard let expiresAt = tokens.expiresAt else { return "no expiry given" }
    let left = expiresAt.timeIntervalSinceNow
    return left > 0 ? "valid for \(DurationText.describe(left))" : "expired \(DurationText.describe(-left)) ago"
}

/// Opens `url` in the user's browser: `$BROWSER` (a command; the URL is its last argument) or xdg-open.
func openBrowser(_ url: URL) {
    let setting = getenv("BROWSER").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "xdg-open"
    // $BROWSER is a colon-separated list (the freedesktop convention): the first that starts is used.
    let commands = BrowserCommand.list(setting)
    startBrowser(commands, url: url.absoluteString)
}

/// `$BROWSER` read as the freedesktop convention has it.
enum BrowserCommand {
    /// The commands in `setting` (colon-separated), empty entries dropped.
    static func list(_ setting: String) -> [String] {
        setting.split(separator: ":").map(String.init).filter { $0.contains { $0 != " " } }
    }

    /// The argv for one command: its words, each `%s` replaced by the URL inside its own argument (`%%`
    /// is a `%`), and the URL appended as a last argument when no word had `%s`. Never a shell.
    static func argv(_ command: String, url: String) -> [String] {
        var substituted = false
        var words: [String] = command.split(separator: " ").map { word in
            var out = ""
            var rest = Substring(word)
            while let percent = rest.firstIndex(of: "%") {
                out += rest[..<percent]
                let next = rest.index(after: percent)
                if next < rest.endIndex, rest[next] == "s" {
                    out += url; substituted = true; rest = rest[rest.index(after: next)...]
                } else if next < rest.endIndex, rest[next] == "%" {
                    out += "%"; rest = rest[rest.index(after: next)...]
                } else {
                    out += "%"; rest = rest[next...]
                }
            }
            return out + rest
        }
        if !substituted { words.append(url) }
        return words
    }
}

/// Starts the first of `commands` that starts; one that exits with a failure (xdg-open with "no method
/// available") is reported at once, with the URL to open by hand, and the next one is tried.
private func startBrowser(_ commands: [String], url: String) {
    guard let command = commands.first else { return }
    let words = BrowserCommand.argv(command, url: url)
    guard !words.isEmpty else { return startBrowser(Array(commands.dropFirst()), url: url) }
    var pid = pid_t()
    let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    defer { posix_spawn_file_actions_destroy(&actions) }
    // The browser may outlive moose by days: it gets stdin, /dev/null and stderr, nothing else — not
    // the loopback listener (it would keep the port bound and could take the redirect itself), not
    // the store, not a connection to the provider.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    // The default signal mask and dispositions, not those of the thread that starts it (a concurrency
    // pool thread blocks every signal): a browser or wrapper that kept them would ignore TERM and INT.
    guard ChildProcess.closeInheritedDescriptors(&actions, &attributes), ChildProcess.defaultSignals(&attributes) else {
        Terminal.error("moose: not starting the browser (this C library cannot close moose's descriptors in it); open the URL above by hand")
        return
    }
    let name = Terminal.safe(words[0])
    if posix_spawnp(&pid, words[0], &actions, &attributes, argv, environ) != 0 {
        Terminal.error("moose: could not start the browser (\(name)); open the URL above by hand")
        startBrowser(Array(commands.dropFirst()), url: url)
        return
    }
    // Watch it: a launcher that gives up (a non-zero exit, a signal) is reported while moose still
    // waits for the redirect, and the next command in $BROWSER is tried. One that keeps running is a
    // browser; its exit whenever it comes is only reaped here.
    let started = pid
    let rest = Array(commands.dropFirst())
    DispatchQueue(label: "moose.browser.watch").async {
        var status: Int32 = 0
        while waitpid(started, &status, 0) == -1, errno == EINTR {}
        let exitedCleanly = (status & 0x7f) == 0 && ((status >> 8) & 0xff) == 0
        guard !exitedCleanly else { return }
        Terminal.error("moose: the browser command (\(name)) failed; open the URL above by hand")
        startBrowser(rest, url: url)
    }
}

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

            """ + "\n" + HelpText.examples(
                "moose login --issuer https://id.example.com --client-id my-cli",
                "moose login --device --issuer https://id.example.com --client-id tv",
                "moose login --profile work --scope openid --scope offline_access",
                "moose login --client-credentials --issuer https://id.example.com \\",
                "    --client-id svc --client-secret-env SVC_SECRET"))

    // --issuer and --client-id first: what a first login needs is what `login --help` shows first.
    @Option(help: "The issuer (required the first time, unless --resource discovers it).") var issuer: String?
    @Option(name: .customLong("client-id"), help: "The client id (required the first time).") var clientID: String?
    @OptionGroup var store: StoreOptions
    @Option(help: "The profile to create or update (default: \"default\"; with --resource alone, the resource URL).",
            completion: ProfileNames.completion)
    var profile: String?
    @Option(help: ArgumentHelp("The RFC 8707 resource (an MCP server, an API) the tokens are for. Without --issuer, everything is discovered from its RFC 9728 metadata and the client is registered when needed.", valueName: "URL"))
    var resource: String?
    @Option(name: .customLong("client-secret-file"), help: ArgumentHelp("A file with the client secret (confidential clients).", valueName: "FILE"))
    var clientSecretFile: String?
    @Option(help: "A scope to request (repeatable; default: the profile's, else openid profile email).") var scope: [String] = []
    @Flag(help: "Use the device authorization grant.") var device = false
    @Flag(name: .customLong("client-credentials"),
          help: "Log in as the client itself (a service, a CI job): the client credentials grant, no browser. The session has no refresh token; moose token gets a new one by the same single flight when it nears expiry.")
    var clientCredentials = false
    @Option(name: .customLong("client-secret-env"), help: ArgumentHelp("An environment variable holding the client secret (read on every grant; nothing on disk).", valueName: "VAR"))
    var clientSecretEnv: String?
    @Option(name: .customLong("client-auth"), help: ArgumentHelp("How the secret is sent: basic (client_secret_basic, default) or post (client_secret_post).", valueName: "METHOD"))
    var clientAuth: String?
    @Option(name: .customLong("private-key"), help: ArgumentHelp("Authenticate with private_key_jwt (RFC 7523): a private key in PEM, or a private JWK whose kid is used (RS256, ES256 or EdDSA).", valueName: "FILE"))
    var privateKey: String?
    @Option(name: .customLong("key-id"), help: ArgumentHelp("The kid to name in the private_key_jwt assertion (a PEM has none; many providers need it).", valueName: "KID"))
    var keyID: String?
    @Option(help: ArgumentHelp("The audience a client-credentials grant names (for providers that want one).", valueName: "AUDIENCE"))
    var audience: String?
    @Option(help: ArgumentHelp("Log in as a workload (a CI job, a pod): its own identity token, from github, gitlab[:VARIABLE], env:VARIABLE, file:PATH or command:PROGRAM, exchanged at the provider; renewed by exchanging again.", valueName: "SOURCE"))
    var workload: String?
    @Option(name: .customLong("workload-audience"), help: ArgumentHelp("The audience to ask the workload's platform for (GitHub Actions; default: the issuer).", valueName: "AUDIENCE"))
    var workloadAudience: String?
    @Option(name: .customLong("workload-grant"), help: ArgumentHelp("How the workload's token is used: token-exchange (RFC 8693, default) or jwt-bearer (RFC 7523).", valueName: "GRANT"))
    var workloadGrant: String?
    @Option(name: .customLong("subject-token-type"), help: ArgumentHelp("The token exchange's subject_token_type: id_token (default), jwt, access_token, or a URI.", valueName: "TYPE"))
    var subjectTokenType: String?
    @Option(name: .customLong("device-endpoint"), help: ArgumentHelp("The device authorization endpoint, when discovery does not list it.", valueName: "URL"))
    var deviceEndpoint: String?
    @Flag(name: .customLong("no-browser"), help: "Print the URL instead of opening a browser.") var noBrowser = false
    @Flag(help: "Also take the address the browser ends on, pasted here (a shell on another machine than the browser: ssh, a container). On by default with --no-browser at a terminal.")
    var paste = false
    @Option(help: "The loopback port for the redirect (default: a random free port).") var port: UInt16?
    @Flag(help: "Bind the tokens to a new DPoP key (RFC 9449), kept with the session; proofs are then sent with every request.")
    var dpop = false
    @Option(name: .customLong("dpop-alg"), help: ArgumentHelp("The DPoP key's algorithm: ES256 (default), EdDSA or RS256.", valueName: "ALG"))
    var dpopAlgorithm: String?
    @Flag(name: .customLong("no-par"), help: "Never push the authorization request (RFC 9126), even when the provider offers it.")
    var noPAR = false
    @Option(name: .customLong("ca-file"), help: ArgumentHelp("Trust the CA certificates in this PEM file for the provider (a private CA), kept with the profile (default: $SSL_CERT_FILE, else the system's).", valueName: "PEM"))
    var caFile: String?
    @Option(name: .customLong("pin-public-key"), help: ArgumentHelp("Accept the issuer's host only with this server key (SHA-256 of its SubjectPublicKeyInfo, base64; repeat for a backup key), kept with the profile.", valueName: "sha256//BASE64")) var pinPublicKey: [String] = []
    @Option(help: ArgumentHelp("Seconds to wait for the user: for the browser's redirect (default 300), or with --device for the approval (default: the device code's own lifetime).", valueName: "SECONDS"))
    var timeout: Double?

    /// `path` made absolute (a profile is used from any directory later).
    static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    /// `body`, given up after `seconds` (none: no limit of ours) with "no approval within …".
    static func within<T: Sendable>(_ seconds: Double?, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let seconds else { return try await body() }
        return try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(min(max(seconds, 0), 86_400) * 1e9))
                throw CLIError.failed("no approval within \(DurationText.describe(seconds)) (--timeout); run moose login again")
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
    }

    /// What a login asks for when neither the command line, the config file nor an earlier login says.
    static let defaultScopes = ["openid", "profile", "email"]

    func run() throws {
        // The config file first: its profile settings and store count for every command, and a
        // file that does not parse is an error before anything else happens.
        let resolved = try CLIConfig.resolve(self.profile ?? (resource != nil && issuer == nil ? resource : nil), store: store)
        if let resource, issuer == nil, resolved.settings?.issuer == nil {
            try ResourceLogin(store: resolved.store, resource: resource, profile: profile, clientID: clientID, scopes: scope,
                              noBrowser: noBrowser, port: port ?? 0, timeout: timeout ?? 300).run()
            return
        }
        let profile = resolved.name
        let config = resolved.settings
        // What an earlier login kept — read without creating anything: a usage error leaves no store
        // (or key) behind. A damaged row is not read: this login replaces it.
        let existing = (try? OAuthContext(options: resolved.store, create: false)).flatMap { context in
            (try? context.loadOrFail(profile)?.profile) ?? Self.keptPlan(profile, in: context)
        }
        guard let issuer = issuer ?? config?.issuer ?? existing?.issuer, let clientID = clientID ?? config?.clientID ?? existing?.clientID else {
            throw CLIError.usage("the first login of profile \(profile) needs --issuer URL and --client-id ID "
                                 + "(or a [profiles.\(profile)] section with issuer and client_id in \(try CLIConfig.path), or --resource alone to discover both)")
        }
        guard let scheme = URL(string: issuer)?.scheme?.lowercased(), scheme == "https" || scheme == "http", URL(string: issuer)?.host != nil else {
            throw CLIError.usage("--issuer \(issuer) is not an absolute https URL (like https://id.example.com)")
        }
        try IssuerOption.check(issuer)
        var endpoints = existing?.endpoints ?? EndpointOverrides()
        if let deviceEndpoint {
            guard let url = URL(string: deviceEndpoint) else { throw CLIError.usage("--device-endpoint \(deviceEndpoint) is not a URL") }
            endpoints.deviceAuthorizationEndpoint = url
        }
        guard [clientCredentials, device, workload != nil].filter({ $0 }).count <= 1 else {
            throw CLIError.usage("give one of --client-credentials, --device and --workload")
        }
        if let workloadGrant, !WorkloadLogin.grants.contains(workloadGrant) {
            throw CLIError.usage("--workload-grant takes token-exchange or jwt-bearer")
        }
        var subjectType: String? = nil
        if let subjectTokenType {
            guard let type = ExchangeToken.type(named: subjectTokenType) else {
                throw CLIError.usage("--subject-token-type takes id_token, jwt, access_token, refresh_token or a URI")
            }
            subjectType = type
        }
        let isService = clientCredentials || workload != nil
        // A service asks for what it is configured to (no OpenID scopes: there is no user).
        let scopes = scope.isEmpty ? (config?.scopes ?? existing?.scopes ?? (isService ? [] : Self.defaultScopes)) : scope
        var settings = Profile(name: profile, issuer: issuer, clientID: clientID, scopes: scopes,
                               grant: clientCredentials ? .clientCredentials : workload != nil ? .workload : device ? .deviceCode : .authorizationCode,
                               clientSecretFile: clientSecretFile ?? config?.clientSecretFile ?? existing?.clientSecretFile, endpoints: endpoints)
        if let clientAuth, clientAuth != "basic", clientAuth != "post" { throw CLIError.usage("--client-auth takes basic or post") }
        guard [clientSecretFile != nil, clientSecretEnv != nil, privateKey != nil].filter({ $0 }).count <= 1 else {
            throw CLIError.usage("give one of --client-secret-file, --client-secret-env and --private-key")
        }
        if clientSecretEnv != nil || privateKey != nil { settings.clientSecretFile = clientSecretFile }
        settings.clientSecretEnv = clientSecretEnv ?? (clientSecretFile == nil && privateKey == nil ? existing?.clientSecretEnv : nil)
        settings.privateKeyFile = privateKey.map(Self.absolute) ?? (clientSecretFile == nil && clientSecretEnv == nil ? existing?.privateKeyFile : nil)
        settings.privateKeyID = keyID ?? existing?.privateKeyID
        settings.clientAuth = clientAuth ?? existing?.clientAuth
        settings.audience = audience ?? existing?.audience
        if let file = caFile ?? config?.caFile { settings.caFile = try CLITransport.caFile(file) } else { settings.caFile = existing?.caFile }
        settings.publicKeyPins = try CLITransport.pins(pinPublicKey.isEmpty ? config?.publicKeyPins : pinPublicKey, issuer: issuer) ?? existing?.publicKeyPins
        if let workload {
            _ = try WorkloadLogin.source(workload, transport: CurlTransport())   // a usage error now, not after discovery
            settings.workload = WorkloadLogin.absolute(workload)
            settings.workloadAudience = workloadAudience
            settings.workloadGrant = workloadGrant
            settings.subjectTokenType = subjectType
        }
        if let file = settings.clientSecretFile { settings.clientSecretFile = Self.absolute(file) }
        if clientCredentials, settings.clientSecretFile == nil, settings.clientSecretEnv == nil, settings.privateKeyFile == nil {
            throw CLIError.usage("--client-credentials needs the client's credentials: --client-secret-file FILE, --client-secret-env VAR or --private-key FILE")
        }
        settings.dpop = dpopAlgorithm ?? (dpop ? JWTAlgorithm.es256.rawValue : (config?.dpop ?? existing?.dpop))
        if let resource = resource ?? config?.resource {
            do { settings.resource = try ResourceIdentifier.canonical(resource) } catch { throw CLIError.usage("--resource: \(error)") }
        } else {
            settings.resource = existing?.resource
        }
        var algorithm: JWTAlgorithm? = nil
        if let name = settings.dpop {
            guard let chosen = JWTAlgorithm(rawValue: name), DPoPKey.supportedAlgorithms.contains(chosen) else {
                throw CLIError.usage("--dpop-alg takes ES256, EdDSA or RS256")
            }
            algorithm = chosen
        }
        let context = try OAuthContext(options: resolved.store, create: true)
        do {
            var client = try context.client(for: settings)
            client.dpop = algorithm
            if noPAR { client.pushedAuthorization = .never }
            let validator = context.validator(for: client)
            var request = AuthorizationParameters(scopes: scopes)
            if let audience = settings.audience { request.extra.append(("audience", audience)) }
            let parameters = request
            let tokens: TokenSet
            if settings.workload != nil {
                let workloadProfile = settings
                let workloadClient = client
                tokens = try CLIBlocking.run { try await WorkloadLogin.tokens(profile: workloadProfile, client: workloadClient) }
            } else if clientCredentials {
                let flow = ClientCredentialsFlow(client: client)
                tokens = try CLIBlocking.run { try await flow.authorize(parameters) }
            } else if device {
                let progress = Mutex<Progress?>(nil)
                let noBrowser = self.noBrowser
                let flow = DeviceAuthorizationFlow(client: client, idTokens: validator) { device in
                    for line in DeviceCodeBanner.lines(userCode: device.userCode, verificationURI: device.verificationURI.absoluteString,
                                                       complete: device.verificationURIComplete?.absoluteString,
                                                       expiresIn: device.expiresAt.timeIntervalSinceNow) {
                        Terminal.outPreSanitizedError(line)
                    }
                    // The browser opens the page (with the code, when the provider gives that URI), as for
                    // the code flow: only an https page, or plain http on this machine.
                    let page = device.verificationURIComplete ?? device.verificationURI
                    if !noBrowser, TransportSecurity.permits(page) { openBrowser(page) }
                    if Progress.isInteractive {
                        progress.withLock { $0 = Progress("Waiting for approval", until: device.expiresAt) }
                    } else {
                        Terminal.error("Waiting for approval…")
                    }
                }
                defer { progress.withLock { $0?.stop() } }
                let limit = timeout
                do {
                    tokens = try CLIBlocking.run { try await Self.within(limit) { try await flow.authorize(parameters) } }
                } catch let error as OAuthError where error.code == OAuthError.missingEndpoint {
                    throw CLIError.failed("\(Terminal.safe(issuer))'s discovery document lists no device authorization endpoint; "
                                          + "name it with --device-endpoint URL (the provider's documentation gives it)")
                }
            } else {
                let noBrowser = self.noBrowser
                let timeout = self.timeout ?? 300
                let progress = Mutex<Progress?>(nil)
                let deadline = Date().addingTimeInterval(timeout)
                let pasting = paste || (noBrowser && Terminal.stdinIsTerminal)
                // RFC 9207: a provider that promises `iss` needs the whole address pasted, not the code alone.
                let requiresAddress = client.metadata.authorizationResponseIssParameterSupported == true
                let provider = client.metadata.issuer
                let agent = try LoopbackUserAgent(port: port ?? 0, timeout: timeout) { url in
                    Terminal.error("Open this URL to sign in:\n  \(url.absoluteString)")
                    if !noBrowser { openBrowser(url) }
                    if pasting, requiresAddress {
                        Terminal.error("If the browser is on another machine, sign in there, then paste the whole address it ends on "
                                       + "(http://127.0.0.1:…/callback?code=…&iss=…; that page does not load there), and press Enter. "
                                       + "The whole address, not only the code: \(provider) names itself in it (RFC 9207 iss), "
                                       + "and a code alone cannot prove which provider sent it:")
                    } else if pasting {
                        // No spinner: it would write over what the person types.
                        Terminal.error("If the browser is on another machine, sign in there, then paste the address it ends on "
                                       + "(http://127.0.0.1:…/callback?code=…; that page does not load there) or only the code, and press Enter:")
                    } else if Progress.isInteractive {
                        progress.withLock { $0 = Progress("Waiting for the browser to come back to 127.0.0.1 (Ctrl-C to cancel)", until: deadline) }
                    } else {
                        Terminal.error("Waiting for the redirect on 127.0.0.1… (Ctrl-C to cancel)")
                    }
                }
                defer { progress.withLock { $0?.stop() } }
                let userAgent: any ExternalUserAgent = pasting ? PasteUserAgent(loopback: agent, requiresAddress: requiresAddress) : agent
                let flow = AuthorizationCodeFlow(client: client, redirectURI: agent.redirectURI, userAgent: userAgent, idTokens: validator)
                tokens = try CLIBlocking.run { try await flow.authorize(parameters) }
            }
            // The session engine names the user and stores the session (the profile's settings with it).
            let engine = context.engine(profile)
            let loggedInClient = client
            var issued = tokens
            issued.resource = tokens.resource ?? settings.resource
            var kept = settings.stored()
            if let audience = settings.audience { kept[SessionEngine.audienceAttribute] = audience }
            let attributes = kept
            let issuedTokens = issued
            let grant = clientCredentials ? "client_credentials" : settings.workload != nil ? "workload" : nil
            let session = try CLIBlocking.run {
                try await engine.completeLogin(issuedTokens, client: loggedInClient, grant: grant, attributes: attributes)
            }
            let binding = tokens.dpopKey.map { tokens.isDPoPBound ? "; DPoP-bound (\($0.algorithm))" : "; DPoP proofs sent, but the provider issued bearer tokens" } ?? ""
            let who = clientCredentials ? "client \(clientID)"
                : settings.workload.map { "workload \($0.split(separator: ":").first.map(String.init) ?? $0)" } ?? SessionSummary(key: profile, session: session).displayName ?? "(no ID token)"
            Terminal.out("Logged in to \(issuer) as \(who) (profile \(profile)); access token \(expiryText(tokens)); scopes: \(tokens.scopes.joined(separator: " "))\(binding)")
        } catch let error as OAuthError where error.code == OAuthError.invalidClient && settings.clientSecretFile == nil
                    && settings.clientSecretEnv == nil && settings.privateKeyFile == nil {
            // A confidential client logged in as a public one: the token endpoint wants its credentials.
            throw CLIError.failed(OAuthContext.text(error, next: "the provider wants this client's credentials: give --client-secret-file FILE "
                                                        + "(or --client-secret-env VARIABLE, or --private-key FILE)"))
        } catch {
            throw OAuthContext.fail(error, profile: profile)
        }
    }
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show sessions (never a token).",
        discussion: HelpText.examples("moose status", "moose status --profile work --json"))
    @OptionGroup var store: StoreOptions
    @Option(help: "Only this profile.", completion: ProfileNames.completion) var profile: String?
    @Flag(help: "One JSON array for scripts.") var json = false

    func run() throws {
        let resolved = try CLIConfig.resolve(profile, store: store)
        let context = try OAuthContext(options: resolved.store, create: false)
        let names: [String]
        do { names = try profile.map { [$0] } ?? context.sessions.keys() } catch { throw OAuthContext.fail(error) }
        var items: [JSONValue] = []
        for name in names {
            let loaded: (session: OAuthSession, profile: Profile)?
            do {
                loaded = try context.loadOrFail(name)
            } catch {
                // A damaged row is listed with the way out; the other sessions are shown as usual.
                guard profile == nil, let damaged = Self.damaged(name, context: context) else { throw error }
                if json { items.append(damaged.json) } else { Terminal.out(damaged.text) }
                continue
            }
            guard let session = loaded?.session else {
                if profile != nil { throw CLIError.failed("no session for profile \(name); run \(loginHint(name))") }
                continue
            }
            let tokens = session.tokens
            let summary = SessionSummary(key: name, session: session)
            if json {
                var object: JSONObject = ["profile": .string(name), "issuer": .string(session.issuer),
                                          "client_id": .string(session.clientID), "state": .string(session.state.rawValue),
                                          "subject": session.subject.map { .string($0) } ?? .null,
                                          "display_name": summary.displayName.map { .string($0) } ?? .null,
                                          "preferred_username": summary.preferredUsername.map { .string($0) } ?? .null,
                                          "email": summary.email.map { .string($0) } ?? .null,
                                          "name": summary.name.map { .string($0) } ?? .null,
                                          "scopes": .array(tokens.scopes.map { .string($0) }),
                                          "has_refresh_token": .bool(tokens.refreshToken != nil),
                                          "resource": session.resource.map { .string($0) } ?? .null]
                object["expires_at"] = tokens.expiresAt.map { .string(ISO8601.string(from: $0)) } ?? .null
                items.append(.object(object))
            } else {
                let grant = session.renewsWithoutAPerson
                let state = !session.canRenew ? "needs login" : tokens.isValid() ? "active" : grant ? "expired (renewed by a new grant on next use)" : "expired (refreshable)"
                let resource = session.resource.map { " for \($0)" } ?? ""
                let refresh = tokens.refreshToken != nil ? "yes" : grant ? "none (a new grant renews it)" : "none"
                Terminal.out("\(name): \(summary.displayName ?? (grant ? "client \(session.clientID)" : "-")) at \(session.issuer)\(resource) — \(state); access token \(expiryText(tokens)); "
                      + "refresh token \(refresh); scopes: \(tokens.scopes.joined(separator: " "))")
            }
        }
        if json { Terminal.out(JSONValue.array(items).prettyPrinted()) } else if names.isEmpty { Terminal.out("no sessions; run moose login") }
    }

    /// How `status` shows a row that cannot be opened, or `nil` when `name`'s row is not damaged.
    static func damaged(_ name: String, context: OAuthContext) -> (text: String, json: JSONValue)? {
        do {
            _ = try context.sessions.load(name)
            return nil
        } catch let error as OAuthError where error.code == OAuthError.sessionDamaged {
            let safe = Terminal.safe(name)
            let next = "run moose login --profile \(safe) to replace it, or moose logout --profile \(safe) to remove it"
            return ("\(safe): damaged — the stored session cannot be opened (its sealed bytes do not authenticate); \(next)",
                    .object(["profile": .string(name), "state": .string("damaged"), "next_step": .string(next)]))
        } catch {
            return nil
        }
    }
}

struct RefreshCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refresh", abstract: "Refresh the session's tokens now.",
        discussion: "moose token refreshes by itself when it has to; this forces one now.\n\n"
            + HelpText.examples("moose refresh", "moose refresh --profile work"))
    @OptionGroup var store: StoreOptions
    @Option(help: "The profile (default: the config file's default, else \"default\").", completion: ProfileNames.completion) var profile: String?

    func run() throws {
        let resolved = try CLIConfig.resolve(self.profile, store: store)
        let profile = resolved.name
        let context = try OAuthContext(options: resolved.store, create: false)
        guard let (session, settings) = try context.loadOrFail(profile) else { throw CLIError.failed("no session for profile \(profile); run \(loginHint(profile))") }
        guard session.canRenew else { throw CLIError.failed("profile \(profile) needs a new login (its refresh token was refused); run moose login --profile \(profile)") }
        do {
            // The coordinator: lease, writable-store check before the refresh token is spent,
            // fenced write — the same guarantees `moose token` has.
            try OAuthContext.renew(DetachedRefresh.Request(mode: .refreshNow), profile: profile, store: resolved.store, context: context,
                                   session: session, settings: settings)
            let fresh = try context.sessions.load(profile)?.session.tokens ?? session.tokens
            let rotated = fresh.refreshToken.map { Array($0.utf8) } != session.tokens.refreshToken.map { Array($0.utf8) }
            Terminal.out("Refreshed profile \(profile): access token \(expiryText(fresh))\(rotated ? "; refresh token rotated" : "")")
        } catch let error as OAuthError where error.code == OAuthError.invalidGrant || error.code == OAuthError.needsLogin {
            throw CLIError.failed("the refresh token was refused: \(Terminal.safe(error.message)) (\(error.oauthError ?? "invalid_grant")); "
                                  + "run moose login --profile \(profile)")
        } catch {
            throw OAuthContext.fail(error)
        }
    }
}

extension RefreshCommand {
    /// Refreshes `profile`'s session because a server refused `rejected` — only if that is still the
    /// current access token (another process may have refreshed already); never wipes the session.
    static func refresh(store: StoreOptions, profile: String, rejecting rejected: String) throws {
        let context = try OAuthContext(options: store, create: false)
        guard let (session, settings) = try context.loadOrFail(profile), session.canRenew,
              session.tokens.accessToken.utf8.elementsEqual(rejected.utf8) else { return }
        do {
            try OAuthContext.renew(DetachedRefresh.Request(mode: .rejecting, rejected: rejected), profile: profile, store: store,
                                   context: context, session: session, settings: settings)
        } catch {
            throw OAuthContext.fail(error)
        }
    }
}

extension LoginCommand {
    /// The file store's namespace of the plans of profiles logged out of: a plain `moose login` of
    /// such a profile logs in again as before (issuer, client, its authentication by reference).
    static let keptPlans = "moose.plan"

    /// The plan a logout of `profile` kept, if any.
    static func keptPlan(_ profile: String, in context: OAuthContext) -> Profile? {
        guard let store = context.sessions.fileStore, let bytes = try? store.get(namespace: keptPlans, name: profile),
              var plan = try? JSONDecoder().decode(Profile.self, from: Data(bytes)) else { return nil }
        plan.name = profile
        return plan
    }
}

struct LogoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout", abstract: "Revoke the tokens at the provider and wipe the local session (always).",
        discussion: """
            Prints the provider's end-session URL (open it to end the browser's session there) and whether \
            the refresh token was revoked; the local session is wiped even when the provider is down.

            """ + "\n" + HelpText.examples("moose logout", "moose logout --profile work"))
    @OptionGroup var store: StoreOptions
    @Option(help: "The profile (default: the config file's default, else \"default\").", completion: ProfileNames.completion) var profile: String?
    /// Accepted for scripts written for earlier versions; the end-session URL is now always printed in full.
    @Flag(name: .customLong("show-end-session-url"), help: .hidden)
    var showEndSessionURL = false

    func run() throws {
        let resolved = try CLIConfig.resolve(self.profile, store: store)
        let profile = resolved.name
        let context = try OAuthContext(options: resolved.store, create: false)
        // A damaged or undecryptable row is wiped too (the engine reports that nothing was revoked).
        let exists: Bool
        do { exists = try context.sessions.load(profile) != nil } catch { exists = true }
        guard exists else { throw CLIError.failed("no session for profile \(profile)") }
        // The session's plan outlives it (on a file store), so a plain `moose login` logs in again.
        let plan = (try? context.loadOrFail(profile))?.map(\.profile)
        // The session engine's logout: revoke, end-session URL, then wipe — whatever the provider said.
        let engine = context.engine(profile)
        let clients = context.clients
        let name = profile
        let result = try CLIBlocking.run {
            await engine.logout(coordinator: nil) { stored in
                try await clients.client(for: Profile.of(stored, key: name), registration: stored.registration)
            }
        }
        // The end-session URL first and in full: it is the one thing the wiped session cannot give
        // back (it carries the ID token as id_token_hint, which ends with this session anyway).
        if let url = result.endSessionURL {
            Terminal.out("To end the provider's browser session too, open:\n  \(Terminal.safe(url.absoluteString))")
        }
        if let error = result.wipeError { throw OAuthContext.fail(error) }
        Terminal.out("Logged out of profile \(profile): local session wiped.")
        if let plan, let store = context.sessions.fileStore, let data = try? JSONEncoder().encode(plan),
           (try? store.put(Array(data), namespace: LoginCommand.keptPlans, name: profile)) != nil {
            Terminal.out("Its settings are kept: \(loginHint(profile)) logs in again.")
        }
        // A damaged row had no tokens to revoke: removing it was the whole job.
        if let error = result.revocationError, error.code != OAuthError.sessionDamaged {
            Terminal.error("moose: \(Self.revocationReport(result))")
            throw Status.failed
        }
        Terminal.out(Self.revocationReport(result))
    }

    /// One plain sentence on what the provider knows now: revoked, no revocation endpoint, refused,
    /// or unreachable — then the refresh token is still valid there.
    static func revocationReport(_ result: LogoutResult) -> String {
        if let error = result.revocationError {
            let reason = Terminal.safe(error.message)
            switch error.code {
            case OAuthError.transient, OAuthError.timedOut, OAuthError.offline, OAuthError.discovery:
                return "The provider could not be reached (\(reason)): the refresh token is still valid there until it expires."
            case OAuthError.storeUnavailable:
                return "The stored session could not be read, so nothing was revoked at the provider (\(reason))."
            case OAuthError.sessionDamaged:
                return "The stored session was damaged (it could not be opened), so nothing was revoked at the provider; "
                    + "its tokens stay valid there until they expire."
            default:
                return "The provider refused the revocation (\(reason)): the refresh token may still be valid there."
            }
        }
        switch (result.refreshTokenRevoked, result.accessTokenRevoked) {
        case (true?, _): return "The refresh token and access token were revoked at the provider."
        case (nil, true?): return "The access token was revoked at the provider (the session had no refresh token)."
        default: return "The provider has no revocation endpoint: the tokens stay valid there until they expire."
        }
    }
}
