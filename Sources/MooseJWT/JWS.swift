#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A parsed compact JWS (RFC 7515 §7.1): header, payload and signature, not yet verified.
///
/// Parsing checks structure only — three parts, strict base64url, a JSON object header without
/// repeated members, a size limit. Nothing here says the token is authentic: use `JWTVerifier`.
///
/// ```swift
/// let jws = try JWS(compact: token)
/// jws.header.algorithm     // "RS256"
/// jws.header.keyID         // "2024-05"
/// ```
public struct JWS: Sendable {
    /// The default size limit for a token: 64 KiB.
    public static let defaultMaximumSize = 64 * 1024

    /// The protected header.
    public let header: JOSEHeader
    /// The decoded payload bytes.
    public let payload: [UInt8]
    /// The decoded signature bytes (empty for an unsigned token).
    public let signature: [UInt8]
    /// The signing input, `BASE64URL(header) || '.' || BASE64URL(payload)`, as ASCII bytes.
    public let signingInput: [UInt8]
    /// The compact serialization this was parsed from.
    public let compact: String

    /// Parses a compact JWS.
    ///
    /// - Throws: `JWTError.tokenTooLarge`, `.encryptedTokenUnsupported` (five parts),
    ///   `.malformed`, `.invalidBase64URL` (with the offset), `.invalidJSON`.
    public init(compact: String, maximumSize: Int = JWS.defaultMaximumSize) throws(JWTError) {
        var token = compact
        let parsed = try typed {
            try token.withUTF8 { bytes in
                try JWS.parse(bytes, maximumSize: maximumSize)
            }
        }
        header = parsed.header
        payload = parsed.payload
        signature = parsed.signature
        signingInput = parsed.signingInput
        self.compact = compact
    }

    private static func parse(
        _ bytes: UnsafeBufferPointer<UInt8>, maximumSize: Int
    ) throws(JWTError) -> (header: JOSEHeader, payload: [UInt8], signature: [UInt8], signingInput: [UInt8]) {
        guard bytes.count <= maximumSize else {
            throw JWTError(JWTError.tokenTooLarge, "token is \(bytes.count) bytes; the limit is \(maximumSize)")
        }
        guard !bytes.isEmpty else { throw JWTError(JWTError.malformed, "token is empty") }
        var dots: [Int] = []
        for (offset, byte) in bytes.enumerated() where byte == UInt8(ascii: ".") {
            dots.append(offset)
            if dots.count > 4 { break }
        }
        switch dots.count {
        case 2: break
        case 4:
            throw JWTError(
                JWTError.encryptedTokenUnsupported,
                "token has 5 parts: it is an encrypted JWE, and encrypted tokens are not supported")
        default:
            throw JWTError(
                JWTError.malformed,
                "a compact JWS has 3 dot-separated parts (header.payload.signature); found \(dots.count > 4 ? "more than 5" : String(dots.count + 1))"
            )
        }
        let headerRange = 0..<dots[0]
        let payloadRange = (dots[0] + 1)..<dots[1]
        let signatureRange = (dots[1] + 1)..<bytes.count
        guard !headerRange.isEmpty else { throw JWTError(JWTError.malformed, "the header part is empty", position: 0) }
        let headerBytes = try Base64URL.decode(
            UnsafeBufferPointer(rebasing: bytes[headerRange]), offset: 0, part: "header")
        let payload = try Base64URL.decode(
            UnsafeBufferPointer(rebasing: bytes[payloadRange]), offset: payloadRange.lowerBound,
            part: "payload")
        let signature = try Base64URL.decode(
            UnsafeBufferPointer(rebasing: bytes[signatureRange]),
            offset: signatureRange.lowerBound, part: "signature")
        let headerValue = try typed {
            try headerBytes.withUnsafeBufferPointer { buffer in
                try JSONValue(parsing: buffer, maximumDepth: JSONValue.defaultMaximumDepth, context: "header")
            }
        }
        guard case .object(let headerObject) = headerValue else {
            throw JWTError(JWTError.invalidJSON, "header is a JSON \(headerValue.typeName), not an object")
        }
        let header = try JOSEHeader(headerObject)
        return (header, payload, signature, Array(UnsafeBufferPointer(rebasing: bytes[0..<dots[1]])))
    }
}

/// A JOSE header (RFC 7515 §4): the registered parameters as properties, everything in `fields`.
public struct JOSEHeader: Sendable, Hashable {
    /// All header parameters, in order.
    public let fields: JSONObject

    /// `alg`, exactly as written (it may be `none` or something Moose does not know).
    public let algorithm: String
    /// `kid`, if present.
    public var keyID: String? { fields["kid"]?.stringValue }
    /// `typ`, if present (`JWT`, `at+jwt`…).
    public var type: String? { fields["typ"]?.stringValue }
    /// `cty`, if present.
    public var contentType: String? { fields["cty"]?.stringValue }
    /// `crit`, if present.
    public let critical: [String]?

    /// Validates the shape of the registered parameters.
    public init(_ fields: JSONObject) throws(JWTError) {
        self.fields = fields
        guard let alg = fields["alg"] else {
            throw JWTError(JWTError.malformed, "header has no \"alg\" (RFC 7515 §4.1.1 requires it)", field: "alg")
        }
        guard let algString = alg.stringValue, !algString.isEmpty else {
            throw JWTError(
                JWTError.malformed, "header \"alg\" must be a non-empty string, found \(alg.typeName)", field: "alg")
        }
        algorithm = algString
        for name in ["kid", "typ", "cty", "jku", "x5u"] {
            if let value = fields[name], value.stringValue == nil {
                throw JWTError(
                    JWTError.malformed, "header \"\(name)\" must be a string, found \(value.typeName)", field: name)
            }
        }
        if let crit = fields["crit"] {
            // RFC 7515 §4.1.11: a non-empty array of names, each present in the header.
            guard let list = crit.arrayValue, !list.isEmpty else {
                throw JWTError(JWTError.malformed, "header \"crit\" must be a non-empty array", field: "crit")
            }
            var names: [String] = []
            for entry in list {
                guard let name = entry.stringValue, fields[name] != nil else {
                    throw JWTError(
                        JWTError.malformed, "header \"crit\" lists a parameter the header does not have", field: "crit")
                }
                names.append(name)
            }
            critical = names
        } else {
            critical = nil
        }
    }

    /// The algorithm as a `JWTAlgorithm`, if Moose knows it (never for `none`).
    public var knownAlgorithm: JWTAlgorithm? { JWTAlgorithm(rawValue: algorithm) }
}
