#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A decoded JWT: a JWS whose payload is a JSON claim set.
///
/// Decoding (`JWT(compact:)`) does not verify anything. Use it to look inside a token you already
/// trust — one you just received from the token endpoint over TLS — or to show it to a person. To
/// trust a token, verify it with `JWTVerifier`.
///
/// ```swift
/// let jwt = try JWT(compact: accessToken)
/// if jwt.claims.isExpired(leeway: 30) { … refresh … }
/// ```
public struct JWT: Sendable {
    /// The underlying JWS (header, raw payload, signature).
    public let jws: JWS
    /// The claims.
    public let claims: JWTClaims

    /// The header.
    public var header: JOSEHeader { jws.header }

    /// Parses (without verifying) a compact JWT.
    public init(compact: String, maximumSize: Int = JWS.defaultMaximumSize) throws(JWTError) {
        try self.init(jws: JWS(compact: compact, maximumSize: maximumSize))
    }

    /// Interprets a parsed JWS's payload as a claim set.
    public init(jws: JWS) throws(JWTError) {
        self.jws = jws
        let value = try typed {
            try jws.payload.withUnsafeBufferPointer { buffer in
                try JSONValue(parsing: buffer, maximumDepth: JSONValue.defaultMaximumDepth, context: "payload")
            }
        }
        guard case .object(let object) = value else {
            throw JWTError(JWTError.invalidJSON, "payload is a JSON \(value.typeName), not a claims object")
        }
        claims = try JWTClaims(object)
    }

    /// Decodes the claims into your own type.
    ///
    /// ```swift
    /// struct MyClaims: Decodable { let sub: String; let scope: String }
    /// let mine = try jwt.claims(as: MyClaims.self)
    /// ```
    public func claims<T: Decodable>(as type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(T.self, from: Data(jws.payload))
    }
}
