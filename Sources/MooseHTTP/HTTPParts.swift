#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An HTTP status code with its class and reason phrase (RFC 9110 §15).
public struct HTTPStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    /// The numeric code.
    public let rawValue: Int

    /// A status from its code.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// `200`
    public init(integerLiteral value: Int) { rawValue = value }

    /// The class of a status code (RFC 9110 §15).
    public enum Kind: Sendable, Hashable {
        /// 1xx
        case informational
        /// 2xx
        case successful
        /// 3xx
        case redirection
        /// 4xx
        case clientError
        /// 5xx
        case serverError
        /// Anything else.
        case invalid
    }

    /// The class of this code.
    public var kind: Kind {
        switch rawValue {
        case 100..<200: .informational
        case 200..<300: .successful
        case 300..<400: .redirection
        case 400..<500: .clientError
        case 500..<600: .serverError
        default: .invalid
        }
    }

    /// `true` for 2xx.
    public var isSuccess: Bool { kind == .successful }

    /// The standard reason phrase, or "Unknown".
    public var reasonPhrase: String { HTTPStatus.phrases[rawValue] ?? "Unknown" }

    /// `404 Not Found`
    public var description: String { "\(rawValue) \(reasonPhrase)" }

    private static let phrases: [Int: String] = [
        100: "Continue", 101: "Switching Protocols", 200: "OK", 201: "Created", 202: "Accepted", 204: "No Content",
        206: "Partial Content", 301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
        307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request", 401: "Unauthorized",
        403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable", 408: "Request Timeout",
        409: "Conflict", 410: "Gone", 412: "Precondition Failed", 413: "Content Too Large", 415: "Unsupported Media Type",
        422: "Unprocessable Content", 425: "Too Early", 428: "Precondition Required", 429: "Too Many Requests",
        500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
        504: "Gateway Timeout",
    ]

    /// 200
    public static let ok: HTTPStatus = 200
    /// 201
    public static let created: HTTPStatus = 201
    /// 204
    public static let noContent: HTTPStatus = 204
    /// 400
    public static let badRequest: HTTPStatus = 400
    /// 401
    public static let unauthorized: HTTPStatus = 401
    /// 403
    public static let forbidden: HTTPStatus = 403
    /// 404
    public static let notFound: HTTPStatus = 404
    /// 429
    public static let tooManyRequests: HTTPStatus = 429
    /// 500
    public static let internalServerError: HTTPStatus = 500
    /// 502
    public static let badGateway: HTTPStatus = 502
    /// 503
    public static let serviceUnavailable: HTTPStatus = 503
    /// 504
    public static let gatewayTimeout: HTTPStatus = 504
}

/// A header field name, compared case-insensitively, with the common names as constants.
public struct HTTPHeaderName: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The name as written.
    public let rawName: String

    /// A header name.
    public init(_ name: String) { rawName = name }
    /// `"X-Request-ID"`
    public init(stringLiteral value: String) { rawName = value }

    /// The name as written.
    public var description: String { rawName }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawName.caseInsensitiveEquals(rhs.rawName) }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawName.lowercased()) }

    /// `Accept`
    public static let accept: HTTPHeaderName = "Accept"
    /// `Authorization`
    public static let authorization: HTTPHeaderName = "Authorization"
    /// `Cache-Control`
    public static let cacheControl: HTTPHeaderName = "Cache-Control"
    /// `Content-Length`
    public static let contentLength: HTTPHeaderName = "Content-Length"
    /// `Content-Type`
    public static let contentType: HTTPHeaderName = "Content-Type"
    /// `Cookie`
    public static let cookie: HTTPHeaderName = "Cookie"
    /// `Date`
    public static let date: HTTPHeaderName = "Date"
    /// `Location`
    public static let location: HTTPHeaderName = "Location"
    /// `Retry-After`
    public static let retryAfter: HTTPHeaderName = "Retry-After"
    /// `Set-Cookie`
    public static let setCookie: HTTPHeaderName = "Set-Cookie"
    /// `User-Agent`
    public static let userAgent: HTTPHeaderName = "User-Agent"
    /// `WWW-Authenticate`
    public static let wwwAuthenticate: HTTPHeaderName = "WWW-Authenticate"
    /// `DPoP`
    public static let dpop: HTTPHeaderName = "DPoP"

    /// Headers whose values are credentials: never logged.
    public static let sensitive: Set<HTTPHeaderName> = [.authorization, .cookie, .setCookie, "Proxy-Authorization", .dpop]
}

extension HTTPHeaders {
    /// The first value of a typed header name.
    public subscript(name: HTTPHeaderName) -> String? {
        get { self[name.rawName] }
        set { self[name.rawName] = newValue }
    }
}

/// A media type (`type/subtype`), compared case-insensitively on the essence.
public struct MIMEType: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The full value, parameters included (`application/json; charset=utf-8`).
    public let value: String

    /// A media type.
    public init(_ value: String) { self.value = value }
    /// `"text/plain"`
    public init(stringLiteral value: String) { self.value = value }

    /// `type/subtype`, lower-cased, without parameters.
    public var essence: String {
        String(value.split(separator: ";", maxSplits: 1).first ?? "").trimmed().lowercased()
    }

    /// `true` for `application/json` and `+json` types.
    public var isJSON: Bool { essence == "application/json" || essence.hasSuffix("+json") }

    /// The value.
    public var description: String { value }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.essence == rhs.essence }
    public func hash(into hasher: inout Hasher) { hasher.combine(essence) }

    /// `application/json`
    public static let json: MIMEType = "application/json"
    /// `application/x-www-form-urlencoded`
    public static let formURLEncoded: MIMEType = "application/x-www-form-urlencoded"
    /// `multipart/form-data`
    public static let multipartFormData: MIMEType = "multipart/form-data"
    /// `application/octet-stream`
    public static let octetStream: MIMEType = "application/octet-stream"
    /// `text/plain; charset=utf-8`
    public static let plainText: MIMEType = "text/plain; charset=utf-8"
    /// `text/html`
    public static let html: MIMEType = "text/html"
    /// `application/jwt`
    public static let jwt: MIMEType = "application/jwt"
}

/// An authorization scheme (RFC 9110 §11), compared case-insensitively.
public struct AuthScheme: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The scheme token.
    public let name: String
    /// A scheme.
    public init(_ name: String) { self.name = name }
    /// `"Bearer"`
    public init(stringLiteral value: String) { name = value }
    /// The token.
    public var description: String { name }
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.name.caseInsensitiveEquals(rhs.name) }
    public func hash(into hasher: inout Hasher) { hasher.combine(name.lowercased()) }

    /// `Bearer` (RFC 6750)
    public static let bearer: AuthScheme = "Bearer"
    /// `Basic` (RFC 7617)
    public static let basic: AuthScheme = "Basic"
    /// `DPoP` (RFC 9449)
    public static let dpop: AuthScheme = "DPoP"

    /// `Bearer abc…` for an `Authorization` header.
    public func credentials(_ token: String) -> String { "\(name) \(token)" }
}

/// The URL schemes the client speaks.
public enum URLScheme: String, Sendable, Hashable {
    /// `http` (loopback and tests)
    case http
    /// `https`
    case https
}

extension String {
    func trimmed() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return String(text)
    }
}
