import Foundation
import MooseCrypto
import MooseJWT
@testable import MooseResourceServer
import Synchronization
import Testing

/// The resource server remembers tokens it verified (issue 41 §5: a token presented again costs a lookup,
/// not an RS256 check) without trusting them longer than the rules allow: the claims are checked on every
/// use, the key that verified a token must still be given by the key source, and tokens are compared byte
/// for byte.
@Suite struct VerifiedTokenCacheTests {
    /// Keys that the test swaps, and a clock it moves.
    final class Issuer: AccessTokenKeySource, Sendable {
        private let current: Mutex<[JWTKey]>
        private let time = Mutex(Harness.now)

        init(_ keys: [JWTKey]) { current = Mutex(keys) }

        func publish(_ keys: [JWTKey]) { current.withLock { $0 = keys } }
        func advance(by seconds: TimeInterval) { time.withLock { $0 += seconds } }
        var now: Date { time.withLock { $0 } }

        func keys(for kid: String?) async throws -> [JWTKey] { current.withLock { $0 } }
    }

    let harness: Harness
    let issuer: Issuer

    init() throws {
        harness = try Harness()
        issuer = Issuer([harness.issuerPublic])
    }

    func server(limit: Int = 1024) -> ResourceServer {
        var configuration = harness.configuration()
        let issuer = self.issuer
        configuration.clock = { issuer.now }
        configuration.verifiedTokenCacheLimit = limit
        return ResourceServer(configuration: configuration, keys: issuer)
    }

    func verify(_ server: ResourceServer, _ token: String, scopes: [String] = ["api.read"]) async throws
        -> ResourceServerRefusal?
    {
        try await refusal {
            try await server.verify(
                authorizationHeader: "Bearer " + token, dpopHeader: nil, method: "GET", url: Harness.url,
                requiredScopes: scopes)
        }
    }

    @Test func aTokenPresentedAgainIsRememberedAndItsTimesCheckedOnEveryUse() async throws {
        let server = server()
        let token = try harness.token()
        #expect(try await verify(server, token) == nil)
        #expect(server.verifiedTokens?.hits == 0)
        #expect(try await verify(server, token) == nil)
        #expect(server.verifiedTokens?.count == 1)
        #expect(server.verifiedTokens?.hits == 1) // the second request used the remembered verification
        let narrower = try await verify(server, token, scopes: ["admin"])
        #expect(narrower?.code == ResourceServerRefusal.insufficientScope)
        issuer.advance(by: 300 + 31) // exp + the 30 s leeway, and a second
        let expired = try await verify(server, token)
        #expect(expired?.code == ResourceServerRefusal.invalidToken)
        #expect(expired?.reason.contains("exp") == true)
        #expect(server.verifiedTokens?.count == 0)
    }

    @Test func aKeyTheIssuerWithdrewEndsTheTokensItVerified() async throws {
        let server = server()
        let token = try harness.token()
        #expect(try await verify(server, token) == nil)
        let other = try JWTKey(publicKey: PrivateKey.generate(.ec(.p256)).publicKey(), keyID: "issuer-2")
        issuer.publish([other])
        #expect(try await verify(server, token)?.code == ResourceServerRefusal.invalidToken)
        issuer.publish([harness.issuerPublic, other])
        #expect(try await verify(server, token) == nil)
    }

    /// The key set now lists another key under the token's `kid` first: the uncached path would select that
    /// key and refuse; a hit must not be honoured merely because the verifying key is still in the list.
    @Test func aKidNowSelectingAnotherKeyEndsTheTokensItVerified() async throws {
        let server = server()
        let token = try harness.token()
        #expect(try await verify(server, token) == nil)
        let impostor = try JWTKey(publicKey: PrivateKey.generate(.ec(.p256)).publicKey(), keyID: "issuer-1")
        issuer.publish([impostor, harness.issuerPublic])
        let uncached = self.server(limit: 0)
        let verdict = try await verify(uncached, token)?.code
        #expect(verdict == ResourceServerRefusal.invalidToken)
        #expect(try await verify(server, token)?.code == verdict)
        #expect(server.verifiedTokens?.hits == 0)
    }

    /// A token whose request was refused after its signature passed (a bound token as Bearer, a scope it
    /// lacks) is not remembered: the cache holds only tokens of requests that passed every check.
    @Test func aTokenOfARefusedRequestIsNotRemembered() async throws {
        let server = server()
        let bound = try harness.token(bound: true)
        #expect(try await verify(server, bound)?.code == ResourceServerRefusal.invalidToken)
        #expect(server.verifiedTokens?.count == 0)
        let token = try harness.token()
        let narrower = try await verify(server, token, scopes: ["admin"])
        #expect(narrower?.code == ResourceServerRefusal.insufficientScope)
        #expect(server.verifiedTokens?.count == 0)
        #expect(try await verify(server, token) == nil)
        #expect(server.verifiedTokens?.count == 1)
    }

    @Test func materialReplacedUnderTheSameKidEndsTheTokensItVerified() async throws {
        let server = server()
        let token = try harness.token()
        #expect(try await verify(server, token) == nil)
        let replaced = try JWTKey(publicKey: PrivateKey.generate(.ec(.p256)).publicKey(), keyID: "issuer-1")
        issuer.publish([replaced])
        #expect(try await verify(server, token)?.code == ResourceServerRefusal.invalidToken)
    }

    /// U+212A KELVIN SIGN is canonically equivalent to "K": Swift's `==` (and its `String` hashing) takes the
    /// two tokens for one. The cache must not (the request is refused earlier anyway: not a token68).
    @Test func aTokenEqualOnlyUnderUnicodeEquivalenceIsNotTheRememberedOne() async throws {
        let server = server()
        var token = try harness.token()
        while !token.contains("K") { token = try harness.token(["jti": .string(UUID().uuidString)]) }
        #expect(try await verify(server, token) == nil)
        let kelvin = token.replacingOccurrences(of: "K", with: "\u{212A}")
        #expect(kelvin == token && !kelvin.utf8.elementsEqual(token.utf8)) // what makes the test meaningful
        #expect(server.verifiedTokens?.entry(for: token) != nil)
        #expect(server.verifiedTokens?.entry(for: kelvin) == nil)
        #expect(try await verify(server, kelvin) != nil)
    }

    @Test func theCacheHoldsAtMostItsLimitAndZeroTurnsItOff() async throws {
        let server = server(limit: 4)
        for n in 0..<10 {
            #expect(try await verify(server, try harness.token(["jti": .string("token-\(n)")])) == nil)
            #expect((server.verifiedTokens?.count ?? 99) <= 4)
        }
        let off = self.server(limit: 0)
        #expect(off.verifiedTokens == nil)
        let token = try harness.token()
        #expect(try await verify(off, token) == nil)
        #expect(try await verify(off, token) == nil)
    }

    @Test func theSynchronousPathRemembersAndForgetsByTheSameRules() throws {
        let server = server()
        let token = try harness.token()
        let other = try JWTKey(publicKey: PrivateKey.generate(.ec(.p256)).publicKey(), keyID: "issuer-1")
        func verify(_ keys: [JWTKey]) -> ResourceServerRefusal? {
            do {
                _ = try server.verifyBearer(
                    authorizationHeader: "Bearer " + token, keys: { _ in keys }, introspection: { _ in nil })
                return nil
            } catch { return error }
        }
        #expect(verify([harness.issuerPublic]) == nil)
        #expect(server.verifiedTokens?.count == 1)
        #expect(verify([harness.issuerPublic]) == nil)
        #expect(verify([other])?.code == ResourceServerRefusal.invalidToken)
        #expect(server.verifiedTokens?.count == 0)
    }
}
