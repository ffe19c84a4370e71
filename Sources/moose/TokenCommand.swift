import ArgumentParser
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
        guard let minimum = Double(minValidity.hasSuffix("s") ? String(minValidity.dropLast()) : minValidity), minimum >= 0 else {
            throw CLIError.usage("--min-validity \(minValidity): expected seconds, like 60 or 60s")
        }
        let sessions = SessionStore(store: try store.open(create: false))
        guard let session = try? sessions.load(profile) else { throw CLIError.failed("no session for profile \(profile); run moose login") }
        guard session.state == .active else { throw CLIError.failed("profile \(profile) needs a new login; run moose login --profile \(profile)") }
        var tokens = session.tokens
        if !tokens.isValid(for: minimum) {
            // Slow path: the network. Every process shares one refresh through the store's lease.
            let context = try OAuthContext(options: store, create: false)
            let client = try context.client(for: session.profile)
            let validator = try context.validator(for: client)
            let coordinator = RefreshCoordinator(profile: profile, sessions: sessions) { old in
                let fresh = try await client.refresh(old)
                if let idToken = fresh.idToken, idToken != old.idToken, let validator { try await validator.validate(idToken, nonce: nil) }
                return fresh
            }
            do {
                _ = try Blocking.run { try await coordinator.accessToken(minimumValidity: minimum) }
            } catch let error as OAuthError where error.code == OAuthError.invalidGrant || error.code == OAuthError.needsLogin {
                throw CLIError.failed("the session of profile \(profile) needs a new login (\(error.oauthError ?? error.code.description)); run moose login --profile \(profile)")
            } catch {
                throw OAuthContext.fail(error)
            }
            tokens = try sessions.load(profile)?.tokens ?? tokens
        }
        let value: String
        if idToken {
            guard let id = tokens.idToken else { throw CLIError.failed("the session has no ID token") }
            value = id
        } else {
            value = tokens.accessToken
        }
        switch format {
        case .token: print(value)
        case .header: print("Authorization: \(idToken ? "Bearer" : tokens.tokenType) \(value)")
        case .env:
            print("export MOOSE_ACCESS_TOKEN='\(value)'")
            print("export MOOSE_TOKEN_TYPE='\(tokens.tokenType)'")
            print("export MOOSE_TOKEN_EXPIRES_AT='\(tokens.expiresAt.map { String(Int64($0.timeIntervalSince1970)) } ?? "")'")
        case .json:
            var object: JSONObject = ["token": .string(value), "token_type": .string(tokens.tokenType),
                                      "scopes": .array(tokens.scopes.map { .string($0) })]
            object["expires_at"] = tokens.expiresAt.map { .number(JSONNumber(Int64($0.timeIntervalSince1970))) } ?? .null
            print(JSONValue.object(object).serialized())
        }
    }
}
