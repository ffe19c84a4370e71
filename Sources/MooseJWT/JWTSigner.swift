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
    public init(key: JWTKey, algorithm: JWTAlgorithm) throws(JWTError) {
        if let mismatch = key.mismatch(for: algorithm, signing: true) { throw mismatch }
        if let weakness = key.weakness(for: algorithm) { throw weakness }
        if case .publicKey = key.material { throw JWTError(JWTError.invalidKey, "a public key cannot sign") }
        self.key = key
        self.algorithm = algorithm
    }

    /// Signs a claim set. The header gets `alg`, `typ: JWT` and the key's `kid`, then `extraHeader`.
    public func sign(_ claims: JSONObject, extraHeader: JSONObject = [:]) throws(JWTError) -> String {
        try sign(payload: Array(JSONValue.object(claims).serialized().utf8), extraHeader: extraHeader)
    }

    /// Signs an `Encodable` claim set.
    public func sign(_ claims: some Encodable, extraHeader: JSONObject = [:], encoder: JSONEncoder = JSONEncoder())
        throws -> String
    {
        try sign(payload: Array(encoder.encode(claims)), extraHeader: extraHeader)
    }

    /// Signs arbitrary payload bytes (a JWS).
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
