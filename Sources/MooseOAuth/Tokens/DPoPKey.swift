#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes
import MooseHTTP
public import MooseJWT
import MooseCrypto

/// A DPoP key (RFC 9449): the private key that signs proofs, one per session, made with libcrypto at
/// login and kept with the session's tokens (so it is sealed in the store with them and rotates only
/// with a new login). The server binds the tokens to its public JWK thumbprint (RFC 7638), so a
/// stolen access or refresh token is useless without it.
///
/// ```swift
/// let key = try DPoPKey.generate()                 // ES256; .eddsa and .rs256 selectable
/// let proof = try key.proof(method: .get, url: URL(string: "https://api.example.com/me")!, accessToken: token)
/// ```
///
/// `description` shows the algorithm and thumbprint only; the private key is never printed or logged.
public struct DPoPKey: Sendable, Codable, Hashable, CustomStringConvertible {
    /// The signing algorithm (`ES256`, `EdDSA` or `RS256`).
    public let algorithm: JWTAlgorithm
    /// The public key as a JWK (what goes into each proof's `jwk` header).
    public let publicJWK: JWK
    /// The RFC 7638 SHA-256 thumbprint of `publicJWK`, base64url: the `dpop_jkt` / `cnf.jkt` value.
    public let thumbprint: String
    private let privateKeyPEM: String
    private let signer: JWTSigner

    /// The algorithms a DPoP key may use here (asymmetric, and ones every DPoP server knows).
    public static let supportedAlgorithms: [JWTAlgorithm] = [.es256, .eddsa, .rs256]

    /// Generates a new key pair with libcrypto.
    public static func generate(_ algorithm: JWTAlgorithm = .es256) throws -> DPoPKey {
        let spec: PrivateKey.GenerationSpec
        switch algorithm {
        case .es256: spec = .ec(.p256)
        case .eddsa: spec = .ed25519
        case .rs256: spec = .rsa(bits: 2048)
        default:
            throw OAuthError(OAuthError.invalidConfiguration, "DPoP keys are ES256, EdDSA or RS256, not \(algorithm)")
        }
        return try DPoPKey(privateKeyPEM: PrivateKey.generate(spec).pemRepresentation(), algorithm: algorithm)
    }

    /// A key from its PKCS#8 PEM (as stored) and algorithm.
    public init(privateKeyPEM: String, algorithm: JWTAlgorithm) throws {
        guard Self.supportedAlgorithms.contains(algorithm) else {
            throw OAuthError(OAuthError.invalidConfiguration, "DPoP keys are ES256, EdDSA or RS256, not \(algorithm)")
        }
        let privateKey = try PrivateKey(pem: privateKeyPEM)
        signer = try JWTSigner(key: JWTKey(privateKey: privateKey), algorithm: algorithm)
        publicJWK = try JWK(publicKey: privateKey.publicKey())
        thumbprint = try publicJWK.thumbprint()
        self.privateKeyPEM = privateKeyPEM
        self.algorithm = algorithm
    }

    enum CodingKeys: String, CodingKey { case algorithm, privateKeyPEM = "private_key_pem" }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let name = try container.decode(String.self, forKey: .algorithm)
        guard let algorithm = JWTAlgorithm(rawValue: name) else {
            throw DecodingError.dataCorruptedError(
                forKey: .algorithm, in: container, debugDescription: "unknown DPoP algorithm")
        }
        try self.init(privateKeyPEM: container.decode(String.self, forKey: .privateKeyPEM), algorithm: algorithm)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(algorithm.rawValue, forKey: .algorithm)
        try container.encode(privateKeyPEM, forKey: .privateKeyPEM)
    }

    public static func == (lhs: DPoPKey, rhs: DPoPKey) -> Bool {
        lhs.thumbprint.utf8.elementsEqual(rhs.thumbprint.utf8)
    }
    public func hash(into hasher: inout Hasher) { hasher.combine(thumbprint) }

    /// `DPoPKey(ES256, jkt …)`: never the private key.
    public var description: String { "DPoPKey(\(algorithm), jkt \(thumbprint))" }

    /// A DPoP proof JWT (RFC 9449 §4.2) for one request, by the one DPoP module both sides share
    /// (`MooseJWT`'s `DPoP`, whose proofs a `MooseResourceServer` verifies): header `typ: dpop+jwt`,
    /// `alg`, `jwk`; claims `jti` (random), `htm`, `htu` (the URL without query and fragment, normalized
    /// as RFC 9449 §4.3 compares it), `iat`, `nonce` when the server gave one, and `ath` (base64url
    /// SHA-256 of the access token) when presenting one to a resource server.
    ///
    /// - Throws: `invalidConfiguration` for a URL a proof cannot name (relative, with user information).
    public func proof(
        method: HTTPRequest.Method, url: URL, accessToken: String? = nil, nonce: String? = nil,
        at date: Date = Date()
    ) throws -> String {
        do {
            return try DPoP.proof(
                signer: signer, publicJWK: publicJWK, method: method.rawValue, url: url.absoluteString,
                accessToken: accessToken, nonce: nonce, at: date)
        } catch let error as JWTError where error.code == JWTError.malformed {
            throw OAuthError(
                OAuthError.invalidConfiguration, "a DPoP proof needs an absolute URL (\(error.message))",
                underlying: error)
        }
    }
}

extension DPoPKey {
    /// Sends `request` with a fresh proof in its `DPoP` header (carrying the origin's last nonce and,
    /// for a resource request, `ath` of `accessToken`), by the one nonce rule (`DPoPNonces.send`);
    /// its `iat` read from `clock` (the token endpoint's client passes its own).
    func send(
        _ request: APIRequest, accessToken: String? = nil, clock: @Sendable () -> Date = { Date() },
        _ send: (APIRequest) async throws -> APIResponse
    ) async throws -> APIResponse {
        var request = request
        guard let url = request.url else {
            throw OAuthError(OAuthError.invalidConfiguration, "a DPoP proof needs an absolute URL")
        }
        return try await DPoPNonces.send(
            to: url, asksForNonce: DPoPNonces.asksForNonce, nonce: { $0.headerFields[.dpopNonce] }
        ) {
            request.headerFields[.dpop] = try proof(
                method: request.method, url: url, accessToken: accessToken,
                nonce: DPoPNonces.nonce(for: url), at: clock())
            return try await send(request)
        }
    }
}
