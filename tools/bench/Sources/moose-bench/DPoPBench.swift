import CFloor
import Foundation
import MooseCrypto
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseURLSession

/// DPoP (RFC 9449): one ES256 proof per request against the libcrypto floor (the same signature
/// straight from C, plus the base64url encoding of header, claims and signature), and a DPoP
/// request through `APIClient` + `AuthMiddleware` against the same request with a bearer token.
enum DPoPBench {
    /// The DER inside a PEM block.
    static func der(fromPEM pem: String) throws -> [UInt8] {
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let data = Data(base64Encoded: body) else { throw CocoaError(.coderReadCorrupt) }
        return Array(data)
    }

    static func run(root: URL) async throws {
        let key = try DPoPKey.generate(.es256)
        let url = URL(string: "https://api.example.com/v1/me")!
        let token = String(repeating: "t", count: 43)
        // The floor: the same header and claims bytes (serialized once), signed by C, encoded here.
        let sample = try JWT(compact: try key.proof(method: .get, url: url, accessToken: token, nonce: "n"))
        let headerBytes = Array(JSONValue.object(sample.header.fields).serialized().utf8)
        let claimBytes = Array(JSONValue.object(sample.claims.fields).serialized().utf8)
        // The key as the store keeps it (its Codable form), imported by C from DER.
        let stored = try JSONSerialization.jsonObject(with: JSONEncoder().encode(key)) as? [String: String] ?? [:]
        let pem = try Self.der(fromPEM: stored["private_key_pem"] ?? "")
        guard let floorKey = pem.withUnsafeBufferPointer({ floor_import_pkcs8($0.baseAddress, $0.count) }) else {
            print("DPoP bench: the floor could not import the key"); return
        }
        defer { floor_free_key(floorKey) }
        var raw = [UInt8](repeating: 0, count: 64)
        var sink = 0
        let stats = try await compare(
            ["floor", "moose"], batch: 2000,
            [
                { n in
                    for _ in 0..<n {
                        let input = Base64URL.encode(headerBytes) + "." + Base64URL.encode(claimBytes)
                        let bytes = Array(input.utf8)
                        _ = floor_es256_sign(floorKey, bytes, bytes.count, &raw)
                        sink &+= (input + "." + Base64URL.encode(raw)).utf8.count
                    }
                },
                { n in
                    for _ in 0..<n {
                        sink &+= try key.proof(method: .get, url: url, accessToken: token, nonce: "n").utf8.count
                    }
                }
            ])
        blackHole(sink)
        let floor = stats["floor"]!.median, moose = stats["moose"]!.median
        print("\n## DPoP proof (ES256), µs per proof, median of 25 rounds\n")
        print(
            "| libcrypto ES256 sign + base64url (floor) | `DPoPKey.proof` (jti, claims, JSON, sign) | ratio | target |")
        print("|---|---|---|---|")
        print(
            "| \(String(format: "%.2f", floor / 1000)) | \(String(format: "%.2f", moose / 1000)) | \(String(format: "%.2fx", moose / floor)) | ≤ 1.3x |"
        )

        // A request through APIClient + AuthMiddleware: DPoP-bound token against a bearer one, same server.
        let (server, base) = try HTTPBench.startServer(root: root)
        defer { kill(server.processIdentifier, SIGKILL) }
        func coordinator(_ tokens: TokenSet) -> RefreshCoordinator {
            let session = OAuthSession(issuer: "https://id.example.com", clientID: "c", tokens: tokens)
            return benchCoordinator(key: "k", storage: InMemorySessionStorage(), current: session) { $0 }
        }
        var bound = TokenSet(accessToken: token, tokenType: "DPoP", expiresAt: Date().addingTimeInterval(3600))
        bound.dpopKey = key
        let bearer = TokenSet(accessToken: token, tokenType: "Bearer", expiresAt: Date().addingTimeInterval(3600))
        struct Echo: Endpoint {
            let baseURL: URL
            var path: String { "/echo" }
            var requiresAuthentication: Bool { true }
        }
        let transport = URLSessionTransport()
        let bearerClient = APIClient(
            transport: transport, middlewares: [AuthMiddleware(coordinator: coordinator(bearer))], retryPolicy: .none)
        let dpopClient = APIClient(
            transport: transport, middlewares: [AuthMiddleware(coordinator: coordinator(bound))], retryPolicy: .none)
        let endpoint = Echo(baseURL: base)
        let requests = try await compare(
            ["bearer", "dpop"], rounds: 15, batch: 100,
            [
                { n in for _ in 0..<n { _ = try await bearerClient.send(endpoint) } },
                { n in for _ in 0..<n { _ = try await dpopClient.send(endpoint) } }
            ])
        let bearerNs = requests["bearer"]!.median, dpopNs = requests["dpop"]!.median
        print("\n## A request through APIClient + AuthMiddleware: DPoP against Bearer (µs per request, local server)\n")
        print("| Bearer | DPoP (a fresh proof per request) | added | ratio |")
        print("|---|---|---|---|")
        print(
            "| \(String(format: "%.1f", bearerNs / 1000)) | \(String(format: "%.1f", dpopNs / 1000)) | \(String(format: "%.1f", (dpopNs - bearerNs) / 1000)) µs | \(String(format: "%.2fx", dpopNs / bearerNs)) |"
        )
    }
}
