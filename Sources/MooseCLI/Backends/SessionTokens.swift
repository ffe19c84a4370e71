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
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A session's tokens for every command and credential helper that prints or sends one (`moose token`,
/// `git-credential`, `docker-credential`): read from the store, renewed through the detached refresher.
enum SessionTokens {
    /// The session's tokens, valid for `minimumValidity` seconds (`TokenSet.isValidLongEnough`, the
    /// coordinator's rule): read from the store (no network, no concurrency runtime when the cached
    /// token is fine), else refreshed in the detached refresher — once, however many processes ask.
    /// Every command and credential helper gets tokens here.
    static func valid(
        store: StoreOptions, profile: String, minimumValidity minimum: TimeInterval,
        idToken: Bool = false
    ) throws -> TokenSet {
        func valid(_ tokens: TokenSet) -> Bool {
            tokens.isValidLongEnough(minimum) && (!idToken || tokens.isIDTokenValidLongEnough(minimum))
        }
        // Fastest: one short snapshot read of the store (no shared-memory set-up), when nobody else has
        // it open and the session is active with a token valid long enough. Anything else — no session,
        // an error, another process using the store — takes the ordinary path below, which reads again
        // and reports exactly as before.
        if let source = try? store.keySource(),
            let stored = try? EncryptedSessionStorage.loadSnapshot(
                path: try store.resolvedStorePath, masterKey: source, key: profile),
            stored.session.state == .active, valid(stored.session.tokens)
        {
            return stored.session.tokens
        }
        let context = try OAuthContext(options: store, create: false, profile: profile)
        defer { context.sessions.close() }
        let (session, settings) = try renewable(profile, in: context)
        var tokens = session.tokens
        if !valid(tokens) {
            // Slow path: the network, through the one refresh path every command shares. An ID token
            // about to expire under a valid access token needs a refresh all the same (ID tokens come
            // back with a refresh): never print an expired one.
            let request =
                tokens.isValidLongEnough(minimum)
                ? DetachedRefresh.Request(mode: .refreshNow)
                : DetachedRefresh.Request(mode: .accessToken, minimumValidity: minimum)
            tokens = try renew(request, profile: profile, store: store, context: context, settings: settings)
            if idToken, tokens.idToken != nil, !tokens.isIDTokenValidLongEnough(0) {
                let when =
                    tokens.idTokenExpiresAt.map {
                        " at \(ISO8601.string(from: $0)) (\(DurationText.describe(max(0, -$0.timeIntervalSinceNow))) ago)"
                    } ?? ""
                throw CLIError.failed(
                    "profile \(profile)'s ID token expired\(when) and the provider's refresh brought no new one; "
                        + "run moose login --profile \(profile) for a new ID token")
            }
        }
        return tokens
    }

    /// `profile`'s stored session and plan, when a refresh can renew it: none (or only the plan a logout
    /// kept), or one whose refresh token was refused, is an error that names the login to run.
    static func renewable(_ profile: String, in context: OAuthContext) throws -> (
        session: OAuthSession, profile: Profile
    ) {
        let loaded = try context.session(of: profile)
        if loaded.session.isRegistrationOnly {
            throw CLIError.failed(
                "profile \(profile) is not logged in yet (a client is registered at \(loaded.session.issuer), "
                    + "but no login finished); run \(loginHint(profile)) [needsLogin]")
        }
        guard loaded.session.canRenew else {
            throw CLIError.failed(
                "profile \(profile) needs a new login (its refresh token was refused); run moose login --profile \(profile) [needsLogin]"
            )
        }
        return loaded
    }

    /// Runs `request` through the one refresh path (`OAuthContext.renew`: the detached refresher, else
    /// this process) and returns the tokens the store holds afterwards. A refused refresh token (or a
    /// session that needs a login) says so with the login to run and its code, once, last.
    static func renew(
        _ request: DetachedRefresh.Request, profile: String, store: StoreOptions, context: OAuthContext,
        settings: Profile
    ) throws -> TokenSet {
        do {
            try OAuthContext.renew(request, profile: profile, store: store, context: context, settings: settings)
        } catch let error as OAuthError
            where error.code == OAuthError.invalidGrant || error.code == OAuthError.needsLogin
        {
            throw CLIError.failed(
                "the session of profile \(profile) needs a new login: "
                    + OAuthContext.text(error, next: "run moose login --profile \(profile)"))
        } catch {
            throw OAuthContext.fail(error)
        }
        // Renewed and stored: a session gone from the store since (another process logged out) is said so.
        guard let (session, _) = try context.loadOrFail(profile) else {
            throw CLIError.failed(
                "profile \(profile) was logged out while it was refreshed; run \(loginHint(profile))")
        }
        return session.tokens
    }

    /// Refreshes `profile`'s session because a server refused `rejected` — only if that is still the
    /// current access token (another process may have refreshed already); never wipes the session.
    static func refresh(store: StoreOptions, profile: String, rejecting rejected: String) throws {
        let context = try OAuthContext(options: store, create: false, profile: profile)
        guard let (session, settings) = try context.loadOrFail(profile), session.canRenew,
            session.tokens.accessToken.utf8.elementsEqual(rejected.utf8)
        else { return }
        do {
            try OAuthContext.renew(
                DetachedRefresh.Request(mode: .rejecting, rejected: rejected), profile: profile, store: store,
                context: context, settings: settings)
        } catch {
            throw OAuthContext.fail(error)
        }
    }
}
