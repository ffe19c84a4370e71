/// One `WWW-Authenticate` challenge a resource server sends (RFC 9110 §11.6.1): a scheme (`Bearer`,
/// RFC 6750 §3; `DPoP`, RFC 9449 §7.1) and its parameters, each written as a quoted string.
///
/// Values are made safe to send however they were built: characters outside printable ASCII (CR,
/// LF, other controls, non-ASCII) become `?`, and `"` and `\` are dropped — RFC 6750 §3 allows neither
/// in `error_description` or `scope` — so nothing from a token can end the header or start another one.
///
/// ```swift
/// let challenge = ResourceServerChallenge(scheme: "Bearer", parameters: [("error", "invalid_token")])
/// challenge.headerValue   // Bearer error="invalid_token"
/// ```
public struct ResourceServerChallenge: Sendable, Hashable, CustomStringConvertible {
    /// `Bearer` or `DPoP`.
    public let scheme: String
    /// Parameter names and (unescaped) values, in the order sent.
    public let parameters: [Parameter]

    /// One `name="value"` parameter.
    public struct Parameter: Sendable, Hashable {
        /// The parameter's name (`realm`, `error`, `scope`…).
        public let name: String
        /// The value as given; `ResourceServerChallenge.headerValue` sanitizes it.
        public let value: String
    }

    /// A challenge with `parameters` as (name, value) pairs.
    public init(scheme: String, parameters: [(String, String)] = []) {
        self.scheme = scheme
        self.parameters = parameters.map { Parameter(name: $0.0, value: $0.1) }
    }

    /// The value of the parameter `name`, if present.
    public subscript(name: String) -> String? {
        parameters.first { $0.name.utf8.elementsEqual(name.utf8) }?.value
    }

    /// The header value: `Scheme name="value", name="value"`, each value sanitized (see the type).
    public var headerValue: String {
        guard !parameters.isEmpty else { return Self.token(scheme) }
        return Self.token(scheme) + " "
            + parameters.map { "\(Self.token($0.name))=\"\(Self.quotable($0.value))\"" }.joined(separator: ", ")
    }

    /// The header value.
    public var description: String { headerValue }

    /// `value` with only %x20–21 / %x23–5B / %x5D–7E left (RFC 6750 §3's set for `error_description`):
    /// other bytes become `?`, quotes and backslashes are dropped.
    static func quotable(_ value: String) -> String {
        var bytes: [UInt8] = []
        for scalar in value.unicodeScalars.prefix(1024) {
            switch scalar.value {
            case 0x22, 0x5C: continue
            case 0x20...0x7E: bytes.append(UInt8(scalar.value))
            default: bytes.append(UInt8(ascii: "?"))
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A token (RFC 9110 §5.6.2): anything else is dropped.
    static func token(_ value: String) -> String {
        let allowed = Set("!#$%&'*+-.^_`|~".utf8)
        let bytes = value.utf8.filter {
            ($0 >= 0x30 && $0 <= 0x39) || (($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A) || allowed.contains($0)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
