#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseCrypto

/// The parts of DPoP (RFC 9449) that a client making proofs and a server checking them share: the
/// proof's `typ`, its claims, the `htu` normalization and the `ath` hash. One implementation, so the
/// two sides cannot drift apart.
///
/// ```swift
/// // Client: a proof for one request.
/// let proof = try DPoP.proof(signer: signer, publicJWK: jwk, method: "GET",
///                            url: "https://api.example.com/me?x=1", accessToken: token)
/// // Server: the same normalization on the request it received.
/// let htu = try DPoP.targetURI("HTTPS://API.example.com:443/me?x=1")   // "https://api.example.com/me"
/// ```
public enum DPoP {
    /// The `typ` header of a DPoP proof (RFC 9449 §4.2).
    public static let proofType = "dpop+jwt"

    /// The longest URI the `htu` rules accept, in bytes: a proof is a header, and so is the request line.
    public static let maximumURILength = 8 * 1024

    /// `ath` (RFC 9449 §4.2): base64url (no padding) of the SHA-256 of the access token's ASCII bytes.
    public static func accessTokenHash(_ accessToken: String) -> String {
        Base64URL.encode(DigestAlgorithm.sha256.hash(Array(accessToken.utf8)))
    }

    /// The `htu` of a request to `url` (RFC 9449 §4.2, §4.3 check 9): the URI without its query and
    /// fragment, normalized by RFC 3986 §6.2.2 and §6.2.3 — scheme and host in lower case, the
    /// default port (80 for http, 443 for https) dropped, an empty path written `/`, percent-encodings
    /// in upper case and unreserved characters decoded. The path's case and a trailing slash are kept:
    /// `/Me` and `/me/` are other resources than `/me`.
    ///
    /// - Throws: `JWTError.malformed` for a relative URI, user information in the authority, a bad
    ///   port or percent-encoding, bytes outside printable ASCII, or more than `maximumURILength` bytes.
    public static func targetURI(_ url: String) throws(JWTError) -> String {
        try normalize(url, allowsQueryAndFragment: true)
    }

    /// A proof's `htu` claim normalized like `targetURI`, except that a query or fragment is refused:
    /// RFC 9449 §4.2 defines `htu` as the URI *without* them, so a proof that carries one was not made
    /// by these rules (Glewlwyd refuses it too).
    public static func normalizedProofTarget(_ htu: String) throws(JWTError) -> String {
        try normalize(htu, allowsQueryAndFragment: false)
    }

    /// The claims of a proof (RFC 9449 §4.2): `jti`, `htm`, `htu` (normalized by `targetURI`), `iat`,
    /// and `nonce` and `ath` (of `accessToken`) when given.
    public static func proofClaims(
        method: String, url: String, accessToken: String? = nil, nonce: String? = nil,
        issuedAt: Date, jti: String
    ) throws(JWTError) -> JSONObject {
        var claims: JSONObject = [
            "jti": .string(jti),
            "htm": .string(method),
            "htu": .string(try targetURI(url)),
            "iat": .number(JSONNumber(Int64(saturating: issuedAt.timeIntervalSince1970.rounded(.down))))
        ]
        if let nonce { claims["nonce"] = .string(nonce) }
        if let accessToken { claims["ath"] = .string(accessTokenHash(accessToken)) }
        return claims
    }

    /// The extra header of a proof: `typ: dpop+jwt` and the public key as `jwk` (its private members,
    /// if any, removed).
    public static func proofHeader(publicJWK: JWK) -> JSONObject {
        ["typ": .string(proofType), "jwk": .object(publicJWK.publicJWK.fields)]
    }

    /// A signed proof for one request: `proofClaims` (with a random 128-bit `jti`) signed by `signer`
    /// under `proofHeader(publicJWK:)`. `signer` must hold the private half of `publicJWK`.
    public static func proof(
        signer: JWTSigner, publicJWK: JWK, method: String, url: String, accessToken: String? = nil,
        nonce: String? = nil, at date: Date = Date()
    ) throws -> String {
        let jti = Base64URL.encode(try SecureRandom.bytes(count: 16))
        let claims = try proofClaims(
            method: method, url: url, accessToken: accessToken, nonce: nonce, issuedAt: date, jti: jti)
        return try signer.sign(claims, extraHeader: proofHeader(publicJWK: publicJWK))
    }

    // MARK: - URI normalization

    private static func normalize(_ text: String, allowsQueryAndFragment: Bool) throws(JWTError) -> String {
        let bytes = Array(text.utf8)
        guard bytes.count <= maximumURILength else {
            throw JWTError(
                JWTError.malformed, "URI is \(bytes.count) bytes; the limit is \(maximumURILength)", field: "htu")
        }
        // RFC 3986 characters only: no spaces, controls (CR/LF), raw non-ASCII, or `"<>\\^`{|}`.
        guard !bytes.isEmpty, bytes.allSatisfy(isURICharacter) else {
            throw JWTError(JWTError.malformed, "URI is empty or has characters a URI cannot have", field: "htu")
        }
        // scheme ":" "//" authority path [ "?" query ] [ "#" fragment ]
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0,
            isAlpha(bytes[0]),
            bytes[..<colon].allSatisfy({ isAlpha($0) || isDigit($0) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E }),
            bytes.count >= colon + 3, bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
        else {
            throw JWTError(JWTError.malformed, "URI is not absolute (scheme://authority/path)", field: "htu")
        }
        let scheme = bytes[..<colon].map(lowercased)
        var index = colon + 3
        let authorityStart = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "/"), bytes[index] != UInt8(ascii: "?"),
            bytes[index] != UInt8(ascii: "#")
        {
            index += 1
        }
        let authority = Array(bytes[authorityStart..<index])
        guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")) else {
            throw JWTError(JWTError.malformed, "URI has no host, or user information in its authority", field: "htu")
        }
        let (host, portText) = try hostAndPort(authority, scheme: scheme)
        let pathStart = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "?"), bytes[index] != UInt8(ascii: "#") { index += 1 }
        if index < bytes.count, !allowsQueryAndFragment {
            throw JWTError(
                JWTError.malformed, "htu carries a query or fragment (RFC 9449 §4.2: without them)", field: "htu")
        }
        var path = try normalizedPercentEncoding(bytes[pathStart..<index])
        if path.isEmpty { path = [UInt8(ascii: "/")] }
        // Case-insensitive (RFC 3986 §6.2.2.1): lower case, but percent-encodings stay upper case.
        var normalizedHost = try normalizedPercentEncoding(host[...])
        var position = 0
        while position < normalizedHost.count {
            if normalizedHost[position] == UInt8(ascii: "%") { position += 3; continue }
            normalizedHost[position] = lowercased(normalizedHost[position])
            position += 1
        }
        return String(decoding: scheme, as: UTF8.self) + "://" + String(decoding: normalizedHost, as: UTF8.self)
            + portText
            + String(decoding: path, as: UTF8.self)
    }

    /// `authority` (no user information) split into its host — an IP literal in brackets or a reg-name —
    /// and its port as text (`:PORT`; empty for none or the scheme's default), both checked.
    private static func hostAndPort(_ authority: [UInt8], scheme: [UInt8]) throws(JWTError) -> (
        host: [UInt8], portText: String
    ) {
        // The port follows the last ':' outside an IPv6 literal's brackets.
        var host = authority
        var port: [UInt8] = []
        if let lastColon = authority.lastIndex(of: UInt8(ascii: ":")),
            !(authority.first == UInt8(ascii: "[") && (authority.lastIndex(of: UInt8(ascii: "]")) ?? 0) > lastColon)
        {
            host = Array(authority[..<lastColon])
            port = Array(authority[(lastColon + 1)...])
        }
        // An IP literal in brackets, or a reg-name (unreserved, percent-encoded, sub-delims): no ':' or '@' left.
        let isIPLiteral =
            host.count > 2 && host.first == UInt8(ascii: "[") && host.last == UInt8(ascii: "]")
            && host.dropFirst().dropLast().allSatisfy {
                isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".")
            }
        let isRegName =
            !host.isEmpty && host.allSatisfy { isUnreserved($0) || isSubDelimiter($0) || $0 == UInt8(ascii: "%") }
        guard isIPLiteral || isRegName else {
            throw JWTError(JWTError.malformed, "URI has an empty or invalid host", field: "htu")
        }
        var portText = ""
        if !port.isEmpty {
            // Bounded before converting: at most 5 digits, at most 65535.
            guard port.count <= 5, port.allSatisfy(isDigit), let number = Int(String(decoding: port, as: UTF8.self)),
                number <= 65535
            else {
                throw JWTError(JWTError.malformed, "URI has an invalid port", field: "htu")
            }
            let isDefault =
                (scheme == Array("http".utf8) && number == 80) || (scheme == Array("https".utf8) && number == 443)
            if !isDefault { portText = ":" + String(number) }
        }
        return (host, portText)
    }

    /// RFC 3986 §6.2.2.1–2: `%xx` in upper case; unreserved characters (ALPHA DIGIT - . _ ~) decoded.
    private static func normalizedPercentEncoding(_ bytes: ArraySlice<UInt8>) throws(JWTError) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "%") else { output.append(byte); index += 1; continue }
            guard index + 2 < bytes.endIndex, let high = hexValue(bytes[index + 1]),
                let low = hexValue(bytes[index + 2])
            else {
                throw JWTError(JWTError.malformed, "URI has an invalid percent-encoding", field: "htu")
            }
            let decoded = high << 4 | low
            if isUnreserved(decoded) {
                output.append(decoded)
            } else {
                output.append(UInt8(ascii: "%"))
                output.append(upperHex(high))
                output.append(upperHex(low))
            }
            index += 3
        }
        return output
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        isAlpha(byte) || isDigit(byte) || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E
    }
    /// `!$&'()*+,;=` (RFC 3986 §2.2).
    private static func isSubDelimiter(_ byte: UInt8) -> Bool {
        byte == 0x21 || byte == 0x24 || (0x26...0x2C).contains(byte) || byte == 0x3B || byte == 0x3D
    }
    /// Unreserved, reserved (`:/?#[]@` and sub-delims) or `%`.
    private static func isURICharacter(_ byte: UInt8) -> Bool {
        isUnreserved(byte) || isSubDelimiter(byte) || byte == 0x25 || byte == 0x3A || byte == 0x2F || byte == 0x3F
            || byte == 0x23
            || byte == 0x5B || byte == 0x5D || byte == 0x40
    }
    private static func isHexDigit(_ byte: UInt8) -> Bool { hexValue(byte) != nil }
    private static func isAlpha(_ byte: UInt8) -> Bool { (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A }
    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
    private static func lowercased(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }
    private static func upperHex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x41 + nibble - 10 }
    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
