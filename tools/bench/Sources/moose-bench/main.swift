// Moose benchmarks: each figure is measured side by side with its anchor, in one run, in rounds
// that interleave the contenders (so drift in machine load hits all of them alike). Reports medians.
import CFloor
import Foundation
import JWTKit
import MooseCrypto
import MooseJWT
import MooseSecretStore

// MARK: - Timing

struct Stats {
    let samples: [Double] // ns per operation, one per round
    var median: Double { samples.sorted()[samples.count / 2] }
    var microseconds: String { String(format: "%.2f", median / 1000) }
}

@inline(never) func blackHole<T>(_ value: T) { withExtendedLifetime(value) {} }

/// Rounds of `batch` operations for each contender, interleaved; returns ns/op medians.
/// Each body runs its whole batch itself (`body(n)` does n operations), so the cost of calling into
/// the closure (an executor hop for main-actor closures) is spread over the batch, not charged per op.
func compare(_ names: [String], rounds: Int = 25, batch: Int, _ bodies: [(Int) async throws -> Void]) async throws
    -> [String: Stats]
{
    var samples = [[Double]](repeating: [], count: bodies.count)
    for body in bodies { try await body(max(10, batch / 10)) } // warm up
    for _ in 0..<rounds {
        for (index, body) in bodies.enumerated() {
            let start = DispatchTime.now().uptimeNanoseconds
            try await body(batch)
            let elapsed = DispatchTime.now().uptimeNanoseconds - start
            samples[index].append(Double(elapsed) / Double(batch))
        }
    }
    var result: [String: Stats] = [:]
    for (index, name) in names.enumerated() { result[name] = Stats(samples: samples[index]) }
    return result
}

/// jwt-kit's view of the access token: the same 18 claims, decoded into a Codable struct.
struct AccessClaims: JWTPayload {
    struct Tenant: Codable, Sendable { let id: String; let region: String }
    let iss: IssuerClaim
    let sub: SubjectClaim
    let aud: AudienceClaim
    let exp: ExpirationClaim
    let nbf: NotBeforeClaim
    let iat: IssuedAtClaim
    let jti: IDClaim
    let client_id: String
    let scope: String
    let sid: String
    let auth_time: Int
    let acr: String
    let amr: [String]
    let email: String
    let email_verified: Bool
    let name: String
    let roles: [String]
    let tenant: Tenant

    func verify(using algorithm: some JWTKit.JWTAlgorithm) async throws {
        try exp.verifyNotExpired(currentDate: Date(timeIntervalSince1970: 1_800_000_000))
    }
}

/// Everything runs off the main actor: closures made in top-level code would be main-actor isolated,
/// and every call into them would cost an executor hop that belongs to neither contender.
enum JWTBench {
    static func run() async throws {
        let fixedNow = Date(timeIntervalSince1970: 1_800_000_000)
        // Fixtures made by joserfc: the same token and key for every contender.

        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let fixtures = root.appendingPathComponent("Fixtures/joserfc")
        let tokenDoc =
            try JSONSerialization.jsonObject(with: Data(contentsOf: fixtures.appendingPathComponent("tokens.json")))
            as! [String: Any]
        let tokens = tokenDoc["tokens"] as! [String: String]
        let jwksText = try String(contentsOf: fixtures.appendingPathComponent("jwks.json"), encoding: .utf8)
        let secret = try Data(contentsOf: fixtures.appendingPathComponent("hs256.secret"))

        let kitKeys = JWTKeyCollection()
        try await kitKeys.add(jwksJSON: jwksText)
        await kitKeys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: "hs-2026")

        let mooseJWKS = try JWKS(json: jwksText)
        let mooseKeys = try mooseJWKS.keys.map { try $0.verificationKey() }
        // The fixture tokens name an audience: a verifier without one refuses them (audienceNotChecked).
        let validation = ClaimValidation(audiences: ["moose-cli"], clock: { fixedNow })
        func mooseVerifier(_ algorithm: MooseJWT.JWTAlgorithm) -> JWTVerifier {
            algorithm == .hs256
                ? JWTVerifier(
                    keys: [JWTKey(secret: secret, keyID: "hs-2026")], allowedAlgorithms: [.hs256],
                    validation: validation)
                : JWTVerifier(keys: mooseKeys, allowedAlgorithms: [algorithm], validation: validation)
        }

        // MARK: - JWT: decode and verify+decode

        if CommandLine.arguments.dropFirst().first == "profile-rs256" {
            let verifier = mooseVerifier(.rs256)
            let token = tokens["rs256"]!
            for _ in 0..<(Int(CommandLine.arguments.last ?? "") ?? 20_000) { blackHole(try verifier.verify(token)) }
            exit(0)
        }
        if CommandLine.arguments.dropFirst().first == "profile-decode" {
            // A plain loop for callgrind/perf: decode the HS256 token N times.
            let token = tokens["hs256"]!
            for _ in 0..<(Int(CommandLine.arguments.last ?? "") ?? 20_000) { blackHole(try JWT(compact: token)) }
            exit(0)
        }

        print("\n## JWT verify + decode (µs per token, median of 25 rounds)\n")
        print("| | token bytes | libcrypto floor (C) | jwt-kit 5.8 | Moose | Moose / jwt-kit | Moose / floor |")
        print("|---|---|---|---|---|---|---|")

        struct Row { let name: String; let floor: Double?; let kit: Double; let moose: Double }
        var rows: [Row] = []

        for (name, algorithm) in [
            ("HS256", MooseJWT.JWTAlgorithm.hs256), ("RS256", .rs256), ("ES256", .es256), ("EdDSA", .eddsa)
        ] {
            let token = tokens[name.lowercased()]!
            let parts = token.split(separator: ".")
            let input = Array("\(parts[0]).\(parts[1])".utf8)
            let signature = try Base64URL.decode(String(parts[2]))
            let verifier = mooseVerifier(algorithm)
            // Check every contender accepts the token before timing it.
            let mooseJWT = try verifier.verify(token)
            precondition(mooseJWT.claims.subject == "248289761001")
            let kitPayload = try await kitKeys.verify(token, as: AccessClaims.self)
            precondition(kitPayload.sub.value == "248289761001")

            var floorBody: ((Int) async throws -> Void)? = nil
            if algorithm == .hs256 {
                precondition(
                    secret.withUnsafeBytes { k in
                        floor_hmac_sha256(k.baseAddress, k.count, input, input.count, signature)
                    } == 1)
                floorBody = { n in
                    secret.withUnsafeBytes { k in
                        for _ in 0..<n {
                            blackHole(floor_hmac_sha256(k.baseAddress, k.count, input, input.count, signature))
                        }
                    }
                }
            } else {
                let kid = try JWS(compact: token).header.keyID
                let jwk = mooseJWKS.keys.first { $0.keyID == kid }!
                let der = try jwk.verificationKey().publicKey!.derRepresentation()
                let key = der.withUnsafeBufferPointer { floor_import_spki($0.baseAddress, $0.count) }
                var sig = signature
                if algorithm == .es256 {
                    var out = [UInt8](repeating: 0, count: 100)
                    let length = floor_ecdsa_raw_to_der(signature, 32, &out)
                    sig = Array(out.prefix(length))
                }
                let md: String? = algorithm == .eddsa ? nil : "SHA256"
                let finalSig = sig
                precondition(floor_verify(key, md, finalSig, finalSig.count, input, input.count) == 1)
                floorBody = { n in
                    for _ in 0..<n { blackHole(floor_verify(key, md, finalSig, finalSig.count, input, input.count)) }
                }
            }
            let batch = algorithm == .hs256 ? 2000 : 300
            let stats = try await compare(
                ["floor", "kit", "moose"], batch: batch,
                [
                    floorBody!,
                    { n in for _ in 0..<n { blackHole(try await kitKeys.verify(token, as: AccessClaims.self)) } },
                    { n in for _ in 0..<n { blackHole(try verifier.verify(token)) } }
                ])
            let row = Row(
                name: name, floor: stats["floor"]!.median, kit: stats["kit"]!.median, moose: stats["moose"]!.median)
            rows.append(row)
            print(
                "| \(name) | \(token.utf8.count) | \(stats["floor"]!.microseconds) | \(stats["kit"]!.microseconds) | \(stats["moose"]!.microseconds) | \(String(format: "%.2fx", row.moose / row.kit)) | \(String(format: "%.2fx", row.moose / row.floor!)) |"
            )
        }

        do {
            let token = tokens["hs256"]!
            let payload = try JWS(compact: token).payload
            let payloadData = Data(payload)
            let stats = try await compare(
                ["kit", "moose", "json"], batch: 2000,
                [
                    { n in for _ in 0..<n { blackHole(try await kitKeys.unverified(token, as: AccessClaims.self)) } },
                    { n in for _ in 0..<n { blackHole(try JWT(compact: token)) } },
                    { n in for _ in 0..<n { blackHole(try JSONDecoder().decode(AccessClaims.self, from: payloadData)) }
                    }
                ])
            let kit = stats["kit"]!.median, moose = stats["moose"]!.median
            print(
                "| decode only | \(token.utf8.count) | — | \(stats["kit"]!.microseconds) | \(stats["moose"]!.microseconds) | \(String(format: "%.2fx", moose / kit)) | — |"
            )
            print(
                "\nFor scale: Foundation's JSONDecoder on the payload alone (into jwt-kit's claims struct): \(stats["json"]!.microseconds) µs."
            )
        }

    }
}

print("# Moose benchmarks — \(ProcessInfo.processInfo.processorCount) cores, \(Date())")
let mode = CommandLine.arguments.dropFirst().first ?? "all"
if mode == "profile-store-get" {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent(
        "moose-profile-\(UUID().uuidString).sqlite"
    ).path
    let store = try SecretStore(path: path, masterKey: .raw(try SecureRandom.bytes(count: 32)), durability: .normal)
    let value = [UInt8](repeating: 7, count: 1024)
    for i in 0..<1000 { try store.put(value, namespace: "bench", name: "item-\(i)") }
    for i in 0..<200_000 { _ = try store.get(namespace: "bench", name: "item-\(i % 1000)") }
    exit(0)
}
if mode == "all" || mode == "jwt" { try await JWTBench.run() }
if mode == "all" || mode == "coordinator" {
    try await CoordinatorBench.run()
}
if mode == "all" || mode == "http" || mode == "http-profile" {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    try await HTTPBench.run(root: root)
}
if mode == "all" || mode == "grants" {
    try await GrantBench.run()
}
if mode == "all" || mode == "postgres" {
    try await PostgresBench.run()
}
if mode == "pg-ops" { try await PostgresBench.runOps() }
if mode == "postgres-herd" {
    try await PostgresBench.runHerd(runs: Int(CommandLine.arguments.dropFirst(2).first ?? "") ?? 3)
}
if mode == "all" || mode == "dpop" {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    try await DPoPBench.run(root: root)
}
if mode == "all" || mode == "adapters" {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    try await AdapterBench.run(root: root)
}
if mode == "all" || mode == "resource-server" {
    // `moose-bench resource-server`: these rows alone (MOOSE_BENCH_NO_HUMMINGBIRD=1 skips the HTTP one).
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    try await ResourceServerBench.run(root: root)
}
if mode == "all" || mode == "store" {
    let sqlcipher = ProcessInfo.processInfo.environment["SQLCIPHER_BENCH"]
    try StoreBench.run(rows: 10_000, sqlcipher: sqlcipher)
}
