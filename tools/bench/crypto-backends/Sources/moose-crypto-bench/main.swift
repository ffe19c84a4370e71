// Prints one tab-separated line per row: the row's name and the median µs per operation (25 rounds).
// The same code measures whichever backend Moose was built with (see Package.swift).
import Foundation
import MooseCrypto
import MooseJWT

/// Median ns per operation of `body` over `rounds` rounds of `batch` calls.
func measure(rounds: Int = 25, batch: Int, _ body: () throws -> Void) rethrows -> Double {
    var samples: [Double] = []
    for _ in 0..<rounds {
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<batch { try body() }
        samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / Double(batch))
    }
    return samples.sorted()[samples.count / 2]
}

func row(_ name: String, _ nanoseconds: Double) { print("\(name)\t\(String(format: "%.2f", nanoseconds / 1000))") }

let message = Array(String(repeating: "eyJhbGciOiJFUzI1NiJ9.payload", count: 10).utf8)

// Signature verification (the JWS signing input of an access-token-sized message), keys imported once.
let secret = try SecretKey(randomByteCount: 32)
let mac = try HMACAuthenticator(key: secret, hash: .sha256)
let tag = try mac.authenticationCode(for: message)
row("HS256 verify", measure(batch: 20_000) { precondition(mac.isValidAuthenticationCode(tag, for: message)) })
for (name, spec, algorithm) in [
    ("RS256 verify", PrivateKey.GenerationSpec.rsa(bits: 2048), SignatureAlgorithm.rsaPKCS1v15(.sha256)),
    ("PS256 verify", .rsa(bits: 2048), .rsaPSS(.sha256)),
    ("ES256 verify", .ec(.p256), .ecdsa(.sha256)),
    ("EdDSA verify", .ed25519, .ed25519)
] {
    let key = try PrivateKey.generate(spec)
    let publicKey = try PublicKey(der: key.publicKey().derRepresentation())
    let signature = try key.signature(for: message, algorithm: algorithm)
    row(
        name,
        try measure(batch: 1_000) {
            let valid = try publicKey.isValidSignature(signature, for: message, algorithm: algorithm)
            precondition(valid)
        })
}
let es256 = try PrivateKey.generate(.ec(.p256))
row("ES256 sign", try measure(batch: 1_000) { _ = try es256.signature(for: message, algorithm: .ecdsa(.sha256)) })

// A whole JWT: MooseJWT's verifier (parse, verify, decode claims) over an ES256 token.
let signer = try JWTSigner(key: JWTKey(privateKey: es256), algorithm: .es256)
let token = try signer.sign(["iss": "https://issuer.example", "sub": "bench", "exp": 4_000_000_000])
let verifier = JWTVerifier(keys: [JWTKey(publicKey: try es256.publicKey())], allowedAlgorithms: [.es256])
row("ES256 JWT verify + decode", try measure(batch: 1_000) { _ = try verifier.verify(token) })

// The store's AES-256-GCM (1 KiB values, the context reused, a random nonce per seal).
let gcmKey = try SecretKey(randomByteCount: 32)
let context = try AESGCM.Context(key: gcmKey)
let value = [UInt8](repeating: 0x5A, count: 1024), aad = Array("moose-secret/v1 bench".utf8)
let sealed = try context.sealCombined(value, authenticating: aad)
row("AES-256-GCM seal 1 KiB", try measure(batch: 5_000) { _ = try context.sealCombined(value, authenticating: aad) })
row("AES-256-GCM open 1 KiB", try measure(batch: 5_000) { _ = try context.openCombined(sealed, authenticating: aad) })
row("SHA-256 1 KiB", measure(batch: 20_000) { _ = DigestAlgorithm.sha256.hash(value) })
