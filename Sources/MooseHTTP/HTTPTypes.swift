#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// An HTTP method. A struct with static members rather than an enum, so extension methods
/// (`PROPFIND`…) can be written without a string typo anywhere else.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The method token, upper-case.
    public let rawValue: String

    /// A method from its token.
    public init(rawValue: String) { self.rawValue = rawValue.uppercased() }

    /// `GET`
    public static let get = HTTPMethod(rawValue: "GET")
    /// `HEAD`
    public static let head = HTTPMethod(rawValue: "HEAD")
    /// `POST`
    public static let post = HTTPMethod(rawValue: "POST")
    /// `PUT`
    public static let put = HTTPMethod(rawValue: "PUT")
    /// `PATCH`
    public static let patch = HTTPMethod(rawValue: "PATCH")
    /// `DELETE`
    public static let delete = HTTPMethod(rawValue: "DELETE")
    /// `OPTIONS`
    public static let options = HTTPMethod(rawValue: "OPTIONS")

    /// RFC 9110 §9.2.2: methods whose repetition has the same effect as one request.
    public var isIdempotent: Bool { [.get, .head, .put, .delete, .options].contains(self) }

    /// The token.
    public var description: String { rawValue }
}

/// HTTP header fields: names compared case-insensitively, order and repeats kept.
public struct HTTPHeaders: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// One field.
    public struct Field: Sendable, Hashable {
        /// The name as written.
        public var name: String
        /// The value.
        public var value: String
    }

    /// The fields, in order.
    public private(set) var fields: [Field] = []

    /// Empty headers.
    public init() {}

    /// `["Accept": "application/json"]`
    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { add(name, value) }
    }

    /// The first value of `name` (case-insensitive); setting replaces every field of that name.
    public subscript(name: String) -> String? {
        get { fields.first { $0.name.caseInsensitiveEquals(name) }?.value }
        set {
            fields.removeAll { $0.name.caseInsensitiveEquals(name) }
            if let newValue { fields.append(Field(name: name, value: newValue)) }
        }
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// Appends a field (keeping existing ones of the same name).
    public mutating func add(_ name: String, _ value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Iterates fields in order.
    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }
}

extension String {
    func caseInsensitiveEquals(_ other: String) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) where x != y {
            let lx = (x >= 65 && x <= 90) ? x + 32 : x
            let ly = (y >= 65 && y <= 90) ? y + 32 : y
            if lx != ly { return false }
        }
        return true
    }
}

/// A request ready to send.
public struct HTTPRequest: Sendable {
    /// The method.
    public var method: HTTPMethod
    /// The absolute URL.
    public var url: URL
    /// Header fields.
    public var headers: HTTPHeaders
    /// The body, if any.
    public var body: Data?
    /// A file to stream as the body instead of `body` (uploads, multipart forms).
    public var bodyFile: URL?
    /// Whether `bodyFile` is a temporary file to delete once the request is done.
    public var removesBodyFileAfterUse = false
    /// The time allowed for the whole exchange.
    public var timeout: TimeInterval

    /// A request.
    public init(method: HTTPMethod = .get, url: URL, headers: HTTPHeaders = [:], body: Data? = nil, timeout: TimeInterval = 20) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// A response.
public struct HTTPResponse: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields.
    public var headers: HTTPHeaders
    /// The body.
    public var body: Data

    /// A response.
    public init(status: Int, headers: HTTPHeaders = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Sends requests. The default on Apple platforms and in apps is URLSession; the `moose` CLI uses
/// `CurlTransport`, which loads libcurl only when a request is made.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response, whatever its status. Throws `HTTPError` for
    /// transport failures and `CancellationError` when the task is cancelled.
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}

/// The one error type of `MooseHTTP`.
public struct HTTPError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The code's name.
        public var description: String { name }

        /// Lets a `catch` clause match on a code.
        public static func ~= (code: Self, error: any Error) -> Bool { (error as? HTTPError)?.code == code }
    }

    /// What kind of failure this is.
    public let code: Code
    /// A human-readable explanation (URLs have their query redacted).
    public let message: String
    /// The request's method, when known.
    public let method: HTTPMethod?
    /// The request's URL with secrets in the query redacted, when known.
    public let url: String?
    /// The response status, for `status` errors.
    public let status: HTTPStatus?
    /// The start of the response body (at most 512 characters), for `status` errors.
    public let bodyExcerpt: String?

    init(_ code: Code, _ message: String, method: HTTPMethod? = nil, url: String? = nil, status: HTTPStatus? = nil,
         bodyExcerpt: String? = nil) {
        self.code = code
        self.message = message
        self.method = method
        self.url = url
        self.status = status
        self.bodyExcerpt = bodyExcerpt
    }

    /// `code: message`, with method, URL and status when known.
    public var description: String {
        var text = "\(code): \(message)"
        if let method, let url { text += " [\(method) \(url)]" }
        return text
    }

    /// A transport failure for `request` (for transports in other modules).
    public static func transportFailure(_ message: String, _ request: HTTPRequest) -> HTTPError {
        HTTPError(transport, message, method: request.method, url: request.url.redactedForLogs)
    }

    /// A timeout for `request` (for transports in other modules).
    public static func timeout(_ message: String, _ request: HTTPRequest) -> HTTPError {
        HTTPError(timedOut, message, method: request.method, url: request.url.redactedForLogs)
    }

    /// The server answered with a status the caller did not accept (and no server-error mapper claimed it).
    public static let status = Code(name: "status")
    /// The response body could not be decoded as the expected type.
    public static let decoding = Code(name: "decoding")

    /// The request could not be sent or no response arrived (DNS, connect, TLS, reset).
    public static let transport = Code(name: "transport")
    /// The exchange took longer than its timeout.
    public static let timedOut = Code(name: "timedOut")
    /// The response was larger than allowed.
    public static let responseTooLarge = Code(name: "responseTooLarge")
    /// The request is malformed (bad URL, unsupported scheme).
    public static let invalidRequest = Code(name: "invalidRequest")
}

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
        "api_key", "apikey", "key", "sig", "signature", "state", "nonce", "id_token_hint", "logout_hint",
    ]

    /// A URL with sensitive query values and userinfo replaced.
    public static func url(_ text: String) -> String {
        var text = text
        let chars = Array(text)
        if let colon = (0..<max(0, chars.count - 2)).first(where: { chars[$0] == ":" && chars[$0 + 1] == "/" && chars[$0 + 2] == "/" }) {
            let start = colon + 3
            var index = start
            while index < chars.count, chars[index] != "/", chars[index] != "?", chars[index] != "#", chars[index] != "@" { index += 1 }
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
        if showingValues, first == UInt8(ascii: "{"), case .object(let members)? = try? JSONDecoder().decode(JSON.self, from: Data(bytes)) {
            let shown = members.keys.sorted().prefix(12).map { key -> String in
                let name = String(key.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(40).map(Character.init))
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
                let shown = keys.prefix(12).map { name in String(name.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(40).map(Character.init)) }
                return "a JSON object (\(bytes.count) bytes) with members \(shown.joined(separator: ", "))\(keys.count > 12 ? ", …" : "") (values not shown)"
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
            if scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) { flush(); out += " "; continue }
            if scalar.isASCII, TokenCharacters.isAlphanumeric(UInt8(scalar.value)) || "-._~+/=".unicodeScalars.contains(scalar) {
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
