#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
public import MooseJWT
import MooseCrypto
public import Logging

/// Validates ID tokens (OpenID Connect Core 1.0 §3.1.3.7, errata set 2).
///
/// Every identity comparison (`iss`, `aud`, `azp`, `nonce`) is exact, byte for byte.
///
/// ```swift
/// let validator = IDTokenValidator(issuer: metadata.issuer, clientID: "my-app",
///                                  jwks: JWKSCache(url: jwksURI, transport: transport))
/// let claims = try await validator.validate(idToken, nonce: request.nonce, accessToken: tokens.accessToken)
/// ```
public struct IDTokenValidator: Sendable {
    /// The expected issuer (exact).
    public let issuer: String
    /// This client's id: must be in `aud`.
    public let clientID: String
    /// Where the provider's keys come from.
    public let jwks: JWKSCache
    /// Algorithms accepted (default RS256, the OIDC default; never `none`; HMAC only with `clientSecret`).
    public var algorithms: Set<JWTAlgorithm>
    /// Audiences besides `clientID` the client trusts (rule 3, errata set 2: an ID token with any
    /// other audience is refused). Default: none.
    public var trustedAudiences: Set<String>
    /// The client secret, for confidential clients that opt in to HS256/384/512 ID tokens signed
    /// with it (OIDC Core §10.1). `nil` (the default): HMAC-signed ID tokens are refused.
    public var clientSecret: String?
    /// Clock-skew tolerance, seconds.
    public var leeway: TimeInterval
    /// The clock.
    public var clock: @Sendable () -> Date

    /// A validator. HMAC algorithms in `algorithms` are kept only when `clientSecret` is given.
    ///
    /// - Parameters:
    ///   - issuer: the expected `iss`, compared byte for byte.
    ///   - clientID: this client's id, which `aud` must contain (and `azp` name, when present).
    ///   - jwks: the provider's signing keys (for the asymmetric algorithms).
    ///   - algorithms: the accepted `alg` values; default RS256 only.
    ///   - trustedAudiences: audiences besides `clientID` an ID token may also name; default: none.
    ///   - clientSecret: the client secret, the key of HS256/384/512 ID tokens (OIDC Core §10.1); `nil`
    ///     (the default): HMAC-signed ID tokens are refused.
    ///   - leeway: seconds of clock skew tolerated for `exp`, `iat` and `nbf` (default 60).
    ///   - clock: the current time; default: the system's.
    public init(
        issuer: String, clientID: String, jwks: JWKSCache, algorithms: Set<JWTAlgorithm> = [.rs256],
        trustedAudiences: Set<String> = [], clientSecret: String? = nil,
        leeway: TimeInterval = 60, clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.issuer = issuer
        self.clientID = clientID
        self.jwks = jwks
        self.algorithms = clientSecret == nil ? algorithms.subtracting([.hs256, .hs384, .hs512]) : algorithms
        self.trustedAudiences = trustedAudiences
        self.clientSecret = clientSecret
        self.leeway = leeway
        self.clock = clock
    }

    /// Validates `token`; `nonce` is the value sent in the authorization request (nil for a refresh,
    /// where OIDC Core §12.2 lets the nonce be absent but, if present, it must equal the original).
    ///
    /// - Parameters:
    ///   - token: the compact ID token.
    ///   - nonce: the `nonce` sent with the authorization request, compared in constant time; `nil`:
    ///     not checked.
    /// - Returns: the validated claims.
    /// - Throws: `OAuthError.invalidIDToken` whose `underlying` is the specific `JWTError`
    ///   (`issuerMismatch`, `audienceMismatch`, `expired`, `invalidSignature`, `unknownKey`…) or, for the
    ///   nonce, `azp`, extra-audience and `at_hash` rules, a message naming the rule. Fetching the JWKS
    ///   can fail on its own: `OAuthError` with `transient`, `tls`, `discovery`, or `invalidResponse`
    ///   for a JWKS document that does not parse (see `JWKSCache.keys(for:)`).
    @discardableResult
    public func validate(_ token: String, nonce: String?) async throws -> JWTClaims {
        try await validate(token, nonce: nonce, accessToken: nil, serverClockOffset: nil)
    }

    /// Validates with the provider's clock when ours is off by more than the leeway (the offset
    /// comes from the token response's `Date` header; logged when used), and checks `at_hash`
    /// against `accessToken` when the token carries one (OIDC Core 3.1.3.8, 3.2.2.9).
    ///
    /// - Parameters:
    ///   - token: the compact ID token.
    ///   - nonce: the `nonce` sent with the authorization request; `nil` (a refresh): not checked.
    ///   - accessToken: the access token that came with it, for `at_hash`; `nil` (the default): not checked.
    ///   - serverClockOffset: the provider's clock minus ours, in seconds (`TokenSet.serverClockOffset`);
    ///     used only when larger than `leeway`; `nil`: our clock.
    ///   - logger: where the use of the provider's clock is logged (warning); `nil` (the default): nowhere.
    /// - Returns: the validated claims.
    /// - Throws: as `validate(_:nonce:)`.
    @discardableResult
    public func validate(
        _ token: String, nonce: String?, accessToken: String? = nil,
        serverClockOffset: TimeInterval?, logger: Logger? = nil
    ) async throws -> JWTClaims {
        var clock = self.clock
        if let offset = serverClockOffset, offset.isFinite, abs(offset) > leeway {
            let base = self.clock
            clock = { base().addingTimeInterval(offset) }
            logger?.warning(
                "local clock differs from \(issuer)'s by \(Int64(saturating: offset)) s; judging the ID token by the provider's clock"
            )
        }
        let header: JOSEHeader
        do { header = try JWS(compact: token).header } catch {
            throw invalid("ID token is malformed: \(error.message)", error)
        }
        let algorithm = header.knownAlgorithm
        let claims = try await verified(token, header: header, clock: clock)
        let audience = claims.audience ?? []
        func same(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }
        // Rule 3 (errata set 2): no audience the client does not trust.
        if let untrusted = audience.first(where: { value in
            !same(value, clientID) && !trustedAudiences.contains { same($0, value) }
        }) {
            throw invalid(
                "ID token is also meant for \(untrusted), an audience this client does not trust (OIDC Core 3.1.3.7 rule 3)",
                nil)
        }
        // Rules 4–5: with several audiences, azp should be present; when present it must be this client.
        let azp = claims["azp"]?.stringValue
        if audience.count > 1, azp.map({ same($0, clientID) }) != true {
            throw invalid("ID token has several audiences and azp is not this client (OIDC Core 3.1.3.7 rule 5)", nil)
        }
        if let azp, !same(azp, clientID) {
            throw invalid("ID token azp is \(azp), not this client", nil)
        }
        // Rule 11: the nonce must match the request's.
        let tokenNonce = claims["nonce"]?.stringValue
        if let nonce {
            guard let tokenNonce, ConstantTime.equals(Array(tokenNonce.utf8), Array(nonce.utf8)) else {
                throw invalid("ID token nonce does not match the request's (OIDC Core 3.1.3.7 rule 11)", nil)
            }
        }
        // at_hash (3.1.3.8): the left half of the hash of the access token's ASCII octets, with the
        // hash of the ID token's algorithm (SHA-512 for EdDSA/Ed25519).
        if let accessToken, let atHash = claims["at_hash"]?.stringValue, let algorithm {
            let digest = (algorithm.hash ?? .sha512).hash(Array(accessToken.utf8))
            let expected = Base64URL.encode(Array(digest.prefix(digest.count / 2)))
            guard ConstantTime.equals(Array(expected.utf8), Array(atHash.utf8)) else {
                throw invalid(
                    "ID token at_hash does not match the access token that came with it (OIDC Core 3.1.3.8)", nil)
            }
        }
        return claims
    }

    /// The claims of `token` once its signature and rules 2–3, 6–7, 9 and 10 (`iss`, `aud`, `alg`, signature,
    /// `exp`, `iat`) pass. A signature that fails with the provider's cached keys (a `kid` they lack, key
    /// material replaced under the same `kid`) is tried once more with the keys
    /// `JWKSCache.keysAfterFailedVerification(for:)` gives.
    private func verified(_ token: String, header: JOSEHeader, clock: @escaping @Sendable () -> Date) async throws
        -> JWTClaims
    {
        let validation = ClaimValidation(
            issuer: issuer, audiences: [clientID], leeway: leeway, requiredClaims: ["iss", "sub", "aud", "exp", "iat"],
            clock: clock)
        if let algorithm = header.knownAlgorithm, algorithm.keyFamily == .hmac {
            // OIDC Core §10.1: the key is the client secret's UTF-8 octets — only when opted in.
            guard let clientSecret, algorithms.contains(algorithm) else {
                throw invalid(
                    "ID token is signed with \(algorithm) and this client did not opt in to HMAC ID tokens", nil)
            }
            let key = JWTKey(secret: Array(clientSecret.utf8), algorithm: algorithm)
            let verifier = JWTVerifier(keys: [key], allowedAlgorithms: algorithms, validation: validation)
            do { return try verifier.verify(token).claims } catch {
                throw invalid("ID token rejected: \(error.message)", error)
            }
        }
        let cached = try await jwks.keys(for: header.keyID)
        do {
            return try JWTVerifier(keys: cached, allowedAlgorithms: algorithms, validation: validation).verify(token)
                .claims
        } catch {
            guard JWKSCache.refetchMayHelp(error) else { throw invalid("ID token rejected: \(error.message)", error) }
        }
        // The provider may have changed its keys since they were cached: once more with a fetched set.
        let fresh = try await jwks.keysAfterFailedVerification(for: header.keyID)
        do {
            return try JWTVerifier(keys: fresh, allowedAlgorithms: algorithms, validation: validation).verify(token)
                .claims
        } catch { throw invalid("ID token rejected: \(error.message)", error) }
    }

    private func invalid(_ message: String, _ error: JWTError?) -> OAuthError {
        OAuthError(OAuthError.invalidIDToken, message, underlying: error)
    }
}
