// docs/jwt.md, ```swift block 1: the region is quoted there word for word (DocSnippetTests).
import Foundation
import MooseJWT

func jwt1(jwksData: Data, token: String) throws {
    // snippet begins
    let jwks = try JWKS(json: jwksData) // e.g. fetched from the issuer's jwks_uri
    let verifier = JWTVerifier(
        keys: try jwks.keys.map { try $0.verificationKey() },
        allowedAlgorithms: [.rs256, .es256], // explicit: there is no default
        validation: ClaimValidation(issuer: "https://id.example.com", audiences: ["my-api"], leeway: 30))
    let jwt = try verifier.verify(token) // signature first, then claims
    print(jwt.claims.subject ?? "-", jwt.claims.expiresAt ?? "no exp")

    struct MyClaims: Decodable { let sub: String; let scope: String }
    let mine = try jwt.claims(as: MyClaims.self) // your own types, after verification
    // snippet ends
    _ = mine
}
