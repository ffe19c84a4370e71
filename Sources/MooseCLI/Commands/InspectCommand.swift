import ArgumentParser
import MooseHTTP
import MooseJWT
import MooseOAuth
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `moose inspect`: decode a JWT, show its header, claims and times, and verify it when given a key.
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Decode, pretty-print and verify a JWT.",
        discussion: """
            Reads TOKEN from the argument, from a file of that name, or from standard input ("-" or no \
            argument). A leading "Bearer " is ignored.

            Without --alg, the allow-list is every algorithm the given keys can verify (never "none", \
            never HMAC with a public key).

            Exit status: 0 decoded (and verified when a key was given), 1 invalid (bad signature, \
            expired, wrong claim…) or not accepted (a verification of a token that names an audience, \
            without --audience or --any-audience), 2 unusable input or usage. Decoding alone (no key, issuer \
            or audience given) shows an expired token as such and exits 0.

            """ + "\n"
                + HelpText.examples(
                    "moose inspect \"$(moose token)\"",
                    "moose inspect token.jwt --issuer https://id.example.com --audience my-api",
                    "moose inspect --jwks jwks.json --audience my-api < token.jwt",
                    "moose inspect --key public.pem --json token.jwt",
                    "moose inspect --session --profile work")
    )

    @Argument(help: "The token, a file holding it, or - for standard input.")
    var token: String?

    @Option(help: ArgumentHelp("Verify with the keys of a JWKS file or URL.", valueName: "FILE|URL"))
    var jwks: String?

    @Option(
        help: ArgumentHelp(
            "Verify through this issuer's discovery document and JWKS (and require it as iss).", valueName: "URL"))
    var issuer: String?

    @Option(
        help: ArgumentHelp("Verify with a PEM public key, certificate, private key, or a JWK file.", valueName: "FILE"))
    var key: String?

    @Option(
        name: .customLong("secret-file"),
        help: ArgumentHelp("Verify an HMAC token with this file's bytes, used as they are.", valueName: "FILE"))
    var secretFile: String?

    @Option(
        name: [.customLong("iss")],
        help: ArgumentHelp(
            "Require this exact issuer (iss), without reading its discovery document.", valueName: "ISSUER"))
    var iss: String?

    @Option(
        name: [.customLong("audience"), .customLong("aud")],
        help: ArgumentHelp("Require this audience (repeatable: any one of them).", valueName: "AUDIENCE"))
    var aud: [String] = []

    @Flag(
        name: .customLong("any-audience"),
        help: "Accept the token whatever its aud says (RFC 7519 §4.1.3 wants it refused when no --audience is given).")
    var anyAudience = false

    @Option(help: ArgumentHelp("Allow this algorithm (repeatable).", valueName: "ALG"))
    var alg: [String] = []

    @Option(help: "Clock-skew tolerance for exp, nbf and iat, in seconds.")
    var leeway: Double = 0

    @Option(help: ArgumentHelp("Judge times as of TIME: Unix seconds or ISO 8601.", valueName: "TIME"))
    var now: String?

    @Flag(help: "Print one JSON object (header, claims, verdict, reasons) for scripts.")
    var json = false

    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp(
            "Trust the CA certificates in this PEM file for --jwks and --issuer URLs (default: $SSL_CERT_FILE, else the system's).",
            valueName: "PEM"))
    var caFile: String?

    @Flag(
        help:
            "Inspect the stored session's own access and ID tokens (of --profile; never refreshed, never printed raw).")
    var session = false

    @Option(
        help: "With --session: the profile (default: the config file's default, else \"default\").",
        completion: ProfileNames.completion)
    var profile: String?

    /// The command line as plain values.
    var values: Values {
        Values(
            token: token, jwks: jwks, issuer: issuer, key: key, secretFile: secretFile, iss: iss, aud: aud,
            anyAudience: anyAudience, alg: alg, leeway: leeway, now: now, json: json, caFile: caFile,
            session: session, profile: profile)
    }

    func validate() throws { try values.validate() }

    func run() throws { try values.run() }

    /// `moose inspect`'s options as plain values, with the defaults declared above: what
    /// `LeanCommandLine` makes without argument-parser (whose property wrappers cost start-up time
    /// even to create), and what `run()` runs.
    struct Values: Equatable {
        var token: String? = nil
        var jwks: String? = nil
        var issuer: String? = nil
        var key: String? = nil
        var secretFile: String? = nil
        var iss: String? = nil
        var aud: [String] = []
        var anyAudience = false
        var alg: [String] = []
        var leeway: Double = 0
        var now: String? = nil
        var json = false
        var caFile: String? = nil
        var session = false
        var profile: String? = nil

        func validate() throws {
            guard leeway >= 0, leeway.isFinite else {
                throw ValidationError("--leeway must be a non-negative number of seconds")
            }
            for name in alg where JWTAlgorithm(rawValue: name) == nil {
                if name.lowercased() == "none" {
                    throw ValidationError("--alg none: unsigned tokens are never accepted")
                }
                let known = JWTAlgorithm.allCases.map(\.rawValue).joined(separator: ", ")
                throw ValidationError("--alg \(name) is not a supported algorithm (\(known))")
            }
            if let now, parseTime(now) == nil {
                throw ValidationError("--now \(now): expected Unix seconds or ISO 8601 (2026-01-01T12:00:00Z)")
            }
        }

        /// Whether the command line asks for a verification (a key, a JWKS, an issuer, an audience):
        /// without one, `inspect` decodes and shows, and says what it did not check (exit 0).
        var verifies: Bool {
            jwks != nil || issuer != nil || key != nil || secretFile != nil || iss != nil || !aud.isEmpty || anyAudience
        }

        func run() throws {
            if session { return try runSession() }
            let text = try readToken()
            let instant = now.flatMap(parseTime) ?? Date()
            let report = try inspect(text, at: instant)
            if json {
                Terminal.out(InspectOutput.json(report, now: instant, decodeOnly: !verifies))
            } else {
                show(report, at: instant)
            }
            try judge(report)
        }

        /// `text` decoded, and verified when a key is given; an unusable token is a usage error.
        private func inspect(_ text: String, at instant: Date) throws -> TokenInspection {
            let keys = try loadKeys()
            let validation = ClaimValidation(
                issuer: iss ?? issuer, audiences: aud.isEmpty ? nil : Set(aud), leeway: leeway,
                acceptsAnyAudience: anyAudience || !verifies, clock: { instant })
            var verifier: JWTVerifier? = nil
            if !keys.isEmpty {
                let allowed =
                    alg.isEmpty
                    ? keys.reduce(into: Set<JWTAlgorithm>()) { $0.formUnion(KeyLoading.algorithms(for: $1)) }
                    : Set(alg.compactMap(JWTAlgorithm.init(rawValue:)))
                verifier = JWTVerifier(keys: keys, allowedAlgorithms: allowed, validation: validation)
            }
            do {
                return try TokenInspection(text, verifier: verifier, validation: validation)
            } catch {
                if json, !session { Terminal.out(InspectOutput.unusable(error)) }
                // No dots at all: an opaque token (only its issuer can say what it is), not a broken JWT.
                if !text.utf8.contains(UInt8(ascii: ".")), error.code != JWTError.tokenTooLarge {
                    throw CLIError.usage(
                        "not a JWT: this looks like an opaque token (no header.payload.signature); "
                            + "only its issuer can tell what it means (token introspection, RFC 7662)")
                }
                throw CLIError.usage("token is unusable: \(error.message)")
            }
        }

        private func show(_ report: TokenInspection, at instant: Date) {
            // The report's outside parts are made safe inside `human`; its own colors stay.
            Terminal.outPreSanitized(
                InspectOutput.human(report, now: instant, color: Terminal.stdoutIsTerminal, decodeOnly: !verifies))
            if !verifies {
                Terminal.out(
                    "  audience not checked: decoded only, exit 0 (--audience, --key, --jwks or --issuer verify)")
            }
        }

        /// The exit status the report calls for.
        private func judge(_ report: TokenInspection) throws {
            if report.problems.contains(where: { $0.isInputError }) { throw Status.usage }
            // A verification verdict (and exit 1) only when a verification was asked for: decoding
            // alone does not fail on the time claims. A token no one may accept (alg none, claims
            // that are not an object, a NumericDate out of range) fails either way.
            if InspectOutput.verdict(report, decodeOnly: !verifies) == .invalid { throw Status.failed }
        }

        /// `--session`: the stored session's own access and ID tokens (the store as every command
        /// finds it: `$MOOSE_STORE`, else the default), decoded — never refreshed, never printed raw.
        private func runSession() throws {
            guard token == nil else {
                throw CLIError.usage("--session inspects the stored session's tokens: give no TOKEN with it")
            }
            let resolved = try CLIConfig.resolve(
                profile, store: StoreOptions(storePath: nil, keyFile: nil, keyEnvironment: nil, passphraseFile: nil))
            let sessions = try CLISessions(options: resolved.store, create: false, profile: resolved.name)
            let stored: StoredSession?
            do { stored = try sessions.load(resolved.name) } catch {
                throw OAuthContext.fail(error, profile: resolved.name)
            }
            guard let stored, !stored.session.isLoggedOut else {
                throw CLIError.failed("no session for profile \(resolved.name); run \(loginHint(resolved.name))")
            }
            let instant = now.flatMap(parseTime) ?? Date()
            var object: JSONObject = ["profile": .string(resolved.name)]
            var failure: (any Error)? = nil
            for (label, key, value) in [
                ("access token", "access_token", stored.session.tokens.accessToken),
                ("ID token", "id_token", stored.session.tokens.idToken)
            ] {
                guard let value, !value.isEmpty else {
                    if json { object[key] = .null } else { Terminal.out("\(label): none in this session") }
                    continue
                }
                if !json { Terminal.out("\(label) of profile \(resolved.name):") }
                // Without --aud, the audience the session implies: its client for the ID token (OIDC Core
                // §2), its RFC 8707 resource, if it has one, for the access token.
                var values = self
                if aud.isEmpty, !anyAudience {
                    let implied = key == "id_token" ? stored.session.clientID : stored.session.resource
                    values.aud = implied.map { [$0] } ?? []
                }
                let report: TokenInspection
                do {
                    report = try values.inspect(value, at: instant)
                } catch let error as CLIError where !value.utf8.contains(UInt8(ascii: ".")) {
                    _ = error
                    if json {
                        object[key] = .object(["opaque": .bool(true)])
                    } else {
                        Terminal.out("  opaque (not a JWT): only its issuer can tell what it means")
                    }
                    continue
                }
                if json {
                    object[key] =
                        (try? JSONValue(
                            parsing: Array(InspectOutput.json(report, now: instant, decodeOnly: !values.verifies).utf8)))
                        ?? .null
                } else {
                    values.show(report, at: instant)
                }
                do { try values.judge(report) } catch { failure = failure ?? error }
            }
            if json { Terminal.out(JSONValue.object(object).serialized()) }
            if let failure { throw failure }
        }

        /// `text` as an error message shows it: the first 40 characters and "…" when it is longer
        /// (a pasted token or a long path is not echoed whole).
        static func excerpt(_ text: String) -> String {
            text.count > 40 ? String(text.prefix(40)) + "…" : text
        }

        private func readToken() throws -> String {
            let raw: [UInt8]
            if token == nil || token == "-" {
                if token == nil, Terminal.stdinIsTerminal {
                    throw CLIError.usage("no token: pass it as an argument, a file name, or on standard input")
                }
                guard let bytes = Terminal.readStandardInput(limit: 1 << 20) else {
                    throw CLIError.usage("standard input is larger than 1 MiB; that is not a token")
                }
                raw = bytes
            } else if let token, FileManager.default.fileExists(atPath: token) {
                raw = try KeyLoading.readFile(token, what: "token file")
            } else if let token, token.utf8.contains(UInt8(ascii: "/")) {
                // A JWT never has a "/" (base64url): this was meant as a file.
                throw CLIError.usage("no such file: \(Self.excerpt(token))")
            } else {
                raw = Array((token ?? "").utf8)
            }
            guard let text = String(validating: raw, as: UTF8.self) else {
                throw CLIError.usage("the token is not UTF-8 text")
            }
            var trimmed = Substring(text).drop { $0.isWhitespace }
            while let last = trimmed.last, last.isWhitespace { trimmed.removeLast() }
            if trimmed.lowercased().hasPrefix("bearer ") { trimmed = trimmed.dropFirst(7).drop { $0 == " " } }
            guard !trimmed.isEmpty else { throw CLIError.usage("the token is empty") }
            return String(trimmed)
        }

        /// The transport for --jwks and --issuer URLs (trusting --ca-file, else $SSL_CERT_FILE).
        private func transport() throws -> CurlTransport {
            var transport = CLITransport.make(caFile: try caFile.map { try CLITransport.caFile($0) })
            transport.maximumResponseSize = 1 << 20
            return transport
        }

        private func loadKeys() throws -> [JWTKey] {
            var keys: [JWTKey] = []
            if let jwks {
                if jwks.hasPrefix("https://") || jwks.hasPrefix("http://") {
                    keys += try KeyLoading.jwks(try JWKSDownload.fetch(jwks, transport: try transport()), source: jwks)
                } else {
                    keys += try KeyLoading.jwks(try KeyLoading.readFile(jwks, what: "JWKS file"), source: jwks)
                }
            }
            if let issuer {
                try IssuerOption.check(issuer)
                let metadata: ProviderMetadata
                do {
                    let transport = try transport()
                    metadata = try CLIBlocking.run {
                        try await ProviderMetadata.discover(issuer: issuer, transport: transport)
                    }
                } catch let error as OAuthError {
                    if let failure = ConnectionFailure.cliError(error, context: "cannot use issuer \(issuer)") {
                        throw failure
                    }
                    throw CLIError.failed("cannot use issuer \(issuer): \(OAuthContext.text(error))")
                } catch let error as CLIError {
                    throw error
                } catch {
                    throw CLIError.failed("cannot use issuer \(issuer): \(error)")
                }
                guard let jwksURI = metadata.jwksURI else {
                    throw CLIError.failed("issuer \(issuer) publishes no jwks_uri")
                }
                keys += try KeyLoading.jwks(
                    try JWKSDownload.fetch(jwksURI.absoluteString, transport: try transport()),
                    source: jwksURI.absoluteString)
            }
            if let key { keys += try KeyLoading.keyFile(key) }
            if let secretFile {
                let secret = try KeyLoading.readFile(secretFile, what: "secret file", limit: 64 * 1024)
                guard !secret.isEmpty else { throw CLIError.usage("secret file \(secretFile) is empty") }
                keys.append(JWTKey(secret: secret))
            }
            return keys
        }
    }
}

/// Parses `--now`: Unix seconds (integer or decimal) or ISO 8601.
func parseTime(_ text: String) -> Date? {
    if let seconds = Double(text), seconds.isFinite { return Date(timeIntervalSince1970: seconds) }
    return ISO8601.date(from: text)
}
