import Foundation
import HTTPTypes
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOAuth
@testable import MooseResourceServer
import MooseTestSupport
import MooseURLSession
import Testing

/// Real RFC 9068 tokens from Glewlwyd (tools/glewlwyd: client credentials for `moose-service` with
/// `resource=https://api.moose.test`), plain and DPoP-bound, verified with its published keys.
@Suite struct GlewlwydResourceServerTests {
    static let resource = "https://api.moose.test"

    struct Provider {
        let issuer: String
        let tokenEndpoint: URL
        let jwks: JWKSCache
    }

    static func provider(_ issuer: String, transport: URLSessionTransport) async throws -> Provider {
        let discovery = try #require(URL(string: issuer + "/.well-known/openid-configuration"))
        let response = try await transport.send(APIRequest(url: discovery))
        let document = try JSONValue(parsing: Array(response.body))
        let token = try #require(document["token_endpoint"]?.stringValue.flatMap(URL.init(string:)))
        let jwks = try #require(document["jwks_uri"]?.stringValue.flatMap(URL.init(string:)))
        return Provider(
            issuer: try #require(document["issuer"]?.stringValue), tokenEndpoint: token,
            jwks: JWKSCache(url: jwks, transport: transport))
    }

    /// Client credentials; with `dpop`, a proof (and the nonce Glewlwyd then asks for).
    static func accessToken(
        _ provider: Provider, transport: URLSessionTransport,
        dpop: (signer: JWTSigner, jwk: JWK)? = nil
    ) async throws -> (token: String, type: String) {
        try await Glewlwyd.serviceAccessToken(tokenEndpoint: provider.tokenEndpoint, transport: transport, dpop: dpop)
    }

    static func server(_ provider: Provider) -> MooseResourceServer.ResourceServer {
        var configuration = ResourceServerConfiguration(
            issuer: provider.issuer, resource: resource, algorithms: [.rs256, .es256, .eddsa])
        configuration.resourceMetadataURL = resource + "/.well-known/oauth-protected-resource"
        return MooseResourceServer.ResourceServer(configuration: configuration, keys: provider.jwks)
    }

    @Test func aRealAccessTokenIsVerifiedAndRefusedElsewhere() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = URLSessionTransport()
            let provider = try await Self.provider(issuer, transport: transport)
            let (token, _) = try await Self.accessToken(provider, transport: transport)
            let server = Self.server(provider)
            let principal = try await server.verify(
                authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET",
                url: Self.resource + "/items", requiredScopes: ["api.read"])
            #expect(principal.clientID == "moose-service" && principal.scopes.contains("api.read"))
            #expect(principal.audiences.contains(Self.resource) && principal.scheme == .bearer)
            // The keys came from the issuer's jwks_uri once.
            #expect(await provider.jwks.fetchCount == 1)

            // The same token at another resource: refused with invalid_token.
            var other = server.configuration
            other.resource = "https://other.moose.test"
            let elsewhere = MooseResourceServer.ResourceServer(configuration: other, keys: provider.jwks)
            let refused = try await refusal {
                try await elsewhere.verify(
                    authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET",
                    url: "https://other.moose.test/")
            }
            #expect(refused?.code == ResourceServerRefusal.invalidToken)
            // A scope Glewlwyd did not grant: insufficient_scope.
            let short = try await refusal {
                try await server.verify(
                    authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET",
                    url: Self.resource + "/items",
                    requiredScopes: ["api.write"])
            }
            #expect(short?.code == ResourceServerRefusal.insufficientScope)
        }
    }

    @Test func aRealDPoPBoundTokenNeedsItsKeysProof() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = URLSessionTransport()
            let provider = try await Self.provider(issuer, transport: transport)
            let key = try PrivateKey.generate(.ec(.p256))
            let signer = try JWTSigner(key: JWTKey(privateKey: key), algorithm: .es256)
            let jwk = try JWK(publicKey: key.publicKey())
            let (token, type) = try await Self.accessToken(provider, transport: transport, dpop: (signer, jwk))
            #expect(type.lowercased() == "dpop")
            let server = Self.server(provider)
            let url = Self.resource + "/items?page=1"
            let proof = try DPoP.proof(signer: signer, publicJWK: jwk, method: "GET", url: url, accessToken: token)
            let principal = try await server.verify(
                authorizationHeader: "DPoP \(token)", dpopHeader: proof, method: "GET", url: url)
            let thumbprint = try jwk.thumbprint()
            #expect(principal.scheme == .dpop && principal.confirmationThumbprint == thumbprint)

            // The same proof again, the token as Bearer, and a proof by another key: all refused.
            let replay = try await refusal {
                try await server.verify(
                    authorizationHeader: "DPoP \(token)", dpopHeader: proof, method: "GET", url: url)
            }
            #expect(replay?.code == ResourceServerRefusal.invalidDPoPProof)
            let bearer = try await refusal {
                try await server.verify(
                    authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET", url: url)
            }
            #expect(bearer?.code == ResourceServerRefusal.invalidToken)
            let thief = try PrivateKey.generate(.ec(.p256))
            let stolen = try DPoP.proof(
                signer: JWTSigner(key: JWTKey(privateKey: thief), algorithm: .es256),
                publicJWK: JWK(publicKey: thief.publicKey()), method: "GET", url: url, accessToken: token)
            let other = try await refusal {
                try await server.verify(
                    authorizationHeader: "DPoP \(token)", dpopHeader: stolen, method: "GET", url: url)
            }
            #expect(other?.code == ResourceServerRefusal.invalidDPoPProof)
        }
    }
}
