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

extension Status {
    /// The identity provider could not be reached (try again later).
    static let unreachable = ExitCode(3)
}

/// What every session command shares: the store, the transport, discovery and the flows.
struct OAuthContext {
    let sessions: CLISessions
    let transport: any HTTPTransport = CurlTransport()

    init(options: StoreOptions, create: Bool, profile: String? = nil) throws {
        sessions = try CLISessions(options: options, create: create, profile: profile)
    }

    init(sessions: CLISessions) {
        self.sessions = sessions
    }

    /// The stored session of `profile` and its profile settings, if any (a row a logout left with only
    /// the plan is none); a store that cannot be read is an error (exit 1), never "no session".
    func loadOrFail(_ profile: String) throws -> (session: OAuthSession, profile: Profile)? {
        let stored: StoredSession?
        do { stored = try sessions.load(profile) } catch { throw OAuthContext.fail(error, profile: profile) }
        guard let stored, !stored.session.isLoggedOut else { return nil }
        return (stored.session, Profile.of(stored.session, key: profile))
    }

    /// The stored session of `profile` and its plan (`loadOrFail`); none is an error that names the
    /// login to run as it works when pasted (with `--issuer` and `--client-id` unless something already
    /// says them), and the profiles that do hold sessions here.
    func session(of profile: String) throws -> (session: OAuthSession, profile: Profile) {
        guard let loaded = try loadOrFail(profile) else {
            let others = sessions.profilesWithSessions().filter { $0 != profile }.map { Terminal.safe($0) }
            let here =
                others.isEmpty ? "" : " (sessions here: \(others.joined(separator: ", ")); choose one with --profile)"
            throw CLIError.failed(
                "no session for profile \(profile)\(here); run \(CLISessions.firstLogin(profile, store: sessions.options))"
            )
        }
        return loaded
    }

    /// The library's owner of `profile`'s session — the one object every CLI login, refresh and renewal
    /// goes through: a `TokenManager` for the session's plan, as an app's `TokenManager.open` makes it
    /// (the client made from the plan at each use, with its CA file and pins; a workload renewed from
    /// its source), on this command's store with its lease across processes and the JWKS kept in the
    /// file store. A plan whose references cannot be read is a usage error.
    func manager(for profile: Profile) throws -> TokenManager {
        var plan = profile
        if case .workload(var workload) = plan.grant {
            workload.source = workload.source.map(SessionPlan.absoluteWorkload)
            plan.grant = .workload(workload)
        }
        var idTokenKeys: (@Sendable (URL) -> JWKSCache.Persistence)? = nil
        if let store = sessions.fileStore { idTokenKeys = { .secretStore(store, for: $0) } }
        do {
            return try TokenManager(
                plan: plan, storage: sessions.storage, key: profile.name, transport: transport,
                idTokenKeys: idTokenKeys, commands: WorkloadIdentity.command)
        } catch let error as OAuthError where error.code == OAuthError.invalidConfiguration {
            throw CLIError.usage(error.message)
        }
    }

    /// Runs `body` on the manager and, before the process exits, writes any rotated tokens a
    /// failed store write left in memory (the coordinator's background retry dies with the
    /// process): a rotated refresh token is never dropped silently. If the store still refuses
    /// them, the command fails and says so.
    static func refreshing(
        _ manager: TokenManager,
        _ body: @escaping @Sendable (TokenManager) async throws -> AccessToken
    ) throws {
        let persisted = try CLIBlocking.run { () async throws -> Bool in
            _ = try await body(manager)
            return await manager.persistPendingWrite(timeout: 5)
        }
        guard persisted else {
            throw CLIError.failed(
                "the provider rotated the tokens but the store refused them for 5 s; "
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
                return CLIError.failed(
                    text(
                        error,
                        next: "run moose login\(option) to replace it, or moose logout\(option) to remove it "
                            + "(other profiles are not affected)"))
            }
            if error.code == OAuthError.transient {
                Terminal.error(
                    "moose: error: \(text(error, next: "check the network (or the provider's status) and try again"))")
                return Status.unreachable
            }
            if error.code == OAuthError.invalidClient, !error.message.contains("credentials were refused") {
                return CLIError.failed(
                    text(
                        error,
                        next:
                            "the client's credentials were refused: check the client id, its secret or key, and the key's kid"
                    ))
            }
            if error.code == OAuthError.storeUnavailable, let cause = storeCause(error) {
                // The store's own words name the file and what to do; the session's words say what was kept.
                return CLIError.failed(text(error, next: cause, nextEndsWithItsCode: true))
            }
            if error.code == OAuthError.timedOut {
                // Only the loopback listener times out: a browser login nobody finished in time.
                return CLIError.failed(
                    text(
                        error,
                        next: "run the same moose login command again and finish signing in sooner "
                            + "(or give --timeout SECONDS; --port PORT for the registered redirect's port); "
                            + "with the browser on another machine, "
                            + "add --no-browser and paste the address it ends on"))
            }
            if error.code == OAuthError.renewalRefused {
                return CLIError.failed(
                    text(
                        error,
                        next:
                            "check the workload's token source (or the client's credentials); the next moose token tries again"
                    ))
            }
            if error.code == OAuthError.tls, !error.message.contains("is not one of the pinned keys") {
                return CLIError.failed(
                    text(
                        error,
                        next: "if the provider's certificate comes from a private CA, pass --ca-file PEM "
                            + "(or set SSL_CERT_FILE); otherwise its certificate is wrong or expired"))
            }
            return CLIError.failed(text(error))
        }
        if let error = error as? SecretStoreError { return StoreOptions.cliError(error) }
        if let error = error as? DetachedRefresh.Failure { return CLIError(message: error.message, status: error.exit) }
        return error
    }

    /// The store fault under a `storeUnavailable` (the file store's `SecretStoreError`, which names
    /// the file and the next step), however deep the storage contract wrapped it, with its code in
    /// brackets; `nil` when the storage's own message says it all already (or it is not the file store).
    static func storeCause(_ error: OAuthError) -> String? {
        var next = error.underlying
        for _ in 0..<4 {
            switch next {
            case let store as SecretStoreError:
                return error.message.contains(store.message) ? nil : "\(store.message) [\(store.code)]"
            // What a detached `moose __refresh` reported of the store fault (as words: the error itself
            // does not cross the process boundary).
            case let fault as DetachedRefresh.Cause: return fault.text
            case let wrapped as OAuthError: next = wrapped.underlying
            default: return nil
            }
        }
        return nil
    }

    /// `error` for a person: its message (and the provider's own error, unless the message says it),
    /// then `next`, then the code in brackets — one code: a `next` that carries its own, more
    /// specific one (a store fault's words ending `[permission]`, `nextEndsWithItsCode`) keeps only that.
    static func text(_ error: OAuthError, next: String? = nil, nextEndsWithItsCode: Bool = false) -> String {
        var text = error.message
        // The provider's own error, unless the message already says it (once is enough).
        let said = { (part: String) in !part.isEmpty && error.message.contains(part) }
        let description = error.errorDescription.flatMap { said($0) ? nil : $0 }
        if let oauthError = error.oauthError, !said(oauthError) {
            text += " (\(oauthError)\(description.map { ": \($0)" } ?? ""))"
        } else if error.oauthError != nil, let description, !description.isEmpty {
            text += " (\(description))"
        }
        guard let next else { return text + " [\(error.code)]" }
        text += "; \(next)"
        return nextEndsWithItsCode ? text : text + " [\(error.code)]"
    }
}

/// The CLI's HTTP transport is libcurl (`CurlTransport`), trusting `--ca-file` (or a profile's
/// `ca_file`), else `$SSL_CERT_FILE` or `$CURL_CA_BUNDLE`, else the system's CAs; these check what the
/// options give it.
enum CLITransport {
    /// `path` checked as a readable file, made absolute (a profile is used from any directory later).
    static func caFile(_ path: String, option: String = "--ca-file") throws -> String {
        let absolute = SessionPlan.absolute(path)
        guard access(absolute, R_OK) == 0 else {
            throw CLIError.usage(
                "\(option) \(path): no such readable file (a PEM file of the CA certificates to trust)")
        }
        return absolute
    }
}

extension CLITransport {
    /// `--pin-public-key`'s pins checked and written canonically (`sha256//BASE64`; the issuer's host
    /// is the library's to pin); nil when none are given.
    static func pins(_ pins: [String]) throws -> [String]? {
        guard !pins.isEmpty else { return nil }
        do {
            return try PublicKeyPins.canonical(pins)
        } catch {
            throw CLIError.usage(
                "--pin-public-key: \(error.message) (a pin is sha256// and the base64 SHA-256 of the server's "
                    + "SubjectPublicKeyInfo: openssl x509 -in server.pem -pubkey -noout | openssl pkey -pubin -outform DER "
                    + "| openssl dgst -sha256 -binary | base64)")
        }
    }
}
