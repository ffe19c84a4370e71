#if MoosePostgres
import Foundation
import MooseCrypto
import MooseJWT
import MoosePostgres
import MooseResourceServer
import Testing

extension PostgresTests {
    /// Issue 35 §1: a DPoP proof's `jti` is never accepted twice across a fleet of replicas — the
    /// replay cache on the real PostgreSQL (directly and through PgBouncer in transaction mode).
    @Suite struct DPoPReplays {
        /// Two replicas on one schema: a key one recorded is a replay at the other until it expires;
        /// an expired record is a first use again; of twenty replicas asked at once, one wins.
        @Test(arguments: ["direct", "pgbouncer"])
        func aKeyIsFirstUsedOnceAcrossReplicas(_ route: String) async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let url = route == "direct" ? try PG.direct(schema: schema) : try PG.bouncer(schema: schema)
            let replicas = try (0..<2).map { _ in try PostgresDPoPReplayCache(url: url) }
            try await Self.running(replicas) {
                let later = Date().addingTimeInterval(300)
                #expect(try await replicas[0].firstUse(of: "thumbprint jti-1", until: later))
                #expect(
                    try await replicas[1].firstUse(of: "thumbprint jti-1", until: later) == false,
                    "a replay at another replica")
                #expect(
                    try await replicas[0].firstUse(of: "thumbprint jti-1", until: later) == false,
                    "a replay at the same replica")
                #expect(try await replicas[1].firstUse(of: "thumbprint jti-2", until: later))
                // A record past its expiry is forgotten: the proof would be refused for its iat anyway.
                #expect(try await replicas[0].firstUse(of: "thumbprint old", until: Date().addingTimeInterval(-1)))
                #expect(try await replicas[1].firstUse(of: "thumbprint old", until: later))

                let wins = try await withThrowingTaskGroup(of: Bool.self) { group in
                    for index in 0..<20 {
                        group.addTask { try await replicas[index % 2].firstUse(of: "thumbprint race", until: later) }
                    }
                    return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
                #expect(wins == 1, "\(wins) replicas accepted the same proof")
            }
        }

        /// End to end: two resource servers share the cache; a DPoP-bound token's proof accepted by
        /// one is refused by the other (`invalid_dpop_proof`), and a fresh proof is accepted there.
        @Test func aProofAcceptedByOneReplicaIsRefusedByTheOther() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let url = try PG.direct(schema: schema)
            let caches = try (0..<2).map { _ in try PostgresDPoPReplayCache(url: url) }
            let issuerKey = try PrivateKey.generate(.ec(.p256))
            let issuer = try JWTSigner(key: JWTKey(privateKey: issuerKey, keyID: "k1"), algorithm: .es256)
            let clientKey = try PrivateKey.generate(.ec(.p256))
            let client = try JWTSigner(key: JWTKey(privateKey: clientKey), algorithm: .es256)
            let clientJWK = try JWK(publicKey: clientKey.publicKey())
            let now = Int64(Date().timeIntervalSince1970)
            let token = try issuer.sign(
                [
                    "iss": "https://id.example.com", "sub": "alice", "aud": "https://api.example.com",
                    "client_id": "app",
                    "exp": .number(JSONNumber(now + 300)), "iat": .number(JSONNumber(now)), "jti": "t1",
                    "scope": "read",
                    "cnf": .object(["jkt": .string(try clientJWK.thumbprint())])
                ], extraHeader: ["typ": "at+jwt"])
            func proof() throws -> String {
                try client.sign(
                    try DPoP.proofClaims(
                        method: "GET", url: "https://api.example.com/items", accessToken: token,
                        issuedAt: Date(), jti: UUID().uuidString),
                    extraHeader: DPoP.proofHeader(publicJWK: clientJWK))
            }
            let issuerPublic = try JWTKey(publicKey: issuerKey.publicKey(), keyID: "k1")
            let servers = caches.map { cache in
                ResourceServer(
                    configuration: ResourceServerConfiguration(
                        issuer: "https://id.example.com", resource: "https://api.example.com",
                        algorithms: [.es256], dpop: .allowed),
                    keys: StaticAccessTokenKeys([issuerPublic]), replayCache: cache)
            }
            try await Self.running(caches) {
                let first = try proof()
                let accepted = try await servers[0].verify(
                    authorizationHeader: "DPoP \(token)", dpopHeader: first, method: "GET",
                    url: "https://api.example.com/items")
                #expect(accepted.subject == "alice")
                do {
                    _ = try await servers[1].verify(
                        authorizationHeader: "DPoP \(token)", dpopHeader: first, method: "GET",
                        url: "https://api.example.com/items")
                    Issue.record("the other replica accepted a replayed proof")
                } catch {
                    #expect(
                        (error as? ResourceServerRefusal)?.code == ResourceServerRefusal.invalidDPoPProof, "\(error)")
                }
                let again = try await servers[1].verify(
                    authorizationHeader: "DPoP \(token)", dpopHeader: try proof(), method: "GET",
                    url: "https://api.example.com/items")
                #expect(again.subject == "alice")
            }
        }

        /// docs/resource-server.md's replicas example is this code, word for word (after the page's imports,
        /// which this file has at its top).
        @Test func theResourceServerPageQuotesTheCompiledExample() throws {
            let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            let page = try String(
                contentsOf: here.appendingPathComponent("../../docs/resource-server.md").standardizedFileURL,
                encoding: .utf8)
            let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
            let begin = try #require(source.range(of: "    // docs/resource-server.md replicas begins\n"))
            let end = try #require(
                source.range(
                    of: "    // docs/resource-server.md replicas ends", range: begin.upperBound..<source.endIndex))
            let example = source[begin.upperBound..<end.lowerBound].split(
                separator: "\n", omittingEmptySubsequences: false
            )
            .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }.joined(separator: "\n")
            #expect(
                page.contains("```swift\nimport MoosePostgres\nimport MooseResourceServer\n\n" + example + "```"),
                "docs/resource-server.md's replicas example differs from DPoPReplayTests.swift")
        }

        /// Runs `body` while `caches`' pools run.
        static func running(_ caches: [PostgresDPoPReplayCache], _ body: () async throws -> Void) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for cache in caches { group.addTask { await cache.run() } }
                defer { group.cancelAll() }
                try await body()
            }
        }
    }
}

/// The page's example, compiled (never run: it names a database that is not here).
func replicasExample(configuration: ResourceServerConfiguration, keys: any AccessTokenKeySource) throws
    -> ResourceServer
{
    // docs/resource-server.md replicas begins
    let replays = try PostgresDPoPReplayCache(url: "postgres://api@db.internal/api?sslmode=verify-full")
    Task { await replays.run() } // the connection pool, for as long as the server runs
    let server = ResourceServer(configuration: configuration, keys: keys, replayCache: replays)
    // docs/resource-server.md replicas ends
    return server
}
#endif
