#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Verifies JWTs: algorithm allow-list, key selection, signature, then claims.
///
/// The rules (RFC 7515, RFC 7519, RFC 8725 "JWT Best Current Practices"):
/// - the algorithm must be in `allowedAlgorithms`; `none` is never accepted;
/// - the key is chosen by `kid`, or — without a `kid` — the single configured key that fits;
///   its type (and curve) must fit the algorithm, and a key pinned to an algorithm is used only with it;
/// - keys named by the header (`jku`, `x5u`, `jwk`) are never trusted: such tokens are refused;
/// - unknown `crit` parameters are refused;
/// - claims are decoded only after the signature checks out.
///
/// ```swift
/// let verifier = JWTVerifier(
///     keys: try JWKS(json: jwksData).keys.map { try $0.verificationKey() },
///     allowedAlgorithms: [.rs256],
///     validation: ClaimValidation(issuer: "https://id.example.com", audiences: ["my-api"], leeway: 30))
/// let jwt = try verifier.verify(token)
/// print(jwt.claims.subject ?? "-")
/// ```
public struct JWTVerifier: Sendable {
    /// The trusted keys.
    public var keys: [JWTKey]
    /// The algorithms a token may use.
    public var allowedAlgorithms: Set<JWTAlgorithm>
    /// The claim checks applied after the signature.
    public var validation: ClaimValidation
    /// `crit` header parameters the caller handles; any other listed parameter is refused.
    public var understoodCriticalHeaders: Set<String>
    /// The required `typ` header (compared case-insensitively, `application/` prefix optional), or `nil`.
    public var expectedType: String?
    /// The largest token accepted, in bytes.
    public var maximumTokenSize: Int

    /// A verifier. `allowedAlgorithms` must be non-empty: there is no default on purpose.
    ///
    /// - Parameters:
    ///   - keys: the trusted verification keys (public keys, or HMAC secrets — never both in one verifier).
    ///   - allowedAlgorithms: the `alg` values a token may use; empty: every token is refused.
    ///   - validation: the claim checks after the signature; default: the time checks only (no `iss`,
    ///     and a token with an `aud` is refused).
    ///   - understoodCriticalHeaders: `crit` parameters the caller handles itself; default: none.
    ///   - expectedType: the `typ` header required (`at+jwt`, `dpop+jwt`…); `nil` (the default): not checked.
    ///   - maximumTokenSize: the largest compact token accepted, in bytes (default `JWS.defaultMaximumSize`).
    public init(
        keys: [JWTKey],
        allowedAlgorithms: Set<JWTAlgorithm>,
        validation: ClaimValidation = ClaimValidation(),
        understoodCriticalHeaders: Set<String> = [],
        expectedType: String? = nil,
        maximumTokenSize: Int = JWS.defaultMaximumSize
    ) {
        self.keys = keys
        self.allowedAlgorithms = allowedAlgorithms
        self.validation = validation
        self.understoodCriticalHeaders = understoodCriticalHeaders
        self.expectedType = expectedType
        self.maximumTokenSize = maximumTokenSize
    }

    /// Verifies a compact JWT and validates its claims.
    ///
    /// - Parameter token: the compact serialization (`header.payload.signature`).
    /// - Returns: the token with its claims, verified and validated.
    /// - Throws: `JWTError`: parsing (`tokenTooLarge`, `malformed`, `invalidBase64URL`, `invalidJSON`,
    ///   `encryptedTokenUnsupported`), the header and key rules of `verifySignature(of:)`, the claims'
    ///   shape (`invalidClaim`), then `validation`'s checks (`missingClaim`, `expired`, `notYetValid`,
    ///   `issuedInFuture`, `issuerMismatch`, `audienceMismatch`, `audienceNotChecked`).
    public func verify(_ token: String) throws(JWTError) -> JWT {
        let jws = try JWS(compact: token, maximumSize: maximumTokenSize)
        _ = try verifySignature(of: jws)
        let jwt = try JWT(jws: jws)
        try validation.validate(jwt.claims)
        return jwt
    }

    /// Checks the header rules and the signature of a JWS (any payload), returning the key that verified it.
    ///
    /// - Parameter jws: a parsed JWS; its payload is not looked at.
    /// - Returns: the configured key that verified the signature.
    /// - Throws: `JWTError` with `algorithmNone`, `algorithmNotAllowed`, `untrustedKeyReference` (`jku`,
    ///   `x5u`, `jwk`), `unsupportedCriticalHeader`, `typeMismatch`, `unknownKey` (no key, or none with
    ///   the `kid`), `ambiguousKey`, `keyAlgorithmMismatch`, `invalidKey` (HMAC secrets mixed with public
    ///   keys), `weakKey`, or `invalidSignature`.
    @discardableResult
    public func verifySignature(of jws: JWS) throws(JWTError) -> JWTKey {
        let header = jws.header
        let algorithm = try checkHeader(header)
        let key = try selectKey(for: header, algorithm: algorithm)
        guard !jws.signature.isEmpty else {
            throw JWTError(JWTError.invalidSignature, "token has no signature")
        }
        guard key.verify(jws.signature, over: jws.signingInput, algorithm: algorithm) else {
            throw JWTError(
                JWTError.invalidSignature, "\(algorithm) signature does not verify with key\(key.keyDescription)")
        }
        return key
    }

    func checkHeader(_ header: JOSEHeader) throws(JWTError) -> JWTAlgorithm {
        if header.algorithm.lowercased() == "none" {
            throw JWTError(
                JWTError.algorithmNone, "alg \"\(header.algorithm)\": unsigned tokens are never accepted", field: "alg")
        }
        for name in ["jku", "x5u", "jwk"] where header.fields[name] != nil {
            throw JWTError(
                JWTError.untrustedKeyReference,
                "header carries \"\(name)\": keys named or embedded by a token are never trusted", field: name)
        }
        if let critical = header.critical {
            let unknown = critical.filter { !understoodCriticalHeaders.contains($0) }
            if !unknown.isEmpty {
                throw JWTError(
                    JWTError.unsupportedCriticalHeader,
                    "header marks \(unknown.map { "\"\($0)\"" }.joined(separator: ", ")) critical, and this verifier does not understand it",
                    field: "crit")
            }
        }
        guard let algorithm = header.knownAlgorithm else {
            throw JWTError(
                JWTError.algorithmNotAllowed, "alg \"\(header.algorithm)\" is not a supported algorithm", field: "alg")
        }
        guard allowedAlgorithms.contains(algorithm) else {
            let allowed = allowedAlgorithms.map(\.rawValue).sorted().joined(separator: ", ")
            throw JWTError(
                JWTError.algorithmNotAllowed,
                "alg \(algorithm) is not in the allow-list [\(allowed)]", field: "alg")
        }
        if let expectedType {
            func normalized(_ type: String) -> String {
                let lower = type.lowercased()
                return lower.hasPrefix("application/") ? String(lower.dropFirst("application/".count)) : lower
            }
            guard let actual = header.type, normalized(actual) == normalized(expectedType) else {
                throw JWTError(
                    JWTError.typeMismatch,
                    "typ is \(header.type.map { "\"\($0)\"" } ?? "missing"), expected \"\(expectedType)\"",
                    field: "typ")
            }
        }
        return algorithm
    }

    /// The key `verifySignature(of:)` would check a JWS with this header against — every header and key-set
    /// rule applied (algorithm allowed, no `jku`/`x5u`/`jwk`, `crit`, a set that does not mix HMAC with
    /// public keys, one key per `kid`) — without verifying a signature.
    package func key(for header: JOSEHeader) throws(JWTError) -> JWTKey {
        try selectKey(for: header, algorithm: checkHeader(header))
    }

    func selectKey(for header: JOSEHeader, algorithm: JWTAlgorithm) throws(JWTError) -> JWTKey {
        guard !keys.isEmpty else { throw JWTError(JWTError.unknownKey, "no verification key is configured") }
        // A set that mixes HMAC secrets with public keys invites algorithm confusion (a public key's
        // bytes used as an HMAC secret, or a secret smuggled into a published JWKS): refuse it.
        if keys.contains(where: { $0.family == .hmac }), keys.contains(where: { $0.family != .hmac }) {
            throw JWTError(
                JWTError.invalidKey,
                "the key set mixes HMAC secrets and public keys; verify each kind with its own verifier")
        }
        let candidates: [JWTKey]
        if let kid = header.keyID {
            let withKid = keys.filter { $0.keyID == kid }
            // A single key without a kid stands for "the" key (a PEM file or a secret given by hand).
            if withKid.isEmpty, keys.count == 1, keys[0].keyID == nil {
                candidates = keys
            } else if withKid.isEmpty {
                throw JWTError(JWTError.unknownKey, "no configured key has kid \"\(kid)\"", field: "kid")
            } else {
                candidates = withKid
            }
        } else {
            candidates = keys
        }
        let fitting = candidates.filter { $0.mismatch(for: algorithm) == nil }
        guard let key = fitting.first else {
            if let reason = candidates.lazy.compactMap({ $0.mismatch(for: algorithm) }).first { throw reason }
            throw JWTError(JWTError.keyAlgorithmMismatch, "no configured key fits \(algorithm)")
        }
        if header.keyID == nil, fitting.count > 1 {
            throw JWTError(
                JWTError.ambiguousKey,
                "token has no kid and \(fitting.count) configured keys fit \(algorithm); refusing to guess",
                field: "kid")
        }
        if let weakness = key.weakness(for: algorithm) { throw weakness }
        return key
    }
}
