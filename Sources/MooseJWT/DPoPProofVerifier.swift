#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization

extension JWTError {
    /// A DPoP proof failed one of RFC 9449 §4.3's checks (`field` names the header parameter or claim).
    public static let invalidDPoPProof = Code(name: "invalidDPoPProof", isInputError: false)
}

/// A DPoP proof whose signature and claims checked out (RFC 9449 §4.3), minus the two checks that need
/// state — `jti` seen before and the server's `nonce` — which the caller makes with `jti`, `issuedAt`
/// and `nonce`.
public struct DPoPProof: Sendable {
    /// The public key the proof carried (and was signed with), private members absent.
    public let jwk: JWK
    /// The key's RFC 7638 SHA-256 thumbprint: what a bound token's `cnf.jkt` must equal.
    public let thumbprint: String
    /// The algorithm of the signature.
    public let algorithm: JWTAlgorithm
    /// `jti`: the proof's identifier, unique per key (check it with a replay cache).
    public let jti: String
    /// `iat`, already checked against the verifier's window.
    public let issuedAt: Date
    /// `nonce`, when the proof has one (compare it with the server's nonces).
    public let nonce: String?
    /// All claims, for extensions.
    public let claims: JWTClaims
}

/// Checks DPoP proofs (RFC 9449 §4.3): one compact JWS in a `DPoP` header, signed by the key in its own
/// `jwk` header, for exactly this method and URI, recently, and — at a resource server — for exactly
/// this access token (`ath`).
///
/// ```swift
/// let verifier = DPoPProofVerifier(maximumAge: 60)
/// let proof = try verifier.verify(dpopHeader, method: "GET", url: "https://api.example.com/me",
///                                 accessToken: token)
/// // then: proof.thumbprint == the token's cnf.jkt, and proof.jti never seen before
/// ```
///
/// Refused: `alg` none, symmetric or outside `allowedAlgorithms`; `typ` other than `dpop+jwt`; a `jwk`
/// missing, symmetric, with private members or not fitting `alg`; `crit`; `jku`/`x5u`/`kid`-only keys;
/// `htm` other than `method` (case-sensitive); `htu` other than `url` after `DPoP.targetURI`; an `iat`
/// older than `maximumAge` or further ahead than `futureLeeway`; a missing or different `ath`.
public struct DPoPProofVerifier: Sendable {
    /// Asymmetric algorithms a proof may use (HMAC ones are ignored even if listed: a proof's key is public).
    public var allowedAlgorithms: Set<JWTAlgorithm>
    /// How old a proof's `iat` may be, in seconds.
    public var maximumAge: TimeInterval
    /// How far in the future a proof's `iat` may be (clock skew), in seconds.
    public var futureLeeway: TimeInterval
    /// The largest proof accepted, in bytes.
    public var maximumProofSize: Int
    /// The longest `jti` accepted, in bytes.
    public var maximumJTILength: Int
    /// The clock: returns "now".
    public var clock: @Sendable () -> Date
    /// Proof keys already imported (shared by copies of this verifier).
    private let recentKeys = ProofKeyCache()

    /// The asymmetric algorithms MooseJWT verifies; the default allow-list.
    public static let asymmetricAlgorithms: Set<JWTAlgorithm> = [
        .rs256, .rs384, .rs512, .ps256, .ps384, .ps512,
        .es256, .es384, .es512, .eddsa, .ed25519
    ]

    /// A verifier; the defaults follow RFC 9449 §11.1's advice of a short window.
    public init(
        allowedAlgorithms: Set<JWTAlgorithm> = DPoPProofVerifier.asymmetricAlgorithms, maximumAge: TimeInterval = 60,
        futureLeeway: TimeInterval = 5, maximumProofSize: Int = 8 * 1024, maximumJTILength: Int = 256,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.allowedAlgorithms = allowedAlgorithms
        self.maximumAge = maximumAge
        self.futureLeeway = futureLeeway
        self.maximumProofSize = maximumProofSize
        self.maximumJTILength = maximumJTILength
        self.clock = clock
    }

    /// Verifies `proof` for a request `method url`; with `accessToken`, also its `ath` (resource
    /// servers pass the token; a token endpoint passes `nil`).
    public func verify(_ proof: String, method: String, url: String, accessToken: String? = nil) throws(JWTError)
        -> DPoPProof
    {
        let jws = try JWS(compact: proof, maximumSize: maximumProofSize)
        let header = jws.header
        // RFC 9449 §4.3 checks 4–7: typ, alg, key.
        guard let type = header.type, Self.isProofType(type) else {
            throw Self.refusal(
                "typ is \(header.type.map { "\"\($0)\"" } ?? "missing"), expected \"dpop+jwt\"", field: "typ")
        }
        guard let algorithm = header.knownAlgorithm, algorithm.keyFamily != .hmac, allowedAlgorithms.contains(algorithm)
        else {
            throw Self.refusal("alg \"\(header.algorithm)\" is not an allowed asymmetric algorithm", field: "alg")
        }
        if header.critical != nil { throw Self.refusal("crit is not understood in a DPoP proof", field: "crit") }
        for name in ["jku", "x5u", "x5c"] where header.fields[name] != nil {
            throw Self.refusal("header carries \"\(name)\"; a proof's key is its jwk", field: name)
        }
        let (jwk, key) = try proofKey(header.fields["jwk"])
        if let mismatch = key.mismatch(for: algorithm) { throw Self.refusal(mismatch.message, field: "jwk") }
        if let weakness = key.weakness(for: algorithm) { throw Self.refusal(weakness.message, field: "jwk") }
        guard !jws.signature.isEmpty, key.verify(jws.signature, over: jws.signingInput, algorithm: algorithm) else {
            throw Self.refusal("\(algorithm) signature does not verify with the proof's jwk", field: "signature")
        }
        // Claims, only now (check 4: required claims present; 8–11).
        let value = try JSONValue(parsing: jws.payload)
        guard case .object(let fields) = value else {
            throw Self.refusal("claims are not a JSON object", field: "payload")
        }
        let claims: JWTClaims
        do { claims = try JWTClaims(fields) } catch { throw Self.refusal(error.message, field: error.field) }
        guard let jti = claims.jwtID, !jti.isEmpty, jti.utf8.count <= maximumJTILength else {
            throw Self.refusal("jti is missing, empty or longer than \(maximumJTILength) bytes", field: "jti")
        }
        guard let htm = claims["htm"]?.stringValue, htm.utf8.elementsEqual(method.utf8) else {
            throw Self.refusal("htm is missing or is not the request's method", field: "htm")
        }
        guard let htu = claims["htu"]?.stringValue else { throw Self.refusal("htu is missing", field: "htu") }
        let proofTarget: String
        let requestTarget: String
        do {
            // RFC 9449 §4.3 check 9: compared "ignoring any query and fragment parts", of either side.
            proofTarget = try DPoP.targetURI(htu)
            requestTarget = try DPoP.targetURI(url)
        } catch {
            throw Self.refusal("htu: \(error.message)", field: "htu")
        }
        guard proofTarget.utf8.elementsEqual(requestTarget.utf8) else {
            throw Self.refusal("htu is not the request's URI", field: "htu")
        }
        let issuedAt = try checkedIssuedAt(claims)
        var nonce: String? = nil
        if let value = claims["nonce"] {
            guard let text = value.stringValue else { throw Self.refusal("nonce is not a string", field: "nonce") }
            nonce = text
        }
        if let accessToken {
            guard let ath = claims["ath"]?.stringValue, ath.utf8.elementsEqual(DPoP.accessTokenHash(accessToken).utf8)
            else {
                throw Self.refusal("ath is missing or is not the hash of the presented access token", field: "ath")
            }
        }
        let thumbprint: String
        do { thumbprint = try jwk.thumbprint() } catch { throw Self.refusal(error.message, field: "jwk") }
        return DPoPProof(
            jwk: jwk, thumbprint: thumbprint, algorithm: algorithm, jti: jti, issuedAt: issuedAt, nonce: nonce,
            claims: claims)
    }

    /// The proof's public key from its header's `jwk` `value` (an object with no private or symmetric
    /// member), imported once per distinct jwk (`recentKeys`).
    private func proofKey(_ value: JSONValue?) throws(JWTError) -> (JWK, JWTKey) {
        guard case .object(let members)? = value else {
            throw Self.refusal("header has no jwk object", field: "jwk")
        }
        for name in ["d", "p", "q", "dp", "dq", "qi", "oth", "k"] where members[name] != nil {
            throw Self.refusal("jwk carries the private member \"\(name)\"", field: "jwk")
        }
        // A client sends the same key with every proof, and importing it costs as much as checking a
        // signature: keys already imported are taken from `recentKeys`, by their jwk's exact JSON.
        let cacheKey = JSONValue.object(members).serialized()
        let jwk: JWK
        let key: JWTKey
        if let known = recentKeys.key(for: cacheKey) {
            (jwk, key) = known
        } else {
            do throws(JWTError) {
                jwk = try JWK(members)
                guard jwk.keyType != "oct" else { throw Self.refusal("jwk is a symmetric key", field: "jwk") }
                key = try jwk.verificationKey()
            } catch {
                throw Self.refusal("jwk is not a usable public key: \(error.message)", field: "jwk")
            }
            recentKeys.remember(jwk, key, for: cacheKey)
        }
        return (jwk, key)
    }

    /// The proof's `iat`, neither more than `futureLeeway` ahead of the clock nor older than `maximumAge`.
    private func checkedIssuedAt(_ claims: JWTClaims) throws(JWTError) -> Date {
        guard let issuedAt = claims.issuedAt else { throw Self.refusal("iat is missing", field: "iat") }
        let now = clock().timeIntervalSince1970
        guard issuedAt.timeIntervalSince1970 <= now + futureLeeway else {
            throw Self.refusal(
                "iat is \(Int64(saturating: issuedAt.timeIntervalSince1970 - now)) s in the future", field: "iat")
        }
        guard issuedAt.timeIntervalSince1970 >= now - maximumAge else {
            throw Self.refusal(
                "iat is \(Int64(saturating: now - issuedAt.timeIntervalSince1970)) s old; the limit is \(Int64(saturating: maximumAge)) s",
                field: "iat")
        }
        return issuedAt
    }

    /// `dpop+jwt`, case-insensitively, with or without `application/` (RFC 7515 §4.1.9).
    static func isProofType(_ type: String) -> Bool {
        let lower = type.lowercased()
        let bare = lower.hasPrefix("application/") ? String(lower.dropFirst("application/".count)) : lower
        return bare.utf8.elementsEqual(DPoP.proofType.utf8)
    }

    static func refusal(_ message: String, field: String?) -> JWTError {
        JWTError(JWTError.invalidDPoPProof, message, field: field)
    }
}

/// Public keys of recent DPoP proofs, by their `jwk`'s exact JSON text (a key and its members, `alg`
/// included, byte for byte): at most `capacity` of them, forgotten all at once when full. A cached key
/// goes through every check a fresh one does except its import (`alg` fit, strength, the signature).
final class ProofKeyCache: Sendable {
    static let capacity = 1_024
    private let entries = Mutex<[String: (JWK, JWTKey)]>([:])

    func key(for text: String) -> (JWK, JWTKey)? { entries.withLock { $0[text] } }

    func remember(_ jwk: JWK, _ key: JWTKey, for text: String) {
        guard text.utf8.count <= 4_096 else { return }
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[text] = (jwk, key)
        }
    }
}
