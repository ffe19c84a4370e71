/// One challenge from a `WWW-Authenticate` header (RFC 9110 §11.6.1): a scheme and either a
/// `token68` or `name=value` parameters.
///
/// ```swift
/// let challenges = AuthenticationChallenge.parse(#"Bearer realm="api", error="invalid_token", DPoP algs="ES256""#)
/// challenges[0].scheme                    // "Bearer"
/// challenges[0]["error"]                  // "invalid_token"
/// challenges[1]["algs"]                   // "ES256"
/// ```
///
/// The parser is total: any text gives an array (possibly empty) and never traps. Scheme and
/// parameter names compare case-insensitively (ASCII); values are kept as sent, with quoted-string
/// escapes removed. At most 64 challenges and 64 parameters each are kept; longer headers are cut.
public struct AuthenticationChallenge: Sendable, Hashable {
    /// The authentication scheme, as sent (`Bearer`, `DPoP`, `Basic`…).
    public let scheme: String
    /// `name=value` parameters in order; names as sent.
    public let parameters: [Parameter]
    /// The `token68` form, if the challenge used it instead of parameters.
    public let token68: String?

    /// One `name=value` parameter.
    public struct Parameter: Sendable, Hashable {
        /// The name, as sent.
        public let name: String
        /// The value, unquoted.
        public let value: String
    }

    /// A challenge (for tests and servers).
    public init(scheme: String, parameters: [Parameter] = [], token68: String? = nil) {
        self.scheme = scheme
        self.parameters = parameters
        self.token68 = token68
    }

    /// The first parameter named `name` (ASCII case-insensitive).
    public subscript(name: String) -> String? {
        parameters.first { Self.asciiCaseInsensitiveEquals($0.name, name) }?.value
    }

    /// `true` when the scheme is `scheme` (ASCII case-insensitive, RFC 9110 §11.1).
    public func hasScheme(_ scheme: String) -> Bool { Self.asciiCaseInsensitiveEquals(self.scheme, scheme) }

    /// The challenges of every `WWW-Authenticate` value in `values` (a header may be repeated).
    public static func parse(_ values: [String]) -> [AuthenticationChallenge] {
        values.flatMap { parse($0) }.prefix(maximumChallenges).map { $0 }
    }

    static let maximumChallenges = 64
    static let maximumParameters = 64

    /// The challenges in one `WWW-Authenticate` header value.
    public static func parse(_ value: String) -> [AuthenticationChallenge] {
        var scanner = Scanner(Array(value.utf8))
        var challenges: [AuthenticationChallenge] = []
        while challenges.count < maximumChallenges {
            scanner.skip { $0 == 0x20 || $0 == 0x09 || $0 == 0x2C }
            guard !scanner.atEnd else { break }
            let scheme = scanner.token()
            guard !scheme.isEmpty else {
                // Not a token character where a scheme should start: skip to the next comma.
                scanner.skip { $0 != 0x2C }
                continue
            }
            var parameters: [Parameter] = []
            var token68: String? = nil
            scanner.skip { $0 == 0x20 || $0 == 0x09 }
            // Parameters or a token68 follow, until a token that starts the next challenge.
            let mark = scanner.index
            let candidate = scanner.token68()
            scanner.skip { $0 == 0x20 || $0 == 0x09 }
            if !candidate.isEmpty, scanner.atEnd || scanner.peek == 0x2C {
                token68 = candidate
            } else {
                scanner.index = mark
                while parameters.count < maximumParameters {
                    scanner.skip { $0 == 0x20 || $0 == 0x09 || $0 == 0x2C }
                    let save = scanner.index
                    let name = scanner.token()
                    scanner.skip { $0 == 0x20 || $0 == 0x09 }
                    guard !name.isEmpty, scanner.peek == 0x3D else {
                        scanner.index = save
                        break
                    }
                    scanner.index += 1
                    scanner.skip { $0 == 0x20 || $0 == 0x09 }
                    let value = scanner.peek == 0x22 ? scanner.quotedString() : scanner.token()
                    parameters.append(Parameter(name: name, value: value))
                    scanner.skip { $0 == 0x20 || $0 == 0x09 }
                    if scanner.peek == 0x2C { continue }
                    if !scanner.atEnd { scanner.skip { $0 != 0x2C } }
                }
            }
            challenges.append(AuthenticationChallenge(scheme: scheme, parameters: parameters, token68: token68))
            if scanner.index == mark, token68 == nil, parameters.isEmpty {
                // Nothing consumed after the scheme: move on so the loop always advances.
                scanner.skip { $0 != 0x2C && $0 != 0x20 && $0 != 0x09 }
            }
        }
        return challenges
    }

    static func asciiCaseInsensitiveEquals(_ a: String, _ b: String) -> Bool {
        let x = a.utf8, y = b.utf8
        guard x.count == y.count else { return false }
        return zip(x, y).allSatisfy { lower($0) == lower($1) }
    }

    private static func lower(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte }

    private struct Scanner {
        let bytes: [UInt8]
        var index = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        var atEnd: Bool { index >= bytes.count }
        var peek: UInt8? { atEnd ? nil : bytes[index] }
        mutating func skip(while predicate: (UInt8) -> Bool) {
            while index < bytes.count, predicate(bytes[index]) { index += 1 }
        }
        /// RFC 9110 `token` (tchar).
        mutating func token() -> String {
            let start = index
            skip { Self.isTokenCharacter($0) }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }
        /// RFC 9110 `token68`: ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/", then "=" padding.
        mutating func token68() -> String {
            let start = index
            skip { Self.isAlphanumeric($0) || [0x2D, 0x2E, 0x5F, 0x7E, 0x2B, 0x2F].contains($0) }
            let body = index
            skip { $0 == 0x3D }
            // "name=value" is a parameter, not a token68 with padding: padding must end the item.
            if index > body, index < bytes.count, bytes[index] != 0x2C, bytes[index] != 0x20, bytes[index] != 0x09 {
                index = start
                return ""
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }
        /// A quoted-string (RFC 9110 §5.6.4) without its quotes and with `\` escapes removed;
        /// an unterminated one runs to the end of the header.
        mutating func quotedString() -> String {
            index += 1
            var value: [UInt8] = []
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                if byte == 0x22 { break }
                if byte == 0x5C, index < bytes.count {
                    value.append(bytes[index])
                    index += 1
                } else {
                    value.append(byte)
                }
            }
            return String(decoding: value, as: UTF8.self)
        }
        static func isAlphanumeric(_ byte: UInt8) -> Bool {
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
        }
        static func isTokenCharacter(_ byte: UInt8) -> Bool {
            isAlphanumeric(byte)
                || [0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E].contains(
                    byte)
        }
    }
}
