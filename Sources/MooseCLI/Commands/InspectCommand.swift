import ArgumentParser
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseOAuthSystem
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
            without --audience or --any-audience), 2 unusable input or usage, 3 the issuer or the JWKS URL \
            could not be reached (try again later). Decoding alone (no key, issuer or audience given) shows \
            an expired token as such and exits 0.

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

        /// What to do next, in this command's options (the library's report names none).
        static let hints = InspectionReport.Hints(
            checkAudience: "pass --audience AUDIENCE (or --any-audience to accept any)",
            verifySignature: "give --jwks, --key or --secret-file")

        /// The instant times are judged at: `--now`, else the clock's.
        private var instant: Date { now.flatMap(parseTime) ?? Date() }

        func run() throws {
            if session { return try runSession() }
            let text = try readToken()
            let report = try inspect(text, keys: try loadKeys(), at: instant)
            if json { Terminal.out(report.json.prettyPrinted()) } else { show(report) }
            try judge(report)
        }

        /// `text` decoded, and verified when there are keys; an unusable token is a usage error.
        private func inspect(_ text: String, keys: VerificationKeys, at instant: Date) throws -> InspectionReport {
            let validation = ClaimValidation(
                issuer: iss ?? issuer, audiences: aud.isEmpty ? nil : Set(aud), leeway: leeway,
                acceptsAnyAudience: anyAudience || !verifies, clock: { instant })
            let allowed = alg.isEmpty ? nil : Set(alg.compactMap(JWTAlgorithm.init(rawValue:)))
            do {
                let verifier = keys.verifier(allowedAlgorithms: allowed, validation: validation)
                let inspection = try TokenInspection(text, verifier: verifier, validation: validation)
                return InspectionReport(
                    inspection, now: instant, mode: verifies ? .verification : .decodeOnly, hints: Self.hints)
            } catch {
                if json, !session { Terminal.out(InspectionReport.unusableJSON(error).prettyPrinted()) }
                throw CLIError.usage(InspectionReport.unusableText(error, token: text))
            }
        }

        private func show(_ report: InspectionReport) {
            // The report escapes what the token supplied; its own colors stay.
            Terminal.outPreSanitized(report.text(color: Terminal.stdoutIsTerminal))
            if !verifies {
                Terminal.out(
                    "  audience not checked: decoded only, exit 0 (--audience, --key, --jwks or --issuer verify)")
            }
        }

        /// The exit status the report calls for: 2 for unusable input (a key that is no key), 1 for an
        /// `invalid` verdict (decoding alone fails only on what no one may accept).
        private func judge(_ report: InspectionReport) throws {
            if report.inspection.problems.contains(where: { $0.isInputError }) { throw Status.usage }
            if report.verdict == .invalid { throw Status.failed }
        }

        /// `--session`: the stored session's own access and ID tokens (the store as every command
        /// finds it: `$MOOSE_STORE`, else the default), decoded — never refreshed, never printed raw.
        private func runSession() throws {
            guard token == nil else {
                throw CLIError.usage("--session inspects the stored session's tokens: give no TOKEN with it")
            }
            let resolved = try CLIConfig.resolve(
                profile, store: StoreOptions(storePath: nil, keyFile: nil, keyEnvironment: nil, passphraseFile: nil))
            let session = try OAuthContext(options: resolved.store, create: false, profile: resolved.name)
                .session(of: resolved.name).session
            let instant = self.instant
            let keys = try loadKeys()
            var object: JSONObject = ["profile": .string(resolved.name)]
            var failure: (any Error)? = nil
            for (label, key, value) in [
                ("access token", "access_token", session.tokens.accessToken),
                ("ID token", "id_token", session.tokens.idToken)
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
                    let implied = key == "id_token" ? session.clientID : session.resource
                    if let implied { values.aud = [implied] }
                }
                let report: InspectionReport
                do {
                    report = try values.inspect(value, keys: keys, at: instant)
                } catch is CLIError where InspectionReport.looksOpaque(value) {
                    if json {
                        object[key] = .object(["opaque": .bool(true)])
                    } else {
                        Terminal.out("  opaque (not a JWT): only its issuer can tell what it means")
                    }
                    continue
                }
                if json { object[key] = report.json } else { values.show(report) }
                do { try values.judge(report) } catch { if failure == nil { failure = error } }
            }
            if json { Terminal.out(JSONValue.object(object).serialized()) }
            if let failure { throw failure }
        }

        /// `text` as an error message shows it: the first 40 characters and "…" when it is longer
        /// (a pasted token or a long path is not echoed whole).
        static func excerpt(_ text: String) -> String {
            text.count > 40 ? String(text.prefix(40)) + "…" : text
        }

        /// The token: from standard input ("-" or no argument), from the file the argument names, or
        /// the argument itself (`PresentedToken`: trimmed, "Bearer " dropped).
        private func readToken() throws -> String {
            do {
                guard let token, token != "-" else {
                    if token == nil, Terminal.stdinIsTerminal {
                        throw CLIError.usage("no token: pass it as an argument, a file name, or on standard input")
                    }
                    guard let bytes = try Terminal.readStandardInput(limit: PresentedToken.maximumSize) else {
                        throw CLIError.usage("standard input is larger than 1 MiB; that is not a token")
                    }
                    return try PresentedToken.text(from: bytes)
                }
                if FileManager.default.fileExists(atPath: token) { return try PresentedToken.read(file: token) }
                // A JWT never has a "/" (base64url): this was meant as a file.
                if token.utf8.contains(UInt8(ascii: "/")) {
                    throw CLIError.usage("no such file: \(Self.excerpt(token))")
                }
                return try PresentedToken.text(from: Array(token.utf8))
            } catch let error as VerificationInputError {
                throw CLIError.usage(error.message)
            }
        }

        /// Where --jwks, --issuer, --key and --secret-file say keys are, in that order (none: decode only).
        private func keySources() throws -> [VerificationKeys.Source] {
            var sources: [VerificationKeys.Source] = []
            if let jwks { sources.append(.jwks(jwks)) }
            if let issuer {
                try IssuerOption.check(issuer)
                sources.append(.issuer(issuer))
            }
            if let key { sources.append(.keyFile(key)) }
            if let secretFile { sources.append(.secretFile(secretFile)) }
            return sources
        }

        /// The keys of `keySources()`; URLs fetched trusting --ca-file, else $SSL_CERT_FILE.
        private func loadKeys() throws -> VerificationKeys {
            let sources = try keySources()
            let keys: VerificationKeys
            do {
                if sources.contains(where: \.isRemote) {
                    var transport = CurlTransport(caFile: try caFile.map { try CLITransport.caFile($0) })
                    transport.maximumResponseSize = VerificationKeys.maximumDocumentSize
                    let remote = transport
                    keys = try CLIBlocking.run { try await VerificationKeys.load(sources, transport: remote) }
                } else {
                    keys = try VerificationKeys.read(sources)
                }
            } catch let error as VerificationInputError {
                throw Self.cliError(error)
            }
            for reason in keys.skipped { Terminal.error("moose: warning: skipped \(reason)") }
            return keys
        }

        /// The CLI's error for a key source's failure: unusable input is a usage error (exit 2); a host
        /// that does not resolve or speak TLS is said as such (`ConnectionFailure`); an issuer or JWKS
        /// not reached now is exit 3; a TLS failure names --ca-file; anything else fails (exit 1).
        static func cliError(_ error: VerificationInputError) -> CLIError {
            if error.isInputError { return .usage(error.message) }
            if let cause = error.underlying as? OAuthError, case .issuer(let issuer)? = error.source {
                if let failure = ConnectionFailure.cliError(cause, context: "cannot use issuer \(issuer)") {
                    return failure
                }
                if cause.code == OAuthError.transient {
                    let next = "check the network (or the issuer's status) and try again"
                    return CLIError(
                        message: "cannot use issuer \(issuer): \(OAuthContext.text(cause, next: next))",
                        status: Status.unreachable.rawValue)
                }
                return .failed("cannot use issuer \(issuer): \(OAuthContext.text(cause))")
            }
            if let cause = error.underlying as? HTTPRequestError {
                if let failure = ConnectionFailure.cliError(cause, context: "cannot fetch the JWKS") { return failure }
                // Not reached now (refused, timed out, offline): exit 3, as for an issuer.
                if [HTTPRequestError.transport, HTTPRequestError.timedOut, HTTPRequestError.offline].contains(
                    cause.code)
                {
                    return CLIError(
                        message:
                            "\(error.message); check the network (or the server's status) and try again [\(cause.code)]",
                        status: Status.unreachable.rawValue)
                }
                if cause.code == HTTPRequestError.tls {
                    return .failed(
                        error.message + "; if its certificate comes from a private CA, pass --ca-file PEM "
                            + "(or set SSL_CERT_FILE) [tls]")
                }
            }
            return .failed(error.message)
        }
    }
}

/// Parses `--now`: Unix seconds (integer or decimal) or ISO 8601.
func parseTime(_ text: String) -> Date? {
    if let seconds = Double(text), seconds.isFinite { return Date(timeIntervalSince1970: seconds) }
    return ISO8601.date(from: text)
}
