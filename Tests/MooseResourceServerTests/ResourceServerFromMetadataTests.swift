import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseResourceServer
import Testing

/// `ResourceServer(metadata:…)`: what a provider's metadata lacks is said before any token arrives.
@Suite struct ResourceServerFromMetadataTests {
    static let client = ResourceServer.IntrospectionClient(clientID: "api", clientSecret: "s")

    static func code(_ body: () throws -> ResourceServer) -> OAuthError.Code? {
        do {
            _ = try body()
            return nil
        } catch let error as OAuthError {
            return error.code
        } catch {
            return OAuthError.Code(named: "other")
        }
    }

    @Test func theIntrospectionSecretIsNeverDescribed() {
        let client = ResourceServer.IntrospectionClient(clientID: "api", clientSecret: "s3cret-value")
        #expect(!"\(client)".contains("s3cret-value") && !String(reflecting: client).contains("s3cret-value"))
        #expect("\(client)".contains("api"))
    }

    @Test func whatTheMetadataLacksIsSaid() throws {
        let transport = CurlTransport()
        let bare = ProviderMetadata(issuer: "https://id.example.com")
        let plain = ProviderMetadata(
            issuer: "https://id.example.com", introspectionEndpoint: URL(string: "http://id.example.com/introspect"))
        let refused: [(ProviderMetadata, ResourceServer.IntrospectionClient?, OAuthError.Code)] = [
            (bare, nil, OAuthError.missingEndpoint), // no jwks_uri, no introspection: nothing verifies a token
            (bare, Self.client, OAuthError.missingEndpoint), // introspection asked for, no endpoint
            (plain, Self.client, OAuthError.insecureEndpoint) // the secret would travel in the clear
        ]
        for (metadata, introspection, expected) in refused {
            let code = Self.code {
                try ResourceServer(
                    metadata: metadata, resource: "https://api", algorithms: [.es256], transport: transport,
                    introspection: introspection)
            }
            #expect(code == expected, "\(metadata.introspectionEndpoint?.absoluteString ?? "no endpoint")")
        }
        let keyed = ProviderMetadata(
            issuer: "https://id.example.com/", jwksURI: URL(string: "https://id.example.com/jwks"))
        let server = try ResourceServer(
            metadata: keyed, resource: "https://api", algorithms: [.es256], transport: transport
        ) { $0.dpop = .required }
        // The metadata's issuer exactly (its trailing slash too), and the caller's changes kept.
        #expect(server.configuration.issuer == "https://id.example.com/")
        #expect(server.configuration.dpop == .required && server.configuration.acceptedTokenTypes == ["at+jwt"])
    }
}
