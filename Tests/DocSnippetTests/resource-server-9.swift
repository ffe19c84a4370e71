// docs/resource-server.md, ```swift block 9: the region is quoted there word for word (DocSnippetTests).
import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseResourceServer

func resourceServer9(
    jwksURI: URL, introspectionEndpoint: URL, introspectionSecret: String, transport: any HTTPTransport
) -> ResourceServer {
    // snippet begins
    var configuration = ResourceServerConfiguration(
        issuer: "https://id.example.com", resource: "https://api.example.com",
        algorithms: [.es256], dpop: .required) // DPoP-bound tokens only
    configuration.leeway = 10 // seconds, on exp, nbf and iat
    configuration.proofs = DPoPProofVerifier(allowedAlgorithms: [.es256, .eddsa], maximumAge: 30)
    configuration.realm = "api"
    let server = ResourceServer(
        configuration: configuration,
        keys: JWKSCache(url: jwksURI, transport: transport),
        replayCache: InMemoryDPoPReplayCache(capacity: 100_000), // one process; replicas: PostgresDPoPReplayCache(url:)
        nonces: RotatingDPoPNonces(lifetime: 300), // proofs must carry the server's DPoP-Nonce
        introspector: TokenIntrospector(
            endpoint: introspectionEndpoint, clientID: "api",
            clientSecret: introspectionSecret, transport: transport)) // opaque tokens only
    // snippet ends
    return server
}
