import Foundation
import HTTPTypes
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOAuth
@testable import MooseResourceServer
import Synchronization
import Testing

/// The issuer's keys through MooseOAuth's JWKSCache: a rotated key is fetched once, an unknown `kid`
/// inside the cooldown costs no request and is refused.
@Suite struct KeyRotationTests {
    /// Serves whichever JWKS is current, counting requests.
    final class JWKSEndpoint: HTTPTransport, @unchecked Sendable {
        private let lock = NSLock()
        private var document = ""
        private var requests = 0
        var count: Int { lock.withLock { requests } }
        func publish(_ keys: [JWK]) { lock.withLock { document = JWKS(keys: keys).json } }
        func send(_ request: APIRequest) async throws -> APIResponse {
            let body = lock.withLock {
                requests += 1; return document
            }
            return APIResponse(status: .ok, headerFields: [.contentType: "application/json"], body: Data(body.utf8))
        }
    }

    static func signer(kid: String) throws -> (JWTSigner, JWK) {
        let key = try PrivateKey.generate(.ec(.p256))
        return (
            try JWTSigner(key: JWTKey(privateKey: key, keyID: kid), algorithm: .es256),
            try JWK(publicKey: key.publicKey(), keyID: kid, algorithm: .es256)
        )
    }

    @Test func aRotatedKeyIsFetchedOnceAndAnUnknownKidInTheCooldownIsRefused() async throws {
        let harness = try Harness()
        let (old, oldJWK) = try Self.signer(kid: "old")
        let (new, newJWK) = try Self.signer(kid: "new")
        let (stranger, _) = try Self.signer(kid: "stranger")
        let endpoint = JWKSEndpoint()
        endpoint.publish([oldJWK])
        // The cache's clock is the test's: "after the cooldown" and "right after" hold however slowly
        // a crowded machine runs the test.
        let clock = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        let cache = JWKSCache(
            url: URL(string: "https://id.example.com/jwks")!, transport: endpoint, cooldown: 0.5,
            now: { clock.withLock { $0 } })
        let server = MooseResourceServer.ResourceServer(configuration: harness.configuration(), keys: cache)
        func verify(_ signer: JWTSigner) async throws -> String {
            try await server.verify(
                authorizationHeader: "Bearer \(harness.token(signer: signer))", dpopHeader: nil, method: "GET",
                url: Harness.url
            ).subject
        }
        #expect(try await verify(old) == "alice")
        #expect(endpoint.count == 1)
        // The issuer rotates: the new kid is unknown to the cache, which refetches once (after its cooldown).
        endpoint.publish([oldJWK, newJWK])
        clock.withLock { $0 = $0.addingTimeInterval(0.6) }
        #expect(try await verify(new) == "alice")
        #expect(try await verify(old) == "alice")
        #expect(endpoint.count == 2)
        // A kid nobody published, right after: refused, no request (the cooldown).
        let refused = try await refusal {
            try await server.verify(
                authorizationHeader: "Bearer \(harness.token(signer: stranger))",
                dpopHeader: nil, method: "GET", url: Harness.url)
        }
        #expect(refused?.code == ResourceServerRefusal.invalidToken)
        #expect(endpoint.count == 2)
    }
}
