#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes
public import MooseHTTP
public import MooseJWT
import MooseCrypto
import Synchronization

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
        default: throw OAuthError(OAuthError.invalidConfiguration, "DPoP keys are ES256, EdDSA or RS256, not \(algorithm)")
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
            throw DecodingError.dataCorruptedError(forKey: .algorithm, in: container, debugDescription: "unknown DPoP algorithm")
        }
        try self.init(privateKeyPEM: container.decode(String.self, forKey: .privateKeyPEM), algorithm: algorithm)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(algorithm.rawValue, forKey: .algorithm)
        try container.encode(privateKeyPEM, forKey: .privateKeyPEM)
    }

    public static func == (lhs: DPoPKey, rhs: DPoPKey) -> Bool { lhs.thumbprint.utf8.elementsEqual(rhs.thumbprint.utf8) }
    public func hash(into hasher: inout Hasher) { hasher.combine(thumbprint) }

    /// `DPoPKey(ES256, jkt …)`: never the private key.
    public var description: String { "DPoPKey(\(algorithm), jkt \(thumbprint))" }

    /// A DPoP proof JWT (RFC 9449 §4.2) for one request: header `typ: dpop+jwt`, `alg`, `jwk`; claims
    /// `jti` (random), `htm`, `htu` (the URL without query and fragment), `iat`, `nonce` when the
    /// server gave one, and `ath` (base64url SHA-256 of the access token) when presenting one to a
    /// resource server.
    public func proof(method: HTTPRequest.Method, url: URL, accessToken: String? = nil, nonce: String? = nil,
                      at date: Date = Date()) throws -> String {
        var claims: JSONObject = [
            "jti": .string(Base64URL.encode(try SecureRandom.bytes(count: 16))),
            "htm": .string(method.rawValue),
            "htu": .string(try Self.htu(url)),
            "iat": .number(JSONNumber(Int64(date.timeIntervalSince1970.rounded(.down)))),
        ]
        if let nonce { claims["nonce"] = .string(nonce) }
        if let accessToken { claims["ath"] = .string(Base64URL.encode(DigestAlgorithm.sha256.hash(Array(accessToken.utf8)))) }
        return try signer.sign(claims, extraHeader: ["typ": .string("dpop+jwt"), "jwk": .object(publicJWK.fields)])
    }

    /// RFC 9449 §4.2 `htu`: the target URI without query and fragment.
    static func htu(_ url: URL) throws -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), components.scheme != nil,
              components.host != nil else {
            throw OAuthError(OAuthError.invalidConfiguration, "a DPoP proof needs an absolute URL")
        }
        components.query = nil
        components.fragment = nil
        guard let text = components.string else { throw OAuthError(OAuthError.invalidConfiguration, "a DPoP proof needs an absolute URL") }
        return text
    }
}

/// The DPoP nonces servers handed out (RFC 9449 §8, §9), per origin (scheme, host, port): a proof
/// to that origin carries the last one. Shared by every request in the process, so a token endpoint's
/// or resource server's nonce learnt once serves every session.
public enum DPoPNonces {
    private static let nonces = Mutex<[String: String]>([:])

    /// The nonce last received from `url`'s origin.
    public static func nonce(for url: URL) -> String? {
        guard let origin = origin(url) else { return nil }
        return nonces.withLock { $0[origin] }
    }

    /// Remembers the `DPoP-Nonce` of a response from `url`'s origin, if it carries a well-formed one
    /// (RFC 9449 §8.1: `NQCHAR`, at most 1 KiB here).
    public static func remember(_ response: APIResponse, from url: URL?) {
        guard let url, let nonce = response.headerFields[.dpopNonce] else { return }
        remember(nonce, from: url)
    }

    /// Remembers a `DPoP-Nonce` value from `url`'s origin, if well-formed (NQCHAR, at most 1 KiB).
    public static func remember(_ nonce: String, from url: URL) {
        guard let origin = origin(url), !nonce.isEmpty, nonce.utf8.count <= 1024,
              nonce.utf8.allSatisfy({ $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) })
        else { return }
        nonces.withLock { entries in
            if entries.count > 1024 { entries.removeAll() }   // bounded: a process talks to few origins
            entries[origin] = nonce
        }
    }

    static func origin(_ url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        return "\(scheme)://\(host):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    /// `true` when `response` asks for a (new) nonce: 400 `use_dpop_nonce` from a token endpoint
    /// (RFC 9449 §8) or 401 with `WWW-Authenticate: DPoP error="use_dpop_nonce"` from a resource
    /// server (§9), and carries the nonce to use.
    public static func asksForNonce(_ response: APIResponse) -> Bool {
        guard response.headerFields[.dpopNonce] != nil else { return false }
        if response.status.code == 401 {
            return AuthenticationChallenge.parse(response.headerFields[values: .wwwAuthenticate]).contains {
                $0.hasScheme("DPoP") && $0["error"].map { Array($0.utf8) == Array("use_dpop_nonce".utf8) } == true
            }
        }
        guard response.status.code == 400, case .object(let object)? = try? JSONValue(parsing: Array(response.body)) else { return false }
        return object["error"]?.stringValue.map { Array($0.utf8) == Array("use_dpop_nonce".utf8) } == true
    }
}

extension DPoPNonces {
    /// The one nonce rule of RFC 9449 (§8 at a token endpoint, §9 at a resource server), for every
    /// sender in Moose — OAuth requests, `AccessToken.send`, `TokenAuthorizer` (so `AuthMiddleware`
    /// and `AccessTokenMiddleware`): `attempt` sends with a proof made now (carrying the nonce `url`'s
    /// origin gave last); the nonce an answer carries is remembered for that origin; an answer that
    /// asks for a nonce is discarded and the request sent once more — once, never a loop — when the
    /// request can be sent again.
    static func send<Response>(to url: URL, canResend: Bool = true, asksForNonce: (Response) -> Bool, nonce: (Response) -> String?,
                               discard: (Response) async -> Void = { _ in },
                               _ attempt: () async throws -> Response) async throws -> Response {
        func once() async throws -> Response {
            let response = try await attempt()
            if let nonce = nonce(response) { remember(nonce, from: url) }
            return response
        }
        let first = try await once()
        guard canResend, asksForNonce(first) else { return first }
        await discard(first)
        return try await once()
    }
}

extension DPoPKey {
    /// Sends `request` with a fresh proof in its `DPoP` header (carrying the origin's last nonce and,
    /// for a resource request, `ath` of `accessToken`), by the one nonce rule (`DPoPNonces.send`).
    func send(_ request: APIRequest, accessToken: String? = nil,
              _ send: (APIRequest) async throws -> APIResponse) async throws -> APIResponse {
        var request = request
        guard let url = request.url else { throw OAuthError(OAuthError.invalidConfiguration, "a DPoP proof needs an absolute URL") }
        return try await DPoPNonces.send(to: url, asksForNonce: DPoPNonces.asksForNonce, nonce: { $0.headerFields[.dpopNonce] }) {
            request.headerFields[.dpop] = try proof(method: request.method, url: url, accessToken: accessToken,
                                                    nonce: DPoPNonces.nonce(for: url))
            return try await send(request)
        }
    }
}
