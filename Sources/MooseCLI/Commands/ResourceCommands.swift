import ArgumentParser
import MooseHTTP
import MooseOAuth
import MooseOAuthSystem
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `moose login --resource URL` (and `moose mcp login URL`): everything discovered from the
/// resource — its RFC 9728 metadata, its authorization server (refused unless it advertises PKCE
/// S256), a client registered there (RFC 7591, kept sealed with the session) unless `--client-id`
/// names one — then the authorization code flow with RFC 8707 `resource` and RFC 9207 `iss`.
struct ResourceLogin {
    let store: StoreOptions
    let resource: String
    let profile: String?
    let clientID: String?
    let scopes: [String]
    let noBrowser: Bool
    let port: UInt16?
    let timeout: Double?

    /// `resource` in canonical form (RFC 8707 §2, `ResourceIdentifier`): the form sessions are kept
    /// and compared in. One that cannot be a resource is a usage error.
    static func canonical(_ resource: String) throws -> String {
        // The library's words name the value (given as --resource, or as mcp login's URL); its code last.
        do { return try ResourceIdentifier.canonical(resource) } catch let error as OAuthError {
            throw CLIError.usage("\(error.message) [\(error.code)]")
        }
    }

    func run() throws {
        let canonical = try Self.canonical(resource)
        // Without --profile, the resource URL names the profile: one session per resource.
        let profile = self.profile ?? canonical
        // A first login that fails leaves no store or key behind.
        let made = FirstStore(store)
        let context = try made.open(store)
        var loggedIn = false
        defer {
            if !loggedIn { made.undo(after: context.sessions) }
        }
        let identity: ResourceTokenManager.ClientIdentity =
            clientID.map { .preRegistered($0) } ?? .dynamic(clientName: "moose")
        let manager: ResourceTokenManager
        do {
            manager = try ResourceTokenManager(
                resource: canonical, client: identity, storage: context.sessions.storage, key: profile,
                transport: context.transport, scopes: scopes.isEmpty ? nil : scopes, requireS256: true)
        } catch {
            throw OAuthContext.fail(error)
        }
        let signIn = TerminalSignIn(
            name: "moose", opensBrowser: !noBrowser, paste: .never, port: port, timeout: timeout)
        do {
            let summary = try CLIBlocking.run { try await signIn.logIn(manager) }
            loggedIn = true
            // The manager stored the session with its plan (issuer, client, resource): token, refresh
            // and logout find it there.
            guard let session = try context.sessions.load(profile)?.session else {
                throw CLIError.failed("the new session of \(profile) was not stored")
            }
            let registered = session.registration.map { _ in "; client registered at the provider" } ?? ""
            Terminal.out(
                "Logged in to \(summary.issuer) for \(summary.resource ?? canonical) (profile \(profile)); access token "
                    + "\(expiryText(session.tokens)); scopes: \(summary.scopes.joined(separator: " "))\(registered)")
        } catch let error as CLIError {
            throw error
        } catch let error as OAuthError where error.code == OAuthError.timedOut {
            // Not the browser login's "paste the address": this login takes no pasted address.
            throw CLIError.failed(
                OAuthContext.text(
                    error,
                    next: "run the same command again and finish signing in sooner (or give --timeout SECONDS; "
                        + "--port PORT for the registered redirect's port)"
                        + (clientID == nil ? "; the client it registered is kept for it" : "")))
        } catch let error as OAuthError where error.code == OAuthError.noBrowser {
            throw CLIError.failed(
                CLIError.noBrowserHere
                    + ": set BROWSER to a browser command, or run the same command at a terminal and "
                    + "open the URL it prints in a browser on this machine")
        } catch {
            throw OAuthContext.fail(error)
        }
    }

    /// The profile whose session is for `resource` (compared byte for byte in canonical form): the
    /// only one, or an error that says what to do.
    static func profile(for resource: String, store: StoreOptions) throws -> String {
        let canonical = try Self.canonical(resource)
        // Rows a logout left, and damaged rows, are sessions for nothing.
        let matches: [String]
        do {
            matches = try CLISessions(options: store, create: false).catalog(keptOutside: false)
                .profiles(forResource: canonical)
        } catch {
            throw OAuthContext.fail(error)
        }
        guard let first = matches.first else {
            throw CLIError.failed("no session for resource \(canonical); run moose login --resource \(canonical)")
        }
        guard matches.count == 1 else {
            throw CLIError.usage(
                "several profiles hold sessions for \(canonical) (\(matches.joined(separator: ", "))): choose one with --profile"
            )
        }
        return first
    }
}

/// `moose mcp …`: MCP servers (the MCP authorization specification, 2025-11-25).
struct MCPCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mcp", abstract: "Log in to MCP servers (OAuth discovered from the server's URL).",
        discussion: HelpText.examples(
            "moose mcp login https://mcp.example.com/mcp", "moose token --resource https://mcp.example.com/mcp"),
        subcommands: [Login.self])

    struct Login: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Log in to an MCP server: the short form of moose login --resource SERVER_URL.",
            discussion: """
                Discovers the server's protected resource metadata (RFC 9728) and its authorization server, registers \
                moose there (RFC 7591) unless --client-id is given, and logs in with PKCE S256, RFC 8707 resource and \
                RFC 9207 iss. Then: moose token --resource SERVER_URL.

                """ + "\n"
                    + HelpText.examples(
                        "moose mcp login https://mcp.example.com/mcp",
                        "moose token --resource https://mcp.example.com/mcp"))
        @OptionGroup var store: StoreOptions
        @Argument(
            help: ArgumentHelp(
                "The MCP server's URL (its endpoint, e.g. https://mcp.example.com/mcp).", valueName: "SERVER_URL"))
        var serverURL: String
        @Option(help: "The profile (default: the server's URL).", completion: ProfileNames.completion) var profile:
            String?
        @Option(name: .customLong("client-id"), help: "A client id registered beforehand (default: register one).")
        var clientID: String?
        @Option(help: "A scope to request (repeatable; default: the server's challenge, else its scopes_supported).")
        var scope: [String] = []
        @Flag(name: .customLong("no-browser"), help: "Print the URL instead of opening a browser.") var noBrowser =
            false
        @Option(help: "The loopback port for the redirect (default: a random free port).") var port: UInt16?
        @Option(help: "Seconds to wait for the user (default 300).") var timeout: Double?

        func validate() throws {
            if let timeout, !(timeout.isFinite && timeout >= 0 && timeout <= 366 * 86_400) {
                throw ValidationError("--timeout takes a number of seconds (up to a year)")
            }
        }

        func run() throws {
            try ResourceLogin(
                store: store, resource: serverURL, profile: profile, clientID: clientID, scopes: scope,
                noBrowser: noBrowser, port: port, timeout: timeout
            ).run()
        }
    }
}
