#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A `TokenInspection` said for people and for programs: the header, the claims and their times, the
/// signature, and one verdict with every reason — as terminal text (`text(color:)`) and as one JSON
/// object (`json`). What `moose inspect` prints, for a tool or a test of one's own that wants the same.
///
/// Pure: no I/O, no clock (the instant is given). Every piece of text a token supplies (header and
/// claim values, a text payload, an `alg` or a `kid`, and the problems that quote them) is escaped in
/// `text(color:)` — control characters, C1 controls (CSI), line separators and bidirectional controls
/// become visible `\u{…}` escapes — so the text can go to a terminal as it is. The JSON escapes them as
/// JSON does (`JSONValue`'s serializer).
///
/// ```swift
/// let inspection = try TokenInspection(token, verifier: verifier, validation: validation)
/// let report = InspectionReport(inspection, now: Date())
/// print(report.text())                    // Header, Claims, Times, Signature, and "✔ valid: …"
/// let object = report.json                // {"verdict": "valid", "header": …, "reasons": […]}
/// ```
public struct InspectionReport: Sendable {
    /// Whether the report judges a verification or only shows a decoded token.
    public enum Mode: Sendable, Hashable {
        /// A verification was asked for: every problem fails the verdict.
        case verification
        /// Only decoding was asked for: the time claims (`exp`, `nbf`, `iat`) and an unchecked audience
        /// are shown but do not fail the verdict (`judgedOnlyWhenVerifying`); what no one may accept
        /// (`alg` `none`, claims that are not an object, a NumericDate out of range) fails either way.
        case decodeOnly
    }

    /// The caller's words for what to do next, for the two cases a report cannot finish alone: how
    /// to have the audience checked, and how to have the signature verified. A command-line tool
    /// names its own options here; the defaults speak of the library's settings.
    public struct Hints: Sendable, Hashable {
        /// Said after "audience not checked: " for a token that names an audience none was given to
        /// check against (RFC 7519 §4.1.3), followed by the audiences the token names.
        public var checkAudience: String
        /// Said in parentheses after "signature NOT verified" when a token was decoded without a key.
        public var verifySignature: String

        /// Hints in the library's words, or the caller's.
        public init(
            checkAudience: String =
                "give the audience to check (ClaimValidation.audiences), or accept any audience explicitly",
            verifySignature: String = "give a verification key"
        ) {
            self.checkAudience = checkAudience
            self.verifySignature = verifySignature
        }
    }

    /// The claims shown with their date and relative time, in this order: `iat`, `nbf`, `exp`,
    /// `auth_time` (NumericDates, RFC 7519 §2 and §4.1; `auth_time`: OpenID Connect Core §2).
    public static let timeClaims = ["iat", "nbf", "exp", "auth_time"]

    /// The checks that count only in `Mode.verification`: decoding alone shows them
    /// ("● decoded: token expired …") but does not fail on them.
    public static let judgedOnlyWhenVerifying: Set<JWTError.Code> = [
        JWTError.expired, JWTError.notYetValid, JWTError.issuedInFuture, JWTError.audienceNotChecked
    ]

    /// The inspection reported on.
    public let inspection: TokenInspection
    /// The instant relative times are said against ("expired 3m ago"); the inspection's own clock
    /// should say the same instant.
    public let now: Date
    /// Whether a verification was asked for.
    public let mode: Mode
    /// The caller's words for what to do next.
    public let hints: Hints

    /// A report of `inspection` as of `now`.
    public init(_ inspection: TokenInspection, now: Date, mode: Mode = .verification, hints: Hints = Hints()) {
        self.inspection = inspection
        self.now = now
        self.mode = mode
        self.hints = hints
    }

    /// The problems that make the verdict: all of them in `Mode.verification`; in `Mode.decodeOnly`,
    /// those not in `judgedOnlyWhenVerifying`.
    public var failures: [JWTError] {
        inspection.problems.filter { mode == .verification || !Self.judgedOnlyWhenVerifying.contains($0.code) }
    }

    /// The verdict in one vocabulary for both modes: `invalid` only when `failures` is not empty.
    public var verdict: TokenInspection.Verdict {
        inspection.verdict == .invalid && failures.isEmpty ? .decoded : inspection.verdict
    }

    /// `true` when the only failures are an unchecked audience: the token may be fine, but nothing said
    /// whom it must be for ("not accepted" rather than "invalid").
    public var isOnlyNotAccepted: Bool {
        let failures = self.failures
        return !failures.isEmpty && failures.allSatisfy { $0.code == JWTError.audienceNotChecked }
    }

    /// `problem`'s message as the report says it: an unchecked audience in `hints`' words, with the
    /// audiences the token names; any other problem as its own message. Not escaped.
    public func message(for problem: JWTError) -> String {
        guard problem.code == JWTError.audienceNotChecked else { return problem.message }
        let named = inspection.claims?.audience.map {
            " (the token is for " + $0.map { "\"\($0)\"" }.joined(separator: ", ") + ")"
        }
        return "audience not checked: " + hints.checkAudience + (named ?? "")
    }

    /// "3m ago" / "in 4m 12s (in the future)" for a time claim; "expired 3m ago" / "valid for 4m 12s"
    /// for `exp`; "valid since 3m ago" / "not valid for another 4m" for `nbf`.
    public static func relativeTime(of claim: String, _ date: Date, now: Date) -> String {
        let delta = date.timeIntervalSince(now)
        let span = DurationText.describe(delta)
        switch claim {
        case "exp": return delta > 0 ? "valid for \(span)" : "expired \(span) ago"
        case "nbf": return delta > 0 ? "not valid for another \(span)" : "valid since \(span) ago"
        default: return delta > 0 ? "in \(span) (in the future)" : "\(span) ago"
        }
    }

    /// `true` when `token` has no "." at all: no compact JWS (RFC 7515 §7.1) but an opaque token,
    /// which only its issuer can read (token introspection, RFC 7662) — not a broken JWT.
    public static func looksOpaque(_ token: String) -> Bool { !token.utf8.contains(UInt8(ascii: ".")) }

    /// What to say of `token` when `TokenInspection` refused it as unusable with `error`: that it looks
    /// opaque (`looksOpaque`, unless it was only too large), else "token is unusable: " and the reason.
    /// Not escaped.
    public static func unusableText(_ error: JWTError, token: String) -> String {
        if looksOpaque(token), error.code != JWTError.tokenTooLarge {
            return "not a JWT: this looks like an opaque token (no header.payload.signature); "
                + "only its issuer can tell what it means (token introspection, RFC 7662)"
        }
        return "token is unusable: \(error.message)"
    }

    /// The JSON object for a token `TokenInspection` refused as unusable:
    /// `{"verdict": "unusable", "reasons": [{"code": …, "message": …}]}`.
    public static func unusableJSON(_ error: JWTError) -> JSONValue {
        .object(["verdict": "unusable", "reasons": [reason(error, message: error.message)]])
    }
}

extension InspectionReport {
    /// The report for a person: "Header", "Claims" (or "Payload (not a JSON object)"), "Times",
    /// "Signature", then the verdict line ("✔ valid", "● decoded", "✘ invalid" or "✘ not accepted")
    /// and one "also:" line per further failure. With `color`, headings are bold and the verdict green,
    /// yellow or red (ANSI SGR). Token-supplied text is escaped (see the type's discussion); no final
    /// newline.
    public func text(color: Bool = false) -> String {
        func paint(_ text: String, _ code: String) -> String { color ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
        var out = ""
        let jws = inspection.jws
        out += paint("Header", "1") + "\n" + Self.indent(JSONValue.object(jws.header.fields).prettyPrinted()) + "\n"
        if let claims = inspection.claims {
            out += paint("Claims", "1") + "\n" + Self.indent(JSONValue.object(claims.fields).prettyPrinted()) + "\n"
            let times = Self.timeClaims.compactMap { name -> String? in
                guard let seconds = claims[name]?.doubleValue else { return nil }
                let date = Date(timeIntervalSince1970: seconds)
                let label = name + String(repeating: " ", count: max(0, 9 - name.count))
                return "  \(label) \(ISO8601.string(from: date))  \(Self.relativeTime(of: name, date, now: now))"
            }
            if !times.isEmpty {
                out += paint("Times", "1") + " (now \(ISO8601.string(from: now)))\n" + Self.lines(times) + "\n"
            }
        } else if let text = inspection.payloadText {
            out += paint("Payload (not a JSON object)", "1") + "\n" + Self.indent(TerminalText.safe(text)) + "\n"
        }
        out += paint("Signature", "1") + "\n  " + TerminalText.safe(signatureLine) + "\n"
        func said(_ problem: JWTError) -> String { TerminalText.safe(message(for: problem)) }
        let failures = self.failures
        switch verdict {
        case .valid:
            out += paint("✔ valid", "32") + ": signature verified, every check passed"
        case .decoded where !inspection.problems.isEmpty:
            // Decode only: what a verification would refuse is said, without a verdict of "invalid".
            out +=
                paint("● decoded", "33") + ": " + inspection.problems.map(said).joined(separator: "; ")
                + " (not verified: decoded only)"
        case .decoded:
            out +=
                paint("● decoded", "33") + ": claims checked, signature NOT verified ("
                + TerminalText.safe(hints.verifySignature) + ")"
        case .invalid:
            out += paint(isOnlyNotAccepted ? "✘ not accepted" : "✘ invalid", "31") + ": "
            if let first = failures.first { out += said(first) }
            for problem in failures.dropFirst() { out += "\n  also: " + said(problem) }
        }
        return out
    }

    /// The report for a program: `verdict` (`valid`, `decoded` or `invalid`, as `verdict`), `header`,
    /// `claims` (or `null`, and `payload` for a text payload), `signature` (`alg`, `status`:
    /// `verified`, `failed` or `not-checked`, and `kid`), `times` (per time claim: `unix`, `iso8601`,
    /// `relative`), `now`, and `reasons` (every problem: `code`, `message`, and `field` or `position`
    /// when known).
    public var json: JSONValue {
        var object: JSONObject = [:]
        object["verdict"] = .string(verdict.rawValue)
        object["header"] = .object(inspection.jws.header.fields)
        object["claims"] = inspection.claims.map { .object($0.fields) } ?? .null
        if let text = inspection.payloadText { object["payload"] = .string(text) }
        var signature: JSONObject = ["alg": .string(inspection.jws.header.algorithm)]
        switch inspection.signature {
        case .notChecked: signature["status"] = "not-checked"
        case .verified(let kid, _):
            signature["status"] = "verified"
            signature["kid"] = kid.map { .string($0) } ?? .null
        case .failed: signature["status"] = "failed"
        }
        object["signature"] = .object(signature)
        var times: JSONObject = [:]
        for name in Self.timeClaims {
            guard let seconds = inspection.claims?[name]?.doubleValue else { continue }
            let date = Date(timeIntervalSince1970: seconds)
            times[name] = .object([
                "unix": .number(JSONNumber(seconds)), "iso8601": .string(ISO8601.string(from: date)),
                "relative": .string(Self.relativeTime(of: name, date, now: now))
            ])
        }
        object["times"] = .object(times)
        object["now"] = .string(ISO8601.string(from: now))
        object["reasons"] = .array(inspection.problems.map { Self.reason($0, message: message(for: $0)) })
        return .object(object)
    }

    /// "ES256, 64 bytes, verified with key "k1"", "…, not checked", or "…, FAILED: reason". Not escaped.
    var signatureLine: String {
        let size = inspection.jws.signature.count
        switch inspection.signature {
        case .notChecked: return "\(inspection.jws.header.algorithm), \(size) bytes, not checked"
        case .verified(let kid, let algorithm):
            return "\(algorithm), \(size) bytes, verified" + (kid.map { " with key \"\($0)\"" } ?? "")
        case .failed:
            let reason = inspection.problems.first.map(\.message) ?? ""
            return "\(inspection.jws.header.algorithm), \(size) bytes, FAILED: \(reason)"
        }
    }

    static func reason(_ error: JWTError, message: String) -> JSONValue {
        var object: JSONObject = ["code": .string(error.code.description), "message": .string(message)]
        if let field = error.field { object["field"] = .string(field) }
        if let position = error.position { object["position"] = .number(JSONNumber(Int64(position))) }
        return .object(object)
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

    /// `text` with two spaces before each line.
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
}

/// Text from outside made safe for a terminal.
package enum TerminalText {
    /// `text` with every character that could drive a terminal or disguise output shown as a visible
    /// escape instead: C0 controls (but tab, and newline when `keepNewlines`), DEL, C1 controls
    /// (U+0080–U+009F, CSI included), line separators and bidirectional controls — `ESC` becomes
    /// `\u{1b}`. Total over any string.
    package static func safe(_ text: String, keepNewlines: Bool = true) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value == 0x09 || (value == 0x0A && keepNewlines) {
                out.unicodeScalars.append(scalar)
            } else if value < 0x20 || (0x7F...0x9F).contains(value) || (0x2028...0x2029).contains(value)
                || JSONValue.isBidiControl(value)
            {
                out += "\\u{" + String(value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
