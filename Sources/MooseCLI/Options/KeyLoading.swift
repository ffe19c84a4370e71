import MooseCrypto
import MooseJWT
import MooseOAuth
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Reads verification keys for `moose inspect` from the places the user named.
enum KeyLoading {
    /// Reads a whole file, with a size limit and a clear error (`SessionPlan.readFile`'s, as a usage
    /// error): at most `limit` + 1 bytes, so a FIFO such as `<(command)` works.
    static func readFile(_ path: String, what: String, limit: Int = 1 << 20) throws -> [UInt8] {
        do {
            return try SessionPlan.readFile(path, what: what, limit: limit)
        } catch let error as OAuthError {
            throw CLIError.usage(error.message)
        }
    }

    /// Keys from a JWKS document (or a single JWK).
    static func jwks(_ bytes: [UInt8], source: String) throws -> [JWTKey] {
        do {
            let set = try JWKS(json: bytes)
            for reason in set.skipped { Terminal.error("moose: warning: \(source): skipped \(reason)") }
            guard !set.keys.isEmpty else { throw CLIError.usage("\(source) holds no usable key") }
            return try set.keys.map { try $0.verificationKey() }
        } catch let error as JWTError {
            throw CLIError.usage("\(source) is not a usable JWKS: \(error.message)")
        }
    }

    /// A key file: PEM (public key, certificate or private key), a JWK, or a JWKS.
    static func keyFile(_ path: String) throws -> [JWTKey] {
        let bytes = try readFile(path, what: "key file")
        let text = String(decoding: bytes, as: UTF8.self)
        let trimmed = text.drop { $0.isWhitespace }
        if trimmed.hasPrefix("{") { return try jwks(bytes, source: path) }
        guard trimmed.hasPrefix("-----BEGIN") else {
            throw CLIError.usage("key file \(path) is neither PEM nor JSON (JWK)")
        }
        do {
            return [try JWTKey(pem: text)]
        } catch {
            throw CLIError.usage("key file \(path): \(error.message)")
        }
    }

    /// The algorithms a key can verify, for the default allow-list when `--alg` is not given.
    static func algorithms(for key: JWTKey) -> Set<JWTAlgorithm> {
        if let pinned = key.pinnedAlgorithm {
            guard let algorithm = JWTAlgorithm(rawValue: pinned) else { return [] }
            return algorithm.keyFamily == .okp ? [.eddsa, .ed25519] : [algorithm]
        }
        switch key.family {
        case .hmac: return [.hs256, .hs384, .hs512]
        case .rsa: return [.rs256, .rs384, .rs512, .ps256, .ps384, .ps512]
        case .okp: return [.eddsa, .ed25519]
        case .ec:
            guard case .ec(let curve) = key.publicKey?.type else { return [] }
            return Set(JWTAlgorithm.allCases.filter { $0.curve == curve })
        }
    }
}
