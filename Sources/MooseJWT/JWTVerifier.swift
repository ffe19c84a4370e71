#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// What to check in a claim set once the signature is good.
public struct ClaimValidation: Sendable {
    /// The exact `iss` required (`nil`: not checked).
    public var issuer: String?
    /// Audiences this verifier accepts; `aud` must contain at least one, compared byte for byte.
    /// `nil`: none configured — then a token that *has* an `aud` is refused (RFC 7519 §4.1.3)
    /// unless `acceptsAnyAudience` is set.
    public var audiences: Set<String>?
    /// Accept a token whatever its `aud` says when `audiences` is `nil` — an explicit choice for
    /// tools that only look (`moose inspect --any-audience`), never a default.
    public var acceptsAnyAudience: Bool
    /// Clock-skew tolerance for `exp`, `nbf` and `iat`, in seconds.
    public var leeway: TimeInterval
    /// Claims that must be present (for example `["exp", "sub"]`).
    public var requiredClaims: Set<String>
    /// Whether to check `exp`, `nbf` and `iat` at all.
    public var checksTime: Bool
    /// The clock: returns "now". Inject a fixed time in tests and for reproducible output.
    public var clock: @Sendable () -> Date

    /// Validation settings; everything optional is off by default except the time checks.
    public init(
        issuer: String? = nil,
        audiences: Set<String>? = nil,
        leeway: TimeInterval = 0,
        acceptsAnyAudience: Bool = false,
        requiredClaims: Set<String> = [],
        checksTime: Bool = true,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.issuer = issuer
        self.audiences = audiences
        self.acceptsAnyAudience = acceptsAnyAudience
        self.leeway = leeway
        self.requiredClaims = requiredClaims
        self.checksTime = checksTime
        self.clock = clock
    }

    /// Checks `claims`, throwing the first failure. Order: required claims, `exp`, `nbf`, `iat`, `iss`, `aud`.
    public func validate(_ claims: JWTClaims) throws(JWTError) {
        if let first = failures(claims).first { throw first }
    }

    /// Every failed check, in the order `validate` applies them (for tools that report them all).
    public func failures(_ claims: JWTClaims) -> [JWTError] {
        var failures: [JWTError] = []
        for name in requiredClaims.sorted() where claims[name] == nil {
            failures.append(JWTError(JWTError.missingClaim, "required claim \"\(name)\" is missing", field: name))
        }
        if checksTime {
            let now = clock()
            if let exp = claims.expiresAt, now.timeIntervalSince1970 >= exp.timeIntervalSince1970 + leeway {
                failures.append(JWTError(JWTError.expired,
                                         "token expired \(Duration.describe(now.timeIntervalSince(exp))) ago (exp \(ISO8601.string(from: exp)), leeway \(Duration.describe(leeway)))",
                                         field: "exp"))
            }
            if let nbf = claims.notBefore, now.timeIntervalSince1970 + leeway < nbf.timeIntervalSince1970 {
                failures.append(JWTError(JWTError.notYetValid,
                                         "token is not valid for another \(Duration.describe(nbf.timeIntervalSince(now))) (nbf \(ISO8601.string(from: nbf)))",
                                         field: "nbf"))
            }
            if let iat = claims.issuedAt, now.timeIntervalSince1970 + leeway < iat.timeIntervalSince1970 {
                failures.append(JWTError(JWTError.issuedInFuture,
                                         "token was issued \(Duration.describe(iat.timeIntervalSince(now))) in the future (iat \(ISO8601.string(from: iat)))",
                                         field: "iat"))
            }
        }
        if let issuer {
            if let actual = claims.issuer {
                // Exact, code point for code point (RFC 7519 §2 StringOrURI): String == would equate
                // canonically equivalent spellings (NFC and NFD).
                if !actual.utf8.elementsEqual(issuer.utf8) {
                    failures.append(JWTError(JWTError.issuerMismatch, "issuer is \"\(actual)\", expected \"\(issuer)\"", field: "iss"))
                }
            } else {
                failures.append(JWTError(JWTError.missingClaim, "claim \"iss\" is missing; expected \"\(issuer)\"", field: "iss"))
            }
        }
        if let audiences {
            if let actual = claims.audience {
                if !actual.contains(where: { value in audiences.contains { $0.utf8.elementsEqual(value.utf8) } }) {
                    failures.append(JWTError(JWTError.audienceMismatch,
                                             "audience \(actual) does not include \(audiences.sorted().joined(separator: " or "))",
                                             field: "aud"))
                }
            } else {
                failures.append(JWTError(JWTError.missingClaim, "claim \"aud\" is missing", field: "aud"))
            }
        } else if let actual = claims.audience, !acceptsAnyAudience {
            failures.append(JWTError(JWTError.audienceNotChecked,
                                     "token is meant for audience \(actual) and no audience was configured to check it against "
                                     + "(RFC 7519 §4.1.3); configure this verifier's audience, or accept any audience explicitly",
                                     field: "aud"))
        }
        return failures
    }
}

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
    public func verify(_ token: String) throws(JWTError) -> JWT {
        let jws = try JWS(compact: token, maximumSize: maximumTokenSize)
        _ = try verifySignature(of: jws)
        let jwt = try JWT(jws: jws)
        try validation.validate(jwt.claims)
        return jwt
    }

    /// Checks the header rules and the signature of a JWS (any payload), returning the key that verified it.
    @discardableResult
    public func verifySignature(of jws: JWS) throws(JWTError) -> JWTKey {
        let header = jws.header
        let algorithm = try checkHeader(header)
        let key = try selectKey(for: header, algorithm: algorithm)
        guard !jws.signature.isEmpty else {
            throw JWTError(JWTError.invalidSignature, "token has no signature")
        }
        guard key.verify(jws.signature, over: jws.signingInput, algorithm: algorithm) else {
            throw JWTError(JWTError.invalidSignature, "\(algorithm) signature does not verify with key\(key.keyDescription)")
        }
        return key
    }

    func checkHeader(_ header: JOSEHeader) throws(JWTError) -> JWTAlgorithm {
        if header.algorithm.lowercased() == "none" {
            throw JWTError(JWTError.algorithmNone, "alg \"\(header.algorithm)\": unsigned tokens are never accepted", field: "alg")
        }
        for name in ["jku", "x5u", "jwk"] where header.fields[name] != nil {
            throw JWTError(JWTError.untrustedKeyReference,
                           "header carries \"\(name)\": keys named or embedded by a token are never trusted", field: name)
        }
        if let critical = header.critical {
            let unknown = critical.filter { !understoodCriticalHeaders.contains($0) }
            if !unknown.isEmpty {
                throw JWTError(JWTError.unsupportedCriticalHeader,
                               "header marks \(unknown.map { "\"\($0)\"" }.joined(separator: ", ")) critical, and this verifier does not understand it",
                               field: "crit")
            }
        }
        guard let algorithm = header.knownAlgorithm else {
            throw JWTError(JWTError.algorithmNotAllowed, "alg \"\(header.algorithm)\" is not a supported algorithm", field: "alg")
        }
        guard allowedAlgorithms.contains(algorithm) else {
            let allowed = allowedAlgorithms.map(\.rawValue).sorted().joined(separator: ", ")
            throw JWTError(JWTError.algorithmNotAllowed,
                           "alg \(algorithm) is not in the allow-list [\(allowed)]", field: "alg")
        }
        if let expectedType {
            func normalized(_ type: String) -> String {
                let lower = type.lowercased()
                return lower.hasPrefix("application/") ? String(lower.dropFirst("application/".count)) : lower
            }
            guard let actual = header.type, normalized(actual) == normalized(expectedType) else {
                throw JWTError(JWTError.typeMismatch, "typ is \(header.type.map { "\"\($0)\"" } ?? "missing"), expected \"\(expectedType)\"",
                               field: "typ")
            }
        }
        return algorithm
    }

    func selectKey(for header: JOSEHeader, algorithm: JWTAlgorithm) throws(JWTError) -> JWTKey {
        guard !keys.isEmpty else { throw JWTError(JWTError.unknownKey, "no verification key is configured") }
        // A set that mixes HMAC secrets with public keys invites algorithm confusion (a public key's
        // bytes used as an HMAC secret, or a secret smuggled into a published JWKS): refuse it.
        if keys.contains(where: { $0.family == .hmac }), keys.contains(where: { $0.family != .hmac }) {
            throw JWTError(JWTError.invalidKey,
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
            throw JWTError(JWTError.ambiguousKey,
                           "token has no kid and \(fitting.count) configured keys fit \(algorithm); refusing to guess", field: "kid")
        }
        if let weakness = key.weakness(for: algorithm) { throw weakness }
        return key
    }
}

/// Signs JWTs.
///
/// ```swift
/// let signer = try JWTSigner(key: JWTKey(privateKey: .generate(.ec(.p256)), keyID: "k1"), algorithm: .es256)
/// let token = try signer.sign(["sub": "alice", "exp": .number(JSONNumber(Int64(Date().timeIntervalSince1970) + 300))])
/// ```
public struct JWTSigner: Sendable {
    /// The signing key.
    public let key: JWTKey
    /// The algorithm written into `alg`.
    public let algorithm: JWTAlgorithm

    /// A signer; fails if the key cannot sign with `algorithm`.
    public init(key: JWTKey, algorithm: JWTAlgorithm) throws(JWTError) {
        if let mismatch = key.mismatch(for: algorithm, signing: true) { throw mismatch }
        if let weakness = key.weakness(for: algorithm) { throw weakness }
        if case .publicKey = key.material { throw JWTError(JWTError.invalidKey, "a public key cannot sign") }
        self.key = key
        self.algorithm = algorithm
    }

    /// Signs a claim set. The header gets `alg`, `typ: JWT` and the key's `kid`, then `extraHeader`.
    public func sign(_ claims: JSONObject, extraHeader: JSONObject = [:]) throws(JWTError) -> String {
        try sign(payload: Array(JSONValue.object(claims).serialized().utf8), extraHeader: extraHeader)
    }

    /// Signs an `Encodable` claim set.
    public func sign(_ claims: some Encodable, extraHeader: JSONObject = [:], encoder: JSONEncoder = JSONEncoder()) throws -> String {
        try sign(payload: Array(encoder.encode(claims)), extraHeader: extraHeader)
    }

    /// Signs arbitrary payload bytes (a JWS).
    public func sign(payload: [UInt8], extraHeader: JSONObject = [:]) throws(JWTError) -> String {
        var header: JSONObject = ["alg": .string(algorithm.rawValue), "typ": .string("JWT")]
        if let kid = key.keyID { header["kid"] = .string(kid) }
        for member in extraHeader { header[member.key] = member.value }
        let input = Base64URL.encode(Array(JSONValue.object(header).serialized().utf8)) + "." + Base64URL.encode(payload)
        let signature = try key.sign(Array(input.utf8), algorithm: algorithm)
        return input + "." + Base64URL.encode(signature)
    }
}

/// Human-readable durations: `3m 12s`, `2h 5m`, `4d 3h`.
public enum Duration {
    /// `seconds` as the two largest units (`1h 2m`), or `0s`. Total: beyond a million years (or not
    /// finite) it says so instead of trapping.
    public static func describe(_ seconds: TimeInterval) -> String {
        guard seconds.isFinite else { return "forever" }
        guard abs(seconds) < 3.2e13 else { return "over a million years" }
        var remaining = Int64(abs(seconds).rounded(.down))
        if remaining == 0 { return "0s" }
        let units: [(String, Int64)] = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)]
        var parts: [String] = []
        for (name, size) in units where remaining >= size {
            parts.append("\(remaining / size)\(name)")
            remaining %= size
            if parts.count == 2 { break }
        }
        return parts.joined(separator: " ")
    }
}
