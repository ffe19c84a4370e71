#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Signs JWTs.
///
/// ```swift
/// let signer = try JWTSigner(key: JWTKey(privateKey: .generate(.ec(.p256)), keyID: "k1"), algorithm: .es256)
/// let token = try signer.sign(["sub": "alice", "exp": .number(JSONNumber(Int64(Date().timeIntervalSince1970) + 300))])
/// ```
public struct JWTSigner: Sendable {
    /// The signing key.
    public let key: JWTKey
    /// The algorithm written into `alg`.
    public let algorithm: JWTAlgorithm

    /// A signer; fails if the key cannot sign with `algorithm`.
    ///
    /// - Parameters:
    ///   - key: a private key or HMAC secret; its `keyID` becomes the header's `kid`.
    ///   - algorithm: the algorithm to sign with, written into `alg`.
    /// - Throws: `JWTError` with `keyAlgorithmMismatch` (a key of another family or curve, or pinned to
    ///   another algorithm), `weakKey` (an RSA key under 2048 bits or with the ROCA fingerprint, an HMAC
    ///   secret shorter than the hash's output), or `invalidKey` (a public key).
    public init(key: JWTKey, algorithm: JWTAlgorithm) throws(JWTError) {
        if let mismatch = key.mismatch(for: algorithm, signing: true) { throw mismatch }
        if let weakness = key.weakness(for: algorithm) { throw weakness }
        if case .publicKey = key.material { throw JWTError(JWTError.invalidKey, "a public key cannot sign") }
        self.key = key
        self.algorithm = algorithm
    }

    /// Signs a claim set. The header gets `alg`, `typ: JWT` and the key's `kid`, then `extraHeader`.
    ///
    /// - Parameters:
    ///   - claims: the claim set, serialized as it is (nothing is added: set `exp`, `iat` yourself).
    ///   - extraHeader: header members set after `alg`, `typ` and `kid`, overriding them; default: none.
    /// - Returns: the compact JWS.
    /// - Throws: `JWTError` when the signing operation fails (`invalidKey`, `keyAlgorithmMismatch`).
    public func sign(_ claims: JSONObject, extraHeader: JSONObject = [:]) throws(JWTError) -> String {
        try sign(payload: Array(JSONValue.object(claims).serialized().utf8), extraHeader: extraHeader)
    }

    /// Signs an `Encodable` claim set.
    ///
    /// - Parameters:
    ///   - claims: the claim set, encoded with `encoder` as the payload.
    ///   - extraHeader: header members set after `alg`, `typ` and `kid`, overriding them; default: none.
    ///   - encoder: the encoder of the payload (its date and key strategies apply); default: a plain one.
    /// - Returns: the compact JWS.
    /// - Throws: `encoder`'s `EncodingError`, or `JWTError` when the signing operation fails.
    public func sign(_ claims: some Encodable, extraHeader: JSONObject = [:], encoder: JSONEncoder = JSONEncoder())
        throws -> String
    {
        try sign(payload: Array(encoder.encode(claims)), extraHeader: extraHeader)
    }

    /// Signs arbitrary payload bytes (a JWS).
    ///
    /// - Parameters:
    ///   - payload: the bytes to sign, base64url-encoded as they are.
    ///   - extraHeader: header members set after `alg`, `typ` and `kid`, overriding them; default: none.
    /// - Returns: the compact JWS.
    /// - Throws: `JWTError` when the signing operation fails (`invalidKey`, `keyAlgorithmMismatch`).
    public func sign(payload: [UInt8], extraHeader: JSONObject = [:]) throws(JWTError) -> String {
        var header: JSONObject = ["alg": .string(algorithm.rawValue), "typ": .string("JWT")]
        if let kid = key.keyID { header["kid"] = .string(kid) }
        for member in extraHeader { header[member.key] = member.value }
        let input =
            Base64URL.encode(Array(JSONValue.object(header).serialized().utf8)) + "." + Base64URL.encode(payload)
        let signature = try key.sign(Array(input.utf8), algorithm: algorithm)
        return input + "." + Base64URL.encode(signature)
    }
}
