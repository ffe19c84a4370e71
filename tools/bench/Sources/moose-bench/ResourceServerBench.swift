import AsyncHTTPClient
import CFloor
import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import MooseCrypto
import MooseHTTP
import MooseHummingbird
import MooseJWT
import MooseOAuth
import MooseResourceServer
import NIOCore

/// The resource-server side (issue 35 §4), each contender beside its anchor in interleaved rounds:
/// (1) an RFC 9068 access token verified per request by `ResourceServer.verify` (keys cached) vs
/// jwt-kit verifying the same token with a cached key; (2) a DPoP proof + DPoP-bound token through
/// `ResourceServer.verify` vs jwt-kit verifying the two ES256 JWTs; (3) an introspection cache hit
/// vs a dictionary lookup of the same token; (4) a Hummingbird route behind `ResourceServerMiddleware`
/// vs the same route without auth, over loopback HTTP/1.1 with keep-alive.
/// Run alone: `moose-bench resource-server`.
enum ResourceServerBench {
    static let issuer = "https://id.example.com"
    static let resource = "https://api.example.com"
    static let url = "https://api.example.com/items"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// jwt-kit's view of an RFC 9068 access token, checking exp, aud and iss as the resource server does.
    struct KitAccessToken: JWTPayload {
        struct Confirmation: Codable, Sendable { let jkt: String }
        let iss: IssuerClaim
        let sub: SubjectClaim
        let aud: AudienceClaim
        let exp: ExpirationClaim
        let iat: IssuedAtClaim
        let jti: IDClaim
        let client_id: String
        let scope: String
        let cnf: Confirmation?

        func verify(using algorithm: some JWTKit.JWTAlgorithm) async throws {
            try exp.verifyNotExpired(currentDate: ResourceServerBench.now)
            try aud.verifyIntendedAudience(includes: ResourceServerBench.resource)
            guard iss.value == ResourceServerBench.issuer else {
                throw JWTKit.JWTError.claimVerificationFailure(failedClaim: iss, reason: "issuer")
            }
        }
    }

    /// jwt-kit's view of a DPoP proof: htm, htu, iat window and ath compared as plain values.
    struct KitProof: JWTPayload {
        let jti: IDClaim
        let htm: String
        let htu: String
        let iat: IssuedAtClaim
        let ath: String

        func verify(using algorithm: some JWTKit.JWTAlgorithm) async throws {
            guard htm == "GET", htu == ResourceServerBench.url,
                abs(iat.value.timeIntervalSince(ResourceServerBench.now)) <= 60
            else {
                throw JWTKit.JWTError.claimVerificationFailure(failedClaim: iat, reason: "htm, htu or iat")
            }
        }
    }

    /// Answers every request with the same canned body (the introspection endpoint, the jwks_uri).
    struct Canned: HTTPTransport {
        let body: String
        func send(_ request: APIRequest) async throws -> APIResponse {
            APIResponse(status: .ok, headerFields: [.contentType: "application/json"], body: Data(body.utf8))
        }
    }

    struct APIContext: ResourceServerRequestContext {
        var coreContext: CoreRequestContextStorage
        var principal: VerifiedPrincipal?
        init(source: Source) { coreContext = .init(source: source) }
    }

    static func ratio(_ a: Double, _ b: Double) -> String { String(format: "%.2fx", a / b) }
    static func us(_ ns: Double) -> String { String(format: "%.2f", ns / 1000) }
    static func met(_ value: Double, _ target: Double) -> String { value <= target ? "yes" : "no" }

    static func claims(bound thumbprint: String? = nil) -> JSONObject {
        let t = Int64(now.timeIntervalSince1970)
        var claims: JSONObject = [
            "iss": .string(issuer), "sub": "alice", "aud": .string(resource), "client_id": "moose-app",
            "exp": .number(JSONNumber(t + 300)), "iat": .number(JSONNumber(t - 10)), "jti": "token-1",
            "scope": "api.read profile"
        ]
        if let thumbprint { claims["cnf"] = .object(["jkt": .string(thumbprint)]) }
        return claims
    }

    static func run(root: URL) async throws {
        let fixtures = root.appendingPathComponent("Fixtures/joserfc")
        let publicJWKS = try String(contentsOf: fixtures.appendingPathComponent("jwks.json"), encoding: .utf8)
        let privateJWKS = try MooseJWT.JWKS(
            json: String(contentsOf: fixtures.appendingPathComponent("jwks-private.json"), encoding: .utf8))
        func signer(_ kid: String, _ algorithm: MooseJWT.JWTAlgorithm) throws -> MooseJWT.JWTSigner {
            try MooseJWT.JWTSigner(key: privateJWKS.keys.first { $0.keyID == kid }!.signingKey(), algorithm: algorithm)
        }
        let issuerKeys = try MooseJWT.JWKS(json: publicJWKS).keys.filter {
            $0.keyID == "rsa-2026" || $0.keyID == "ec256-2026"
        }
        .map { try $0.verificationKey() }
        // A warm JWKSCache: its jwks_uri answered once by a canned transport, then every key from memory.
        let jwksCache = JWKSCache(url: URL(string: "https://id.example.com/jwks")!, transport: Canned(body: publicJWKS))
        _ = try await jwksCache.keys(for: "rsa-2026")

        let kitKeys = JWTKeyCollection()
        try await kitKeys.add(jwksJSON: publicJWKS)

        var configuration = ResourceServerConfiguration(
            issuer: issuer, resource: resource, algorithms: [.rs256, .es256],
            proofs: DPoPProofVerifier(clock: { ResourceServerBench.now }),
            clock: { ResourceServerBench.now })
        configuration.resourceMetadataURL = "https://api.example.com/.well-known/oauth-protected-resource"
        // Every token verified (the verified-token cache off): what a token costs the first time it is seen.
        var everyTime = configuration
        everyTime.verifiedTokenCacheLimit = 0
        let staticServer = MooseResourceServer.ResourceServer(
            configuration: everyTime, keys: StaticAccessTokenKeys(issuerKeys))
        let cachedServer = MooseResourceServer.ResourceServer(configuration: everyTime, keys: jwksCache)
        // The default: a token presented again costs a lookup (its claims still checked on every request).
        let rememberingServer = MooseResourceServer.ResourceServer(configuration: configuration, keys: jwksCache)

        print(
            "\n## Resource server: what a request's credentials cost to check (µs per request, median of 25 rounds)\n")
        print("| row | Moose | anchor | ratio | target | met |")
        print("|---|---:|---:|---:|---|---|")
        var notes: [String] = []

        // MARK: 1. A JWT access token, Bearer.
        for (name, kid, algorithm) in [
            ("RS256", "rsa-2026", MooseJWT.JWTAlgorithm.rs256), ("ES256", "ec256-2026", .es256)
        ] {
            let token = try signer(kid, algorithm).sign(claims(), extraHeader: ["typ": "at+jwt"])
            let header = "Bearer " + token
            let who = try await staticServer.verify(
                authorizationHeader: header, dpopHeader: nil, method: "GET", url: url, requiredScopes: ["api.read"])
            let viaCache = try await cachedServer.verify(
                authorizationHeader: header, dpopHeader: nil, method: "GET", url: url)
            let viaKit = try await kitKeys.verify(token, as: KitAccessToken.self)
            precondition(who.subject == "alice" && viaCache.subject == "alice" && viaKit.sub.value == "alice")
            // The libcrypto floor: the same signature checked straight from C, the key imported once.
            let parts = token.split(separator: ".")
            let input = Array("\(parts[0]).\(parts[1])".utf8)
            var signature = try Base64URL.decode(String(parts[2]))
            if algorithm == .es256 {
                var der = [UInt8](repeating: 0, count: 100)
                let length = floor_ecdsa_raw_to_der(signature, 32, &der)
                signature = Array(der.prefix(length))
            }
            let spki = try issuerKeys.first { $0.keyID == kid }!.publicKey!.derRepresentation()
            let floorKey = spki.withUnsafeBufferPointer { floor_import_spki($0.baseAddress, $0.count) }
            let sig = signature
            precondition(floor_verify(floorKey, "SHA256", sig, sig.count, input, input.count) == 1)
            let stats = try await compare(
                ["floor", "kit", "static", "jwks", "again"], batch: 300,
                [
                    { n in
                        for _ in 0..<n {
                            blackHole(floor_verify(floorKey, "SHA256", sig, sig.count, input, input.count))
                        }
                    },
                    { n in for _ in 0..<n { blackHole(try await kitKeys.verify(token, as: KitAccessToken.self)) } },
                    { n in
                        for _ in 0..<n {
                            blackHole(
                                try await staticServer.verify(
                                    authorizationHeader: header, dpopHeader: nil, method: "GET", url: url,
                                    requiredScopes: ["api.read"]))
                        }
                    },
                    { n in
                        for _ in 0..<n {
                            blackHole(
                                try await cachedServer.verify(
                                    authorizationHeader: header, dpopHeader: nil, method: "GET", url: url,
                                    requiredScopes: ["api.read"]))
                        }
                    },
                    { n in
                        for _ in 0..<n {
                            blackHole(
                                try await rememberingServer.verify(
                                    authorizationHeader: header, dpopHeader: nil, method: "GET", url: url,
                                    requiredScopes: ["api.read"]))
                        }
                    }
                ])
            let kit = stats["kit"]!.median, floor = stats["floor"]!.median
            for (label, key) in [
                ("every token verified, StaticAccessTokenKeys", "static"),
                ("every token verified, warm JWKSCache", "jwks"),
                ("the token presented again, warm JWKSCache, the default", "again")
            ] {
                let moose = stats[key]!.median
                print(
                    "| \(name) access token, Bearer, `ResourceServer.verify` (\(label)) vs jwt-kit `verify` (cached key) | \(us(moose)) | \(us(kit)) | \(ratio(moose, kit)) | ≤ 1.0x | \(met(moose / kit, 1.0)) |"
                )
            }
            notes.append(
                "\(name): the libcrypto floor (the signature alone, from C) \(us(floor)) µs; jwt-kit \(ratio(kit, floor)) of it, `ResourceServer.verify` \(ratio(stats["static"]!.median, floor))."
            )
        }

        // MARK: 2. DPoP proof + DPoP-bound token.
        do {
            let clientKey = try PrivateKey.generate(.ec(.p256))
            let clientSigner = try MooseJWT.JWTSigner(key: JWTKey(privateKey: clientKey), algorithm: .es256)
            let clientJWK = try MooseJWT.JWK(publicKey: clientKey.publicKey())
            let token = try signer("ec256-2026", .es256).sign(
                claims(bound: try clientJWK.thumbprint()), extraHeader: ["typ": "at+jwt"])
            let header = "DPoP " + token
            // jwt-kit gets the client's key once (a cached key, no kid: the collection's default).
            let clientKit = JWTKeyCollection()
            var kidded = clientJWK.fields
            kidded["kid"] = "client"
            kidded["alg"] = "ES256"
            try await clientKit.add(jwksJSON: #"{"keys":["# + JSONValue.object(kidded).serialized() + "]}")
            // Every proof has its own jti (the replay cache refuses a second use): made before timing.
            let rounds = 25, batch = 200
            let count = rounds * batch + max(10, batch / 10) + 1
            var proofs: [String] = []
            proofs.reserveCapacity(count)
            for _ in 0..<count {
                proofs.append(
                    try DPoP.proof(
                        signer: clientSigner, publicJWK: clientJWK, method: "GET", url: url, accessToken: token, at: now
                    ))
            }
            // One client makes every proof of the run inside one proof window (the clock stands still): a busier
            // client than the replay cache's default per-key quota (4,000) allows, so the quota is raised.
            let busyClient = {
                InMemoryDPoPReplayCache(maximumEntriesPerKey: 100_000, clock: { ResourceServerBench.now })
            }
            // The default (the bound token presented again: its signature remembered, a new proof checked each
            // time), and every token verified (the verified-token cache off).
            let server = MooseResourceServer.ResourceServer(
                configuration: configuration, keys: StaticAccessTokenKeys(issuerKeys),
                replayCache: busyClient())
            let coldServer = MooseResourceServer.ResourceServer(
                configuration: everyTime, keys: StaticAccessTokenKeys(issuerKeys),
                replayCache: busyClient())
            let who = try await server.verify(
                authorizationHeader: header, dpopHeader: proofs[count - 1], method: "GET", url: url,
                requiredScopes: ["api.read"])
            let kitProof = try await clientKit.verify(proofs[0], as: KitProof.self)
            precondition(who.scheme == .dpop && who.subject == "alice" && kitProof.htu == url)
            var mooseNext = 0, coldNext = 0, kitNext = 0, importNext = 0
            let x = clientJWK.fields["x"]!.stringValue!, y = clientJWK.fields["y"]!.stringValue!
            let proofVerifier = configuration.proofs
            let jwkFields = clientJWK.fields
            let stats = try await compare(
                ["kit", "moose", "cold", "kitImport", "proofOnly", "jwkImport"], rounds: rounds, batch: batch,
                [
                    { n in
                        for _ in 0..<n {
                            blackHole(try await kitKeys.verify(token, as: KitAccessToken.self))
                            blackHole(try await clientKit.verify(proofs[kitNext], as: KitProof.self))
                            kitNext += 1
                        }
                    },
                    { n in
                        for _ in 0..<n {
                            blackHole(
                                try await server.verify(
                                    authorizationHeader: header, dpopHeader: proofs[mooseNext], method: "GET", url: url,
                                    requiredScopes: ["api.read"]))
                            mooseNext += 1
                        }
                    },
                    { n in
                        for _ in 0..<n {
                            blackHole(
                                try await coldServer.verify(
                                    authorizationHeader: header, dpopHeader: proofs[coldNext], method: "GET", url: url,
                                    requiredScopes: ["api.read"]))
                            coldNext += 1
                        }
                    },
                    { n in
                        // jwt-kit with the proof's key imported per proof, as a DPoP check must (the key travels in the proof).
                        for _ in 0..<n {
                            blackHole(try await kitKeys.verify(token, as: KitAccessToken.self))
                            let proofKeys = JWTKeyCollection()
                            await proofKeys.add(ecdsa: try ES256PublicKey(parameters: (x: x, y: y)))
                            blackHole(try await proofKeys.verify(proofs[importNext], as: KitProof.self))
                            importNext += 1
                        }
                    },
                    { n in
                        for i in 0..<n {
                            blackHole(try proofVerifier.verify(proofs[i], method: "GET", url: url, accessToken: token))
                        }
                    },
                    { n in for _ in 0..<n { blackHole(try MooseJWT.JWK(jwkFields).verificationKey()) } }
                ])
            let kit = stats["kit"]!.median, moose = stats["moose"]!.median, cold = stats["cold"]!.median
            let kitImport = stats["kitImport"]!.median
            print(
                "| DPoP proof + DPoP-bound ES256 token, `ResourceServer.verify` (every token verified) vs jwt-kit verifying the two ES256 JWTs (cached keys) | \(us(cold)) | \(us(kit)) | \(ratio(cold, kit)) | ≤ 1.3x | \(met(cold / kit, 1.3)) |"
            )
            print(
                "| DPoP proof + DPoP-bound ES256 token, `ResourceServer.verify` (every token verified) vs jwt-kit importing the proof's key per proof | \(us(cold)) | \(us(kitImport)) | \(ratio(cold, kitImport)) | ≤ 1.0x | \(met(cold / kitImport, 1.0)) |"
            )
            print(
                "| DPoP proof + DPoP-bound ES256 token, `ResourceServer.verify` (the token presented again, the default) vs jwt-kit importing the proof's key per proof | \(us(moose)) | \(us(kitImport)) | \(ratio(moose, kitImport)) | ≤ 1.0x | \(met(moose / kitImport, 1.0)) |"
            )
            notes.append(
                "DPoP: jwt-kit importing the proof's key per proof (as a DPoP check must) \(us(kitImport)) µs (Moose \(ratio(moose, kitImport)) of it); in Moose, `DPoPProofVerifier.verify` alone \(us(stats["proofOnly"]!.median)) µs, of which importing the proof's jwk \(us(stats["jwkImport"]!.median)) µs."
            )
        }

        // MARK: 3. Introspection cache hit.
        do {
            let exp = Int64(now.timeIntervalSince1970) + 600
            let answer =
                #"{"active":true,"client_id":"moose-app","scope":"api.read profile","exp":\#(exp),"sub":"alice","iss":"\#(issuer)","aud":"\#(resource)"}"#
            let introspector = TokenIntrospector(
                endpoint: URL(string: "https://id.example.com/introspect")!, clientID: "rs", clientSecret: "s",
                transport: Canned(body: answer), clock: { ResourceServerBench.now })
            let server = MooseResourceServer.ResourceServer(
                configuration: configuration, keys: StaticAccessTokenKeys([]), introspector: introspector)
            let token = Base64URL.encode(try SecureRandom.bytes(count: 32)) // 43 characters, opaque
            let header = "Bearer " + token
            let first = try await introspector.introspect(token) // the one call to the endpoint; the rest are hits
            let viaServer = try await server.verify(
                authorizationHeader: header, dpopHeader: nil, method: "GET", url: url)
            precondition(first.active && viaServer.subject == "alice")
            let requests = await introspector.requestCount
            precondition(requests == 1)
            var dictionary: [String: IntrospectionAnswer] = [:]
            for i in 0..<1000 { dictionary["other-\(i)"] = first }
            dictionary[token] = first
            let lookup = dictionary
            var sink = 0
            let stats = try await compare(
                ["dict", "hit", "verify"], batch: 5000,
                [
                    { n in for _ in 0..<n { if lookup[token]!.active { sink &+= 1 } } },
                    { n in for _ in 0..<n { if try await introspector.introspect(token).active { sink &+= 1 } } },
                    { n in
                        for _ in 0..<n {
                            blackHole(
                                try await server.verify(
                                    authorizationHeader: header, dpopHeader: nil, method: "GET", url: url,
                                    requiredScopes: ["api.read"]))
                        }
                    }
                ])
            blackHole(sink)
            let after = await introspector.requestCount
            precondition(after == 1)
            let dict = stats["dict"]!.median, hit = stats["hit"]!.median, verify = stats["verify"]!.median
            print(
                "| introspection cache hit, `TokenIntrospector.introspect` (ns) vs a `[String: IntrospectionAnswer]` lookup of the same token | \(String(format: "%.0f ns", hit)) | \(String(format: "%.0f ns", dict)) | \(ratio(hit, dict)) | ≤ 1 µs | \(met(hit, 1000)) |"
            )
            print(
                "| opaque token, Bearer, whole `ResourceServer.verify` on an introspection cache hit (ns) vs the same lookup | \(String(format: "%.0f ns", verify)) | \(String(format: "%.0f ns", dict)) | \(ratio(verify, dict)) | — | — |"
            )
        }

        // MARK: 4. A Hummingbird route behind ResourceServerMiddleware vs the same route without auth.
        if ProcessInfo.processInfo.environment["MOOSE_BENCH_NO_HUMMINGBIRD"] == nil {
            try await hummingbird(
                configuration: configuration, issuerKeys: issuerKeys, signer: signer("rsa-2026", .rs256))
        }
        print("")
        for note in notes { print("- " + note) }
    }

    static func hummingbird(
        configuration: ResourceServerConfiguration, issuerKeys: [JWTKey], signer: MooseJWT.JWTSigner
    ) async throws {
        let server = MooseResourceServer.ResourceServer(
            configuration: configuration, keys: StaticAccessTokenKeys(issuerKeys))
        let router = Router(context: APIContext.self)
        router.get("open") { _, _ in "hello alice" }
        router.group("items")
            .add(
                middleware: ResourceServerMiddleware(
                    server: server, publicBaseURL: resource, requiredScopes: ["api.read"])
            )
            .get { _, context in "hello \(context.principal?.subject ?? "")" }
        // The same middleware with every token verified (the verified-token cache off).
        var everyTime = configuration
        everyTime.verifiedTokenCacheLimit = 0
        router.group("fresh")
            .add(
                middleware: ResourceServerMiddleware(
                    server: MooseResourceServer.ResourceServer(
                        configuration: everyTime, keys: StaticAccessTokenKeys(issuerKeys)),
                    publicBaseURL: resource, requiredScopes: ["api.read"])
            )
            .get { _, context in "hello \(context.principal?.subject ?? "")" }
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        setenv("LOG_LEVEL", "error", 1) // Hummingbird's default logger: no line per start
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in portSink.yield(channel.localAddress?.port ?? 0) })
        let running = Task { try await app.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else { print("Hummingbird: no port"); return }
        defer { running.cancel() }

        let token = try signer.sign(claims(), extraHeader: ["typ": "at+jwt"])
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let get: @Sendable (String) async throws -> Int = { path in
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
            // Both routes get the same header bytes: only the middleware's work differs.
            request.headers.add(name: "Authorization", value: "Bearer " + token)
            let response = try await client.execute(request, timeout: .seconds(20))
            let body = try await response.body.collect(upTo: 1 << 20)
            precondition(
                response.status == .ok && body.readableBytes == 11, "HTTP \(response.status.code) from \(path)")
            return body.readableBytes
        }
        _ = try await get("/open")
        _ = try await get("/items")
        _ = try await get("/fresh")
        // Concurrency 1 (latency) and 4 (throughput on 2 cores): `concurrency` clients, each n / concurrency requests.
        for concurrency in [1, 4] {
            func load(_ path: String) -> (Int) async throws -> Void {
                { n in
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for _ in 0..<concurrency {
                            group.addTask { for _ in 0..<(n / concurrency) { _ = try await get(path) } }
                        }
                        try await group.waitForAll()
                    }
                }
            }
            let stats = try await compare(
                ["open", "auth", "fresh"], rounds: 25, batch: 400, [load("/open"), load("/items"), load("/fresh")])
            let open = stats["open"]!.median, auth = stats["auth"]!.median, fresh = stats["fresh"]!.median
            let connections = "\(concurrency) connection\(concurrency > 1 ? "s" : "")"
            print(
                "| Hummingbird GET over loopback HTTP/1.1 (AsyncHTTPClient, \(connections)), RS256 Bearer behind `ResourceServerMiddleware` (the default: the token presented again) vs the same route without auth (µs per request) | \(us(auth)) | \(us(open)) | \(ratio(auth, open)) | ≤ 1.10x | \(met(auth / open, 1.10)) |"
            )
            print(
                "| Hummingbird GET, the same with every token verified (verified-token cache off) vs the route without auth (\(connections)) | \(us(fresh)) | \(us(open)) | \(ratio(fresh, open)) | — | — |"
            )
        }
        try await client.shutdown()
    }
}
