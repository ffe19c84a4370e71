import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseTestSupport
import MooseURLSession
import Testing

/// private_key_jwt client authentication (RFC 7523 §2.2) at a server that checks it: Glewlwyd's
/// `moose-pkjwt` client (ES256, its public key registered as a JWKS, grant client_credentials).
@Suite(.serialized)
struct PrivateKeyJWTIntegrationTests {
    static let keyFile = Fixtures.root + "/glewlwyd/pkjwt-es256.pem"

    static func client(issuer: String, key: JWTKey) async throws -> OAuthClient {
        let transport = URLSessionTransport()
        let metadata = try await Discovery(transport: transport).metadata(for: issuer)
        return OAuthClient(
            metadata: metadata, clientID: "moose-pkjwt", authentication: .privateKeyJWT(key, .es256),
            transport: transport)
    }

    @Test func aServiceSignedInWithItsKeyGetsAnAccessTokenAndAnotherKeyIsRefused() async throws {
        // Glewlwyd's SQLite answers 500 to colliding writes: tests take turns.
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let pem = try String(contentsOfFile: Self.keyFile, encoding: .utf8)
            let key = try JWTKey(pem: pem, keyID: "moose-pkjwt-1")
            let tokens = try await ClientCredentialsFlow(client: Self.client(issuer: issuer, key: key))
                .authorize(AuthorizationParameters(scopes: ["api.read"]))
            #expect(!tokens.accessToken.isEmpty && tokens.refreshToken == nil)
            #expect(tokens.scopes.contains("api.read"), "granted: \(tokens.scopes)")
            // Two grants in the same second: each assertion has its own jti (Glewlwyd refuses a replay).
            let again = try await ClientCredentialsFlow(client: Self.client(issuer: issuer, key: key))
                .authorize(AuthorizationParameters(scopes: ["api.read"]))
            #expect(again.accessToken != tokens.accessToken)

            // The same kid with a key the provider does not know: refused, and the error says so.
            let impostor = try JWTKey(privateKey: .generate(.ec(.p256)), keyID: "moose-pkjwt-1")
            let client = try await Self.client(issuer: issuer, key: impostor)
            let refused = await #expect(throws: OAuthError.self) {
                _ = try await ClientCredentialsFlow(client: client).authorize(
                    AuthorizationParameters(scopes: ["api.read"]))
            }
            #expect(
                refused?.status == 403 && "\(refused.map { "\($0)" } ?? "")".contains("credentials were refused"),
                "\(String(describing: refused))")
        }
    }
}
