import MooseHTTP
import MooseJWT
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Formats a `TokenInspection` for people and for scripts.
enum InspectOutput {
    static let timeClaims = ["iat", "nbf", "exp", "auth_time"]

    /// "3m ago" / "in 4m 12s" for a time claim; "expired 3m ago" / "valid for 4m 12s" for exp.
    static func relative(_ name: String, _ date: Date, now: Date) -> String {
        let delta = date.timeIntervalSince(now)
        let span = DurationText.describe(delta)
        switch name {
        case "exp": return delta > 0 ? "valid for \(span)" : "expired \(span) ago"
        case "nbf": return delta > 0 ? "not valid for another \(span)" : "valid since \(span) ago"
        default: return delta > 0 ? "in \(span) (in the future)" : "\(span) ago"
        }
    }

    /// The checks that count only when a verification was asked for: decoding alone shows them
    /// ("● decoded: token expired …") but does not fail on them (exit 0).
    static let judgedOnlyWhenVerifying = [
        JWTError.expired, JWTError.notYetValid, JWTError.issuedInFuture, JWTError.audienceNotChecked
    ]

    /// The problems that make the verdict: all of them when verifying; in decode-only mode, only
    /// those that no one may accept (alg none, claims that are not an object, a date out of range).
    static func failing(_ report: TokenInspection, decodeOnly: Bool) -> [JWTError] {
        report.problems.filter { problem in
            !decodeOnly || !judgedOnlyWhenVerifying.contains(where: { $0 == problem.code })
        }
    }

    /// The verdict in one vocabulary for both modes: `invalid` only for what fails.
    static func verdict(_ report: TokenInspection, decodeOnly: Bool) -> TokenInspection.Verdict {
        report.verdict == .invalid && failing(report, decodeOnly: decodeOnly).isEmpty ? .decoded : report.verdict
    }

    static func human(_ report: TokenInspection, now: Date, color: Bool, decodeOnly: Bool = false) -> String {
        func paint(_ text: String, _ code: String) -> String { color ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
        var out = ""
        out += paint("Header", "1") + "\n" + indent(JSONValue.object(report.jws.header.fields).prettyPrinted()) + "\n"
        if let claims = report.claims {
            out += paint("Claims", "1") + "\n" + indent(JSONValue.object(claims.fields).prettyPrinted()) + "\n"
            let times = timeClaims.compactMap { name -> String? in
                guard let seconds = claims[name]?.doubleValue else { return nil }
                let date = Date(timeIntervalSince1970: seconds)
                let label = name + String(repeating: " ", count: max(0, 9 - name.count))
                return "  \(label) \(ISO8601.string(from: date))  \(relative(name, date, now: now))"
            }
            if !times.isEmpty {
                out += paint("Times", "1") + " (now \(ISO8601.string(from: now)))\n" + lines(times) + "\n"
            }
        } else if let text = report.payloadText {
            out += paint("Payload (not a JSON object)", "1") + "\n" + indent(Terminal.safe(text)) + "\n"
        }
        out += paint("Signature", "1") + "\n  " + Terminal.safe(signatureLine(report)) + "\n"
        let audience = report.claims?.audience
        func said(_ problem: JWTError) -> String { Terminal.safe(message(problem, audience: audience)) }
        let failing = Self.failing(report, decodeOnly: decodeOnly)
        let verdictLine: String
        switch verdict(report, decodeOnly: decodeOnly) {
        case .valid:
            verdictLine = paint("✔ valid", "32") + ": signature verified, every check passed"
        case .decoded where !report.problems.isEmpty:
            // Decode only: what a verification would refuse is said, without a verdict of "invalid".
            verdictLine =
                paint("● decoded", "33") + ": " + report.problems.map(said).joined(separator: "; ")
                + " (not verified: decoded only)"
        case .decoded:
            verdictLine =
                paint("● decoded", "33")
                + ": claims checked, signature NOT verified (give --jwks, --key or --secret-file)"
        case .invalid:
            // Only an unchecked audience: the token may be fine, but nothing said whom it must be for.
            let label = failing.allSatisfy { $0.code == JWTError.audienceNotChecked } ? "✘ not accepted" : "✘ invalid"
            verdictLine = paint(label, "31") + ": " + (failing.first.map(said) ?? "")
        }
        out += verdictLine
        if verdict(report, decodeOnly: decodeOnly) == .invalid {
            for problem in failing.dropFirst() { out += "\n  also: " + said(problem) }
        }
        return out
    }

    /// A problem's message in the CLI's words, with what to pass on the command line where that helps.
    static func message(_ problem: JWTError, audience: [String]? = nil) -> String {
        guard problem.code == JWTError.audienceNotChecked else { return problem.message }
        let named = audience.map { " (the token is for " + $0.map { "\"\($0)\"" }.joined(separator: ", ") + ")" } ?? ""
        return "audience not checked: pass --audience AUDIENCE (or --any-audience to accept any)" + named
    }

    static func signatureLine(_ report: TokenInspection) -> String {
        let size = report.jws.signature.count
        switch report.signature {
        case .notChecked: return "\(report.jws.header.algorithm), \(size) bytes, not checked"
        case .verified(let kid, let algorithm):
            return "\(algorithm), \(size) bytes, verified" + (kid.map { " with key \"\($0)\"" } ?? "")
        case .failed:
            return "\(report.jws.header.algorithm), \(size) bytes, FAILED: \(report.problems.first?.message ?? "")"
        }
    }

    /// `lines` joined by newlines (by hand: a generic `joined` costs run-time metadata look-ups).
    static func lines(_ lines: [String]) -> String {
        var text = ""
        for (index, line) in lines.enumerated() {
            if index > 0 { text += "\n" }
            text += line
        }
        return text
    }

    static func indent(_ text: String) -> String {
        // Byte by byte (a generic split and join cost `moose inspect` a fifth of its instructions).
        var bytes: [UInt8] = [0x20, 0x20]
        bytes.reserveCapacity(text.utf8.count + text.utf8.count / 8 + 2)
        for byte in text.utf8 {
            bytes.append(byte)
            if byte == 0x0A { bytes.append(0x20); bytes.append(0x20) }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func json(_ report: TokenInspection, now: Date, decodeOnly: Bool = false) -> String {
        var object: JSONObject = [:]
        object["verdict"] = .string(verdict(report, decodeOnly: decodeOnly).rawValue)
        object["header"] = .object(report.jws.header.fields)
        object["claims"] = report.claims.map { .object($0.fields) } ?? .null
        if let text = report.payloadText { object["payload"] = .string(text) }
        var signature: JSONObject = ["alg": .string(report.jws.header.algorithm)]
        switch report.signature {
        case .notChecked: signature["status"] = "not-checked"
        case .verified(let kid, _):
            signature["status"] = "verified"
            signature["kid"] = .string(kid)
        case .failed: signature["status"] = "failed"
        }
        object["signature"] = .object(signature)
        var times: JSONObject = [:]
        for name in timeClaims {
            guard let seconds = report.claims?[name]?.doubleValue else { continue }
            let date = Date(timeIntervalSince1970: seconds)
            times[name] = .object([
                "unix": .number(JSONNumber(seconds)), "iso8601": .string(ISO8601.string(from: date)),
                "relative": .string(relative(name, date, now: now))
            ])
        }
        object["times"] = .object(times)
        object["now"] = .string(ISO8601.string(from: now))
        let audience = report.claims?.audience
        object["reasons"] = .array(report.problems.map { reason($0, audience: audience) })
        return JSONValue.object(object).prettyPrinted()
    }

    static func unusable(_ error: JWTError) -> String {
        JSONValue.object(["verdict": "unusable", "reasons": [reason(error)]]).prettyPrinted()
    }

    static func reason(_ error: JWTError, audience: [String]? = nil) -> JSONValue {
        var object: JSONObject = [
            "code": .string(error.code.description), "message": .string(message(error, audience: audience))
        ]
        if let field = error.field { object["field"] = .string(field) }
        if let position = error.position { object["position"] = .number(JSONNumber(Int64(position))) }
        return .object(object)
    }
}

/// Fetches a JWKS over HTTP(S) for `moose inspect --jwks URL`.
enum JWKSDownload {
    static func fetch(_ text: String, transport: CurlTransport) throws -> [UInt8] {
        guard let url = URL(string: text), url.host != nil else {
            throw CLIError.usage("--jwks \(text) is not a valid URL")
        }
        // Keys decide what "verified" means: never fetched in clear text from another machine.
        guard TransportSecurity.permits(url) else {
            throw CLIError.usage(
                "--jwks \(url.redactedForLogs) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)"
            )
        }
        let request = APIRequest(
            url: url, headerFields: [.accept: "application/jwk-set+json, application/json"], timeout: 15)
        let response: APIResponse
        do {
            response = try transport.sendBlocking(request)
        } catch let error as HTTPRequestError where ConnectionFailure.cliError(error) != nil {
            throw ConnectionFailure.cliError(error, context: "cannot fetch the JWKS") ?? error
        } catch let error as HTTPRequestError where error.code == HTTPRequestError.tls {
            throw CLIError.failed(
                "cannot fetch the JWKS: the TLS connection to \(url.redactedForLogs) failed (\(error.message)); "
                    + "if its certificate comes from a private CA, pass --ca-file PEM (or set SSL_CERT_FILE) [tls]")
        } catch {
            throw CLIError.failed("cannot fetch the JWKS: \(error)")
        }
        guard response.status.code == 200 else {
            throw CLIError.failed("cannot fetch the JWKS: \(url.redactedForLogs) answered HTTP \(response.status.code)")
        }
        return Array(response.body)
    }
}
