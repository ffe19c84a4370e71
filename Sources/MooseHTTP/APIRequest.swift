#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// A request Moose sends: swift-http-types' `HTTPRequest` (method, URL, header fields — the same
/// value swift-openapi-runtime, Hummingbird 2 and AsyncHTTPClient's `HTTPTypes` bridges use), plus
/// what that type leaves out on purpose: the body and the time allowed for the whole exchange.
///
/// ```swift
/// var request = APIRequest(url: URL(string: "https://api.example.com/v1/me")!)
/// request.headerFields[.accept] = "application/json"
/// let response = try await transport.send(request)
/// ```
///
/// Header values are `HTTPField` values: a line break or NUL in one is replaced by a space when the
/// field is made, so no value can start another header line.
public struct APIRequest: Sendable {
    /// Method, scheme, authority, path (with the query) and header fields.
    public var head: HTTPRequest
    /// The body, if any.
    public var body: Data?
    /// A file to stream as the body instead of `body` (uploads, multipart forms).
    public var bodyFile: URL?
    /// Whether `bodyFile` is a temporary file to delete once the request is done.
    public var removesBodyFileAfterUse = false
    /// The time allowed for the whole exchange, in seconds.
    public var timeout: TimeInterval
    /// The URL this request was made with, while the head's scheme, authority and path are still the
    /// ones taken from it (`url` checks): `url` then returns it instead of parsing the head's text
    /// again. Only kept for a URL whose text is exactly the head's (`PlainURL`).
    private var madeFrom: PlainURL?

    /// A request for an absolute `http`/`https` URL.
    public init(
        method: HTTPRequest.Method = .get, url: URL, headerFields: HTTPFields = [:], body: Data? = nil,
        timeout: TimeInterval = 20
    ) {
        if let plain = PlainURL(url) {
            // The same scheme, authority and path `HTTPRequest(url:)` takes (PlainURL's tests check it),
            // without parsing the URL again with `URLComponents`.
            head = HTTPRequest(
                method: method, scheme: plain.scheme, authority: plain.authority, path: plain.path,
                headerFields: headerFields)
            madeFrom = plain
        } else {
            head = HTTPRequest(method: method, url: url, headerFields: headerFields)
        }
        self.body = body
        self.timeout = timeout
    }

    /// A request from a swift-http-types head (what swift-openapi and Hummingbird hand around).
    public init(head: HTTPRequest, body: Data? = nil, timeout: TimeInterval = 20) {
        self.head = head
        self.body = body
        self.timeout = timeout
    }

    /// The method.
    public var method: HTTPRequest.Method {
        get { head.method }
        set { head.method = newValue }
    }

    /// The absolute URL, from the head's scheme, authority and path (nil only for a head that has
    /// none, which transports refuse as `invalidRequest`).
    public var url: URL? {
        get {
            // What `head.url` makes of the head: the URL it was made with, while it names the same.
            if let madeFrom, head.method != .connect, head.path == madeFrom.path, head.scheme == madeFrom.scheme,
                head.authority == madeFrom.authority
            {
                return madeFrom.url
            }
            return head.url
        }
        set {
            head.url = newValue
            madeFrom = nil
        }
    }

    /// The header fields.
    public var headerFields: HTTPFields {
        get { head.headerFields }
        set { head.headerFields = newValue }
    }

    /// The URL for messages and logs: secret query values and userinfo replaced by `***`.
    public var redactedURL: String { url?.redactedForLogs ?? "(no URL)" }
}

/// An absolute `http`/`https` URL whose text splits into scheme, authority and path without a URL
/// parser (package-internal): `http(s)://host[:port]/path[?query]` in plain ASCII — a lower-case
/// host of letters, digits, `.` and `-`, a path from `/` and a query of RFC 3986's path and query
/// characters with valid `%XX` escapes, no user info, no fragment, no base URL. For such a URL the
/// split is the one `HTTPRequest(url:)` makes with `URLComponents`, and its text is the text
/// `HTTPRequest.url` rebuilds (`APIRequestURLTests` checks both on generated URLs); any other URL is
/// left to `HTTPRequest`.
package struct PlainURL: Sendable {
    /// The URL.
    package let url: URL
    /// `http` or `https`.
    package let scheme: String
    /// `host` or `host:port`.
    package let authority: String
    /// The path from its `/`, with the query.
    package let path: String

    /// The split, or nil when `url` is not plain.
    package init?(_ url: URL) {
        guard url.baseURL == nil else { return nil }
        let text = url.absoluteString
        var utf8 = Substring(text).utf8
        let scheme: String
        if utf8.starts(with: "https://".utf8) {
            scheme = "https"
        } else if utf8.starts(with: "http://".utf8) {
            scheme = "http"
        } else {
            return nil
        }
        utf8 = utf8.dropFirst(scheme.utf8.count + 3)
        // The authority: up to the path's "/" (a query or nothing after the authority is left to
        // HTTPRequest, which then makes a path of its own).
        guard let slash = utf8.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let authority = utf8[..<slash]
        var host = authority[...]
        if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
            let port = authority[authority.index(after: colon)...]
            guard !port.isEmpty, port.count <= 5, port.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            host = authority[..<colon]
        }
        guard !host.isEmpty,
            host.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D })
        else { return nil }
        let rest = utf8[slash...]
        var index = rest.startIndex
        while index < rest.endIndex {
            let byte = rest[index]
            if byte == UInt8(ascii: "%") {
                // A valid escape, kept as it is.
                let first = rest.index(after: index)
                guard first < rest.endIndex, rest.index(after: first) < rest.endIndex,
                    Self.isHex(rest[first]), Self.isHex(rest[rest.index(after: first)])
                else { return nil }
                index = rest.index(first, offsetBy: 2)
                continue
            }
            // The first "?" starts the query, where "?" is a character like "/".
            guard byte == UInt8(ascii: "?") || Self.pathCharacter(byte) else { return nil }
            index = rest.index(after: index)
        }
        self.url = url
        self.scheme = scheme
        self.authority = String(Substring(authority))
        self.path = String(Substring(rest))
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
    }

    /// RFC 3986 `pchar` without `%` (escapes are read apart) plus `/`: unreserved, sub-delims, `:`, `@`.
    private static func pathCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x61...0x7A, 0x41...0x5A, 0x30...0x39: true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="):
            true
        case UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"): true
        default: false
        }
    }
}

extension HTTPRequest.Method {
    /// RFC 9110 §9.2.2: methods whose repetition has the same effect as one request.
    public var isIdempotent: Bool {
        switch self {
        case .get, .head, .put, .delete, .options, .trace: true
        default: false
        }
    }
}

extension HTTPFields {
    /// The fields as HTTP/1.1 header lines: one line per name, in first-seen order, repeated
    /// values combined the way swift-http-types reads them (`Cookie` crumbs with "; ", others with
    /// ", "). Transports that speak HTTP/1.1 (libcurl, URLSession) send these, so a `Cookie` set as
    /// one string — which `HTTPFields` splits into crumbs — arrives as one valid header again.
    package var http1Lines: [(name: String, value: String)] {
        var seen = Set<HTTPField.Name>()
        var lines: [(name: String, value: String)] = []
        for field in self where seen.insert(field.name).inserted {
            lines.append((field.name.rawName, self[field.name] ?? field.value))
        }
        return lines
    }
}
