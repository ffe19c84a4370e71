#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

extension URL {
    /// The URL with the values of secret-looking query parameters replaced by `***` (and any
    /// user:password removed), for messages and logs.
    public var redactedForLogs: String { Redaction.url(absoluteString) }
}

/// What is never logged or put in an error message.
public enum Redaction {
    /// Query and form fields whose values are credentials.
    public static let sensitiveFields: Set<String> = [
        "access_token", "refresh_token", "id_token", "token", "code", "code_verifier", "client_secret",
        "client_assertion", "password", "secret", "assertion", "device_code", "subject_token", "actor_token",
        "api_key", "apikey", "key", "sig", "signature", "state", "nonce", "id_token_hint", "logout_hint"
    ]

    /// A URL with sensitive query values and userinfo replaced.
    public static func url(_ text: String) -> String {
        var text = text
        let chars = Array(text)
        if let colon = (0..<max(0, chars.count - 2)).first(where: {
            chars[$0] == ":" && chars[$0 + 1] == "/" && chars[$0 + 2] == "/"
        }) {
            let start = colon + 3
            var index = start
            while index < chars.count, chars[index] != "/", chars[index] != "?", chars[index] != "#",
                chars[index] != "@"
            { index += 1 }
            if index < chars.count, chars[index] == "@" {
                text = String(chars[..<start]) + "***@" + String(chars[(index + 1)...])
            }
        }
        guard let question = text.firstIndex(of: "?") else { return text }
        var fragment = ""
        var query = String(text[text.index(after: question)...])
        if let hash = query.firstIndex(of: "#") {
            fragment = String(query[hash...])
            query = String(query[..<hash])
        }
        return String(text[...question]) + form(query) + fragment
    }

    /// What an error message may quote of a response body, free of anything that could be a
    /// secret: a JSON body is described by its member names only (values are never shown), an HTML
    /// page by its size, and other text is cut to 200 bytes with form-encoded secrets and every
    /// token-like run of 20 or more characters replaced by `***` and control characters removed.
    ///
    /// With `showingValues`, a JSON object's top-level string, number and boolean members are shown
    /// too (each cut to 100 characters), except those named in `sensitiveFields` and any value that
    /// looks like a token: for an API's own error bodies (`{"code":"E418","message":"…"}`), never
    /// for OAuth traffic.
    public static func body(_ bytes: [UInt8], showingValues: Bool = false) -> String {
        let first = bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        if showingValues, first == UInt8(ascii: "{"),
            case .object(let members)? = try? JSONDecoder().decode(JSON.self, from: Data(bytes))
        {
            let shown = members.keys.sorted().prefix(12).map { key -> String in
                let name = String(
                    key.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(40).map(Character.init))
                // "code" is an API's error code here (OAuth traffic never shows values); a long,
                // token-like value is starred by the text rule below anyway.
                if key.lowercased() != "code", sensitiveFields.contains(key.lowercased()) { return "\(name): ***" }
                switch members[key] {
                case .string(let text)?: return "\(name): \"\(body(Array(text.utf8.prefix(100))))\""
                case .number(let number)?: return "\(name): \(number)"
                case .bool(let flag)?: return "\(name): \(flag)"
                default: return "\(name): …"
                }
            }
            return "{" + shown.joined(separator: ", ") + (members.count > 12 ? ", …" : "") + "}"
        }
        if first == UInt8(ascii: "{") {
            if let keys = try? JSONDecoder().decode(MemberNames.self, from: Data(bytes)).names {
                let shown = keys.prefix(12).map { name in
                    String(
                        name.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(40).map(
                            Character.init))
                }
                return
                    "a JSON object (\(bytes.count) bytes) with members \(shown.joined(separator: ", "))\(keys.count > 12 ? ", …" : "") (values not shown)"
            }
            return "a JSON-like body (\(bytes.count) bytes, not shown)"
        }
        if first == UInt8(ascii: "[") { return "a JSON array or malformed JSON (\(bytes.count) bytes, not shown)" }
        let text = String(decoding: bytes.prefix(200), as: UTF8.self)
        let lower = text.lowercased()
        if lower.contains("<html") || lower.contains("<!doctype") || lower.contains("<body") {
            return "an HTML page (\(bytes.count) bytes)"
        }
        var out = ""
        var run = ""
        func flush() { out += run.count >= 20 ? "***" : run; run = "" }
        for scalar in form(text).unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) {
                flush(); out += " "; continue
            }
            if scalar.isASCII,
                TokenCharacters.isAlphanumeric(UInt8(scalar.value)) || "-._~+/=".unicodeScalars.contains(scalar)
            {
                run.unicodeScalars.append(scalar)
            } else {
                flush()
                out.unicodeScalars.append(scalar)
            }
        }
        flush()
        return out + (bytes.count > 200 ? "…" : "")
    }

    /// Decodes only the member names of a JSON object.
    private struct MemberNames: Decodable {
        let names: [String]
        init(from decoder: any Decoder) throws {
            names = try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue)
        }
        struct AnyKey: CodingKey {
            let stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
    }

    /// A form-encoded (or query) string with sensitive values replaced by `***`.
    public static func form(_ text: String) -> String {
        text.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
            let name = pair[..<equals].lowercased()
            let bare = name.hasSuffix("%5b%5d") ? String(name.dropLast(6)) : name
            return sensitiveFields.contains(bare) ? "\(pair[..<equals])=***" : String(pair)
        }.joined(separator: "&")
    }
}
