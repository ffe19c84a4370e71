#if ExampleService
import Foundation
import HTTPTypes
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseOpenAPI
import MooseResourceServer
import MooseTestSupport
import OpenAPIRuntime
import Synchronization
import Testing

/// `ResourceServerOpenAPIMiddleware` driven as swift-openapi-runtime's server drives it (`intercept` with
/// HTTPTypes requests, an operation id, and `next` standing for the generated handler), with real
/// RFC 9068 access tokens from Glewlwyd (client credentials for `moose-service`, `resource=https://api.moose.test`,
/// scope `api.read`; plain and DPoP-bound) verified with the keys its `jwks_uri` publishes.
@Suite(.serialized)
struct ResourceServerOpenAPIMiddlewareTests {
    static let resource = "https://api.moose.test"

    /// What the handler saw: how often it ran and the principal it read from the task-local.
    final class Handler: Sendable {
        let seen = Mutex<[VerifiedPrincipal?]>([])
        var calls: Int { seen.withLock { $0.count } }
        var last: VerifiedPrincipal? { seen.withLock { $0.last ?? nil } }

        /// The generated handler's stand-in: records `ResourceServerPrincipal.current` and answers 200.
        var next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?) {
            { _, _, _ in
                self.seen.withLock { $0.append(ResourceServerPrincipal.current) }
                return (
                    HTTPResponse(status: .ok), HTTPBody("hello \(ResourceServerPrincipal.current?.subject ?? "nobody")")
                )
            }
        }
    }

    struct Provider {
        let issuer: String
        let tokenEndpoint: URL
        let keys: JWKSCache
    }

    static func provider(_ issuer: String) async throws -> Provider {
        let transport = CurlTransport()
        let metadata = try await Discovery.fetch(issuer: issuer, transport: transport)
        return Provider(
            issuer: metadata.issuer, tokenEndpoint: try #require(metadata.tokenEndpoint),
            keys: JWKSCache(url: try #require(metadata.jwksURI), transport: transport))
    }

    /// A client-credentials token from Glewlwyd; with `dpop`, bound to that key (answering its nonce demand).
    static func accessToken(_ provider: Provider, dpop: (signer: JWTSigner, jwk: JWK)? = nil) async throws -> String {
        try await Glewlwyd.serviceAccessToken(
            tokenEndpoint: provider.tokenEndpoint, transport: CurlTransport(), dpop: dpop
        ).token
    }

    static func middleware(_ provider: Provider, resource: String = resource, nonces: (any DPoPNonceSource)? = nil)
        -> ResourceServerOpenAPIMiddleware
    {
        var configuration = ResourceServerConfiguration(
            issuer: provider.issuer, resource: resource, algorithms: [.rs256, .es256, .eddsa])
        configuration.resourceMetadataURL = resource + "/.well-known/oauth-protected-resource"
        let server = ResourceServer(configuration: configuration, keys: provider.keys, nonces: nonces)
        return ResourceServerOpenAPIMiddleware(
            server: server, publicBaseURL: resource, requiredScopes: ["api.read"],
            scopesByOperation: ["deleteItem": ["api.read", "api.write"], "getMe": []],
            publicOperations: ["getHealth"])
    }

    static func request(_ fields: HTTPFields = [:], method: HTTPRequest.Method = .get, path: String = "/items?page=2")
        -> HTTPRequest
    {
        HTTPRequest(method: method, scheme: nil, authority: nil, path: path, headerFields: fields)
    }

    static func call(
        _ middleware: ResourceServerOpenAPIMiddleware, _ request: HTTPRequest, operation: String,
        handler: Handler
    ) async throws -> HTTPResponse {
        try await middleware.intercept(
            request, body: nil, metadata: ServerRequestMetadata(), operationID: operation, next: handler.next
        ).0
    }

    @Test func bearerTokensPerOperationScopesAndThePrincipalInTheHandler() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let provider = try await Self.provider(issuer)
            let token = try await Self.accessToken(provider)
            let middleware = Self.middleware(provider)
            let handler = Handler()
            let bearer: HTTPFields = [.authorization: "Bearer \(token)"]

            // Valid: the handler runs with the verified caller as ResourceServerPrincipal.current.
            let (ok, body) = try await middleware.intercept(
                Self.request(bearer), body: nil, metadata: ServerRequestMetadata(),
                operationID: "listItems", next: handler.next)
            #expect(ok.status == .ok && handler.calls == 1)
            let principal = try #require(handler.last)
            #expect(
                principal.clientID == "moose-service" && principal.scopes.contains("api.read")
                    && principal.scheme == .bearer)
            #expect(principal.audiences.contains(Self.resource))
            #expect(try await String(collecting: try #require(body), upTo: 1024) == "hello \(principal.subject)")
            #expect(ResourceServerPrincipal.current == nil, "the principal is set only while the handler runs")
            // An operation with no scope of its own needs a token all the same.
            #expect(
                try await Self.call(middleware, Self.request(bearer), operation: "getMe", handler: handler).status
                    == .ok)

            // No token: 401 with a challenge per scheme and resource_metadata; the handler never runs.
            let calls = handler.calls
            let bare = try await Self.call(middleware, Self.request(), operation: "listItems", handler: handler)
            #expect(bare.status.code == 401 && handler.calls == calls)
            let challenges = bare.headerFields[values: .wwwAuthenticate]
            #expect(
                challenges.count == 2
                    && challenges.allSatisfy {
                        $0.contains("resource_metadata=\"\(Self.resource)/.well-known/oauth-protected-resource\"")
                    },
                "\(challenges)")
            #expect(challenges.first?.hasPrefix("Bearer") == true && !challenges.joined().contains("error="))
            #expect(bare.headerFields[.cacheControl] == "no-store")

            // A scope this operation needs and the token lacks: 403 insufficient_scope naming both scopes.
            let delete = try await Self.call(
                middleware, Self.request(bearer, method: .delete, path: "/items/7"), operation: "deleteItem",
                handler: handler)
            #expect(delete.status.code == 403 && handler.calls == calls)
            #expect(
                delete.headerFields[values: .wwwAuthenticate].first?.contains(#"error="insufficient_scope""#) == true)
            #expect(
                delete.headerFields[values: .wwwAuthenticate].first?.contains(#"scope="api.read api.write""#) == true)

            // The same token at another resource: 401 invalid_token.
            let elsewhere = Self.middleware(provider, resource: "https://other.moose.test")
            let refused = try await Self.call(elsewhere, Self.request(bearer), operation: "listItems", handler: handler)
            #expect(refused.status.code == 401 && handler.calls == calls)
            #expect(refused.headerFields[values: .wwwAuthenticate].first?.contains(#"error="invalid_token""#) == true)

            // Two Authorization fields: malformed, 400. A public operation: no token asked for, no principal.
            var twice = bearer
            twice.append(HTTPField(name: .authorization, value: "Bearer \(token)"))
            #expect(
                try await Self.call(middleware, Self.request(twice), operation: "listItems", handler: handler).status
                    .code == 400)
            #expect(
                try await Self.call(middleware, Self.request(path: "/health"), operation: "getHealth", handler: handler)
                    .status == .ok)
            #expect(handler.calls == calls + 1 && handler.last == nil)
        }
    }

    @Test func aDPoPBoundTokenWithItsProofAndServerNonces() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let provider = try await Self.provider(issuer)
            let key = try PrivateKey.generate(.ec(.p256))
            let signer = try JWTSigner(key: JWTKey(privateKey: key), algorithm: .es256)
            let jwk = try JWK(publicKey: key.publicKey())
            let token = try await Self.accessToken(provider, dpop: (signer, jwk))
            let middleware = Self.middleware(provider, nonces: RotatingDPoPNonces(lifetime: 300))
            let handler = Handler()
            // The proof names the public URL (publicBaseURL + path); the request's query is no part of it.
            func proof(nonce: String?) throws -> String {
                try DPoP.proof(
                    signer: signer, publicJWK: jwk, method: "GET", url: Self.resource + "/items", accessToken: token,
                    nonce: nonce)
            }

            // Without the server's nonce: 401 use_dpop_nonce, and the nonce to use.
            let first = try await Self.call(
                middleware, Self.request([.authorization: "DPoP \(token)", .dpop: try proof(nonce: nil)]),
                operation: "listItems", handler: handler)
            #expect(first.status.code == 401 && handler.calls == 0)
            #expect(first.headerFields[values: .wwwAuthenticate].contains { $0.contains(#"error="use_dpop_nonce""#) })
            let nonce = try #require(first.headerFields[.dpopNonce])

            // With it: accepted, the principal bound to the key, and the nonce sent on the answer too.
            let signed = try proof(nonce: nonce)
            let ok = try await Self.call(
                middleware, Self.request([.authorization: "DPoP \(token)", .dpop: signed]), operation: "listItems",
                handler: handler)
            #expect(ok.status == .ok && ok.headerFields[.dpopNonce] == nonce)
            let thumbprint = try jwk.thumbprint()
            #expect(handler.last?.scheme == .dpop && handler.last?.confirmationThumbprint == thumbprint)

            // The same proof again, and the bound token as Bearer: refused before the handler.
            let replay = try await Self.call(
                middleware, Self.request([.authorization: "DPoP \(token)", .dpop: signed]), operation: "listItems",
                handler: handler)
            #expect(
                replay.status.code == 401
                    && replay.headerFields[values: .wwwAuthenticate].contains { $0.contains("invalid_dpop_proof") })
            let bearer = try await Self.call(
                middleware, Self.request([.authorization: "Bearer \(token)"]), operation: "listItems", handler: handler)
            #expect(bearer.status.code == 401 && handler.calls == 1)
        }
    }
}
#endif
