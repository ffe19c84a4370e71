#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseCrypto

/// A JSON Web Key (RFC 7517): RSA, EC, OKP (Ed25519) or oct.
///
/// ```swift
/// let jwk = try JWK(json: #"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#)
/// jwk.thumbprint()    // RFC 7638
/// let key = try jwk.verificationKey()
/// ```
public struct JWK: Sendable, Hashable {
    /// All members, in order (including private members when present — handle with care).
    public let fields: JSONObject

    /// `kty`.
    public let keyType: String
    /// `kid`.
    public var keyID: String? { fields["kid"]?.stringValue }
    /// `alg`: when present, the only algorithm this key may be used with.
    public var algorithm: String? { fields["alg"]?.stringValue }
    /// `use` (`sig` or `enc`).
    public var use: String? { fields["use"]?.stringValue }
    /// `key_ops`.
    public var keyOperations: [String]? { fields["key_ops"]?.arrayValue?.compactMap(\.stringValue) }
    /// `crv` for EC and OKP keys.
    public var curve: String? { fields["crv"]?.stringValue }
    /// `true` when private members (`d`, `k`, `p`…) are present.
    public var hasPrivateMaterial: Bool {
        fields["d"] != nil || fields["k"] != nil || fields["p"] != nil
    }

    /// A JWK from a parsed JSON object.
    ///
    /// - Parameter fields: the JWK's members, kept as they are (the key material is read only by
    ///   `verificationKey()` and `signingKey()`).
    /// - Throws: `JWTError.invalidKey` without a `kty` string, or when `kid`, `alg`, `use` or `crv` is
    ///   not a string.
    public init(_ fields: JSONObject) throws(JWTError) {
        self.fields = fields
        guard let kty = fields["kty"]?.stringValue, !kty.isEmpty else {
            throw JWTError(JWTError.invalidKey, "JWK has no \"kty\" string", field: "kty")
        }
        keyType = kty
        for name in ["kid", "alg", "use", "crv"] {
            if let value = fields[name], value.stringValue == nil {
                throw JWTError(JWTError.invalidKey, "JWK \"\(name)\" must be a string", field: name)
            }
        }
    }

    /// A JWK from JSON text.
    ///
    /// - Throws: `JWTError.invalidJSON` for text that is not JSON; `JWTError.invalidKey` for JSON that
    ///   is not an object, or as `init(_:)`.
    public init(json: String) throws(JWTError) {
        let value = try JSONValue(parsing: Array(json.utf8))
        guard case .object(let object) = value else {
            throw JWTError(JWTError.invalidKey, "a JWK is a JSON object, found \(value.typeName)")
        }
        try self.init(object)
    }

    /// A public JWK for a public key.
    ///
    /// - Parameters:
    ///   - publicKey: an RSA, EC or Ed25519 public key.
    ///   - keyID: written as `kid`; `nil` (the default): none.
    ///   - algorithm: written as `alg`, pinning the key to it; `nil` (the default): none.
    /// - Throws: `JWTError.invalidKey` when the key's components cannot be read.
    public init(publicKey: PublicKey, keyID: String? = nil, algorithm: JWTAlgorithm? = nil) throws(JWTError) {
        var fields = JSONObject()
        switch publicKey.type {
        case .rsa:
            guard let (n, e) = publicKey.rsaComponents else {
                throw JWTError(JWTError.invalidKey, "cannot read the RSA key")
            }
            fields["kty"] = .string("RSA")
            fields["n"] = .string(Base64URL.encode(n))
            fields["e"] = .string(Base64URL.encode(e))
        case .ec(let curve):
            guard let (x, y) = publicKey.ecCoordinates else {
                throw JWTError(JWTError.invalidKey, "cannot read the EC key")
            }
            fields["kty"] = .string("EC")
            fields["crv"] = .string(curve.rawValue)
            fields["x"] = .string(Base64URL.encode(x))
            fields["y"] = .string(Base64URL.encode(y))
        case .ed25519:
            guard let x = publicKey.ed25519Raw else {
                throw JWTError(JWTError.invalidKey, "cannot read the Ed25519 key")
            }
            fields["kty"] = .string("OKP")
            fields["crv"] = .string("Ed25519")
            fields["x"] = .string(Base64URL.encode(x))
        }
        if let keyID { fields["kid"] = .string(keyID) }
        if let algorithm { fields["alg"] = .string(algorithm.rawValue) }
        fields["use"] = .string("sig")
        try self.init(fields)
    }

    /// The JWK as compact JSON.
    public var json: String { JSONValue.object(fields).serialized() }

    /// The JWK without private members, for publishing.
    public var publicJWK: JWK {
        var copy = fields
        for name in ["d", "p", "q", "dp", "dq", "qi", "oth", "k"] { copy[name] = nil }
        return JWK(unchecked: copy, keyType: keyType)
    }

    private init(unchecked fields: JSONObject, keyType: String) {
        self.fields = fields
        self.keyType = keyType
    }

    /// The RFC 7638 thumbprint: the hash of the required members in lexicographic order, base64url.
    ///
    /// - Parameter hash: the digest (default SHA-256, as `jkt` and `dpop_jkt` use).
    /// - Throws: `JWTError.invalidKey` for a `kty` other than `RSA`, `EC`, `OKP`, `oct`, or a required
    ///   member missing.
    public func thumbprint(hash: DigestAlgorithm = .sha256) throws(JWTError) -> String {
        let required: [String]
        switch keyType {
        case "RSA": required = ["e", "kty", "n"]
        case "EC": required = ["crv", "kty", "x", "y"]
        case "OKP": required = ["crv", "kty", "x"]
        case "oct": required = ["k", "kty"]
        default: throw JWTError(JWTError.invalidKey, "no thumbprint rule for kty \"\(keyType)\"", field: "kty")
        }
        var members = JSONObject()
        for name in required {
            guard let value = fields[name], value.stringValue != nil else {
                throw JWTError(JWTError.invalidKey, "JWK lacks \"\(name)\", required for its thumbprint", field: name)
            }
            members[name] = value
        }
        return Base64URL.encode(hash.hash(Array(JSONValue.object(members).serialized().utf8)))
    }

    func bytes(_ name: String) throws(JWTError) -> [UInt8] {
        guard let text = fields[name]?.stringValue else {
            throw JWTError(JWTError.invalidKey, "\(keyType) JWK lacks \"\(name)\"", field: name)
        }
        do {
            return try Base64URL.decode(text)
        } catch {
            throw JWTError(JWTError.invalidKey, "JWK \"\(name)\" is not base64url: \(error.message)", field: name)
        }
    }

    func optionalBytes(_ name: String) throws(JWTError) -> [UInt8]? {
        fields[name] == nil ? nil : try bytes(name)
    }

    /// The key for verifying signatures (the public part of an asymmetric JWK, or an oct secret).
    ///
    /// - Throws: `JWTError.invalidKey` for an unsupported `kty` or curve (EC: P-256, P-384, P-521; OKP:
    ///   Ed25519), a missing or non-base64url member, or material that does not make a key. A weak RSA
    ///   key is accepted here and refused when used.
    public func verificationKey() throws(JWTError) -> JWTKey {
        try JWTKey(jwk: self, wantPrivate: false)
    }

    /// The key for signing (requires private material).
    ///
    /// - Throws: as `verificationKey()`; `JWTError.invalidKey` too for an RSA, EC or OKP JWK without
    ///   its private member `d`, or an OKP one whose `x` does not match its `d`.
    public func signingKey() throws(JWTError) -> JWTKey {
        try JWTKey(jwk: self, wantPrivate: true)
    }
}

/// A JWK Set (RFC 7517 §5).
///
/// Keys of a type or curve Moose does not support are skipped, as RFC 7517 §5 asks, and listed in
/// `skipped` with the reason.
public struct JWKS: Sendable {
    /// The usable keys, in document order.
    public let keys: [JWK]
    /// Members of `keys` that were ignored, with why.
    public let skipped: [String]

    /// A set from keys.
    public init(keys: [JWK]) {
        self.keys = keys
        skipped = []
    }

    /// Parses a JWKS document (`{"keys":[…]}`). A single JWK object is accepted too.
    ///
    /// - Parameter bytes: the document's UTF-8 bytes.
    /// - Throws: `JWTError.invalidJSON` for bytes that are not JSON; `JWTError.invalidKey` for JSON that
    ///   is not an object, a `keys` member that is not an array, or a bare JWK that is not one. Keys
    ///   that cannot be used are skipped (`skipped`), never thrown.
    public init(json bytes: [UInt8]) throws(JWTError) {
        let value = try JSONValue(parsing: bytes)
        guard case .object(let object) = value else {
            throw JWTError(JWTError.invalidKey, "a JWKS is a JSON object, found \(value.typeName)")
        }
        guard let list = object["keys"] else {
            // Liberal: a bare JWK where a set was expected.
            keys = [try JWK(object)]
            skipped = []
            return
        }
        guard let array = list.arrayValue else {
            throw JWTError(JWTError.invalidKey, "JWKS \"keys\" must be an array", field: "keys")
        }
        var keys: [JWK] = []
        var skipped: [String] = []
        for (index, entry) in array.enumerated() {
            guard let object = entry.objectValue else {
                skipped.append("keys[\(index)]: not an object")
                continue
            }
            do throws(JWTError) {
                let jwk = try JWK(object)
                _ = try jwk.verificationKey()
                keys.append(jwk)
            } catch {
                skipped.append(
                    "keys[\(index)]\(object["kid"]?.stringValue.map { " (kid \($0))" } ?? ""): \(error.message)")
            }
        }
        self.keys = keys
        self.skipped = skipped
    }

    /// Parses a JWKS document from text.
    ///
    /// - Throws: as `init(json:)` for bytes.
    public init(json: String) throws(JWTError) {
        try self.init(json: Array(json.utf8))
    }

    /// Parses a JWKS document from `Data` (what `URLSession` hands back).
    ///
    /// - Throws: as `init(json:)` for bytes.
    public init(json data: Data) throws(JWTError) {
        try self.init(json: Array(data))
    }

    /// The JWKS as compact JSON.
    public var json: String {
        JSONValue.object(["keys": .array(keys.map { .object($0.fields) })]).serialized()
    }
}
