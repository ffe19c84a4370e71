import Foundation
import MooseCrypto
import MooseJWT
@testable import MooseResourceServer

/// An issuer's key, a client's DPoP key and a fixed clock: tokens and proofs made here, checked by
/// the resource server as a real one would.
struct Harness: Sendable {
    static let issuer = "https://id.example.com"
    static let resource = "https://api.example.com"
    static let url = "https://api.example.com/items"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    let issuerSigner: JWTSigner
    let issuerPublic: JWTKey
    let issuerPEM: String
    let dpopSigner: JWTSigner
    let dpopJWK: JWK

    init() throws {
        let issuerKey = try PrivateKey.generate(.ec(.p256))
        issuerSigner = try JWTSigner(key: JWTKey(privateKey: issuerKey, keyID: "issuer-1"), algorithm: .es256)
        issuerPEM = try issuerKey.publicKey().pemRepresentation()
        issuerPublic = try JWTKey(publicKey: issuerKey.publicKey(), keyID: "issuer-1")
        let clientKey = try PrivateKey.generate(.ec(.p256))
        dpopSigner = try JWTSigner(key: JWTKey(privateKey: clientKey), algorithm: .es256)
        dpopJWK = try JWK(publicKey: clientKey.publicKey())
    }

    var thumbprint: String { (try? dpopJWK.thumbprint()) ?? "" }

    /// RFC 9068 claims, valid at `now`; `changes` overrides (a `.null` removes the claim).
    func claims(_ changes: JSONObject = [:], bound: Bool = false) -> JSONObject {
        let now = Int64(Self.now.timeIntervalSince1970)
        var claims: JSONObject = [
            "iss": .string(Self.issuer), "sub": "alice", "aud": .string(Self.resource), "client_id": "moose-app",
            "exp": .number(JSONNumber(now + 300)), "iat": .number(JSONNumber(now - 10)), "jti": "token-1",
            "scope": "api.read profile"
        ]
        if bound { claims["cnf"] = .object(["jkt": .string(thumbprint)]) }
        for member in changes { claims[member.key] = member.value == .null ? nil : member.value }
        return claims
    }

    func token(
        _ changes: JSONObject = [:], bound: Bool = false, header: JSONObject = ["typ": "at+jwt"],
        signer: JWTSigner? = nil
    ) throws -> String {
        try (signer ?? issuerSigner).sign(claims(changes, bound: bound), extraHeader: header)
    }

    /// A proof for `method url` with `ath` of `token`, claims overridden by `changes`.
    func proof(
        for token: String?, method: String = "GET", url: String = Harness.url, nonce: String? = nil,
        changes: JSONObject = [:], header: JSONObject? = nil, signer: JWTSigner? = nil, jti: String = UUID().uuidString
    ) throws -> String {
        var claims = try DPoP.proofClaims(
            method: method, url: url, accessToken: token, nonce: nonce,
            issuedAt: Self.now, jti: jti)
        for member in changes { claims[member.key] = member.value == .null ? nil : member.value }
        return try (signer ?? dpopSigner).sign(claims, extraHeader: header ?? DPoP.proofHeader(publicJWK: dpopJWK))
    }

    func configuration(dpop: ResourceServerConfiguration.DPoPMode = .allowed) -> ResourceServerConfiguration {
        ResourceServerConfiguration(
            issuer: Self.issuer, resource: Self.resource, algorithms: [.es256, .rs256], dpop: dpop,
            proofs: DPoPProofVerifier(clock: { Harness.now }),
            resourceMetadataURL: "https://api.example.com/.well-known/oauth-protected-resource", clock: { Harness.now })
    }

    func server(_ configuration: ResourceServerConfiguration? = nil, nonces: (any DPoPNonceSource)? = nil)
        -> ResourceServer
    {
        ResourceServer(
            configuration: configuration ?? self.configuration(), keys: StaticAccessTokenKeys([issuerPublic]),
            replayCache: InMemoryDPoPReplayCache(clock: { Harness.now }), nonces: nonces)
    }
}

/// The refusal `body` throws, or `nil` when it succeeds (other errors are rethrown).
func refusal(_ body: () async throws -> VerifiedPrincipal) async throws -> ResourceServerRefusal? {
    do {
        _ = try await body()
        return nil
    } catch let refusal as ResourceServerRefusal {
        return refusal
    }
}
