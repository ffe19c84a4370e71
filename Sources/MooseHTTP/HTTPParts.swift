#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import HTTPTypes

extension HTTPField.Name {
    /// `DPoP` (RFC 9449 §4.1): the proof sent with a request.
    public static let dpop = HTTPField.Name("DPoP")!
    /// `DPoP-Nonce` (RFC 9449 §8): a nonce the server wants in the next proof.
    public static let dpopNonce = HTTPField.Name("DPoP-Nonce")!

    /// Headers whose values are credentials: never logged.
    public static let sensitive: Set<HTTPField.Name> = [.authorization, .cookie, .setCookie, .proxyAuthorization, .dpop]
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
    /// Without leading and trailing ASCII whitespace (space, tab, CR, LF): a token or a line pasted,
    /// read from a file or a variable. Nothing else is touched.
    package func trimmingASCIIWhitespace() -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }
        var text = Substring(self)
        while let first = text.first, blank(first) { text.removeFirst() }
        while let last = text.last, blank(last) { text.removeLast() }
        return String(text)
    }

    func trimmed() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return String(text)
    }
}

extension String {
    /// ASCII case-insensitive equality (header names, schemes): no locale, no Unicode folding.
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
