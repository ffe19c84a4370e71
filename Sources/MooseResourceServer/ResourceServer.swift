#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseJWT
import MooseOAuth

/// What a resource server accepts (RFC 9068 access tokens, RFC 6750 Bearer, RFC 9449 DPoP).
///
/// ```swift
/// var configuration = ResourceServerConfiguration(issuer: "https://id.example.com",
///                                                 resource: "https://api.example.com", algorithms: [.rs256, .es256])
/// configuration.dpop = .required
/// configuration.resourceMetadataURL = "https://api.example.com/.well-known/oauth-protected-resource"
/// ```
public struct ResourceServerConfiguration: Sendable {
    /// Whether tokens may or must be DPoP-bound.
    public enum DPoPMode: Sendable, Hashable {
        /// Only Bearer; an `Authorization: DPoP` request is refused (and so is a bound token as Bearer).
        case disabled
        /// Bearer for unbound tokens, DPoP for bound ones (RFC 9449 §7.2: a bound token never as Bearer).
        case allowed
        /// Only DPoP-bound tokens with proofs.
        case required
    }

    /// The exact `iss` accepted (byte for byte).
    public var issuer: String
    /// This resource's identifier (RFC 8707; RFC 9068 §4): `aud` must contain it, byte for byte.
    public var resource: String
    /// The algorithms access tokens may be signed with: no default, on purpose (RFC 8725 §3.1).
    public var algorithms: Set<JWTAlgorithm>
    /// Accepted `typ` headers (case-insensitive, `application/` optional). RFC 9068 §4 requires
    /// `at+jwt`; add `JWT` only for a provider that sends that.
    public var acceptedTokenTypes: [String]
    /// Clock skew allowed on the token's `exp`, `nbf` and `iat`, in seconds.
    public var leeway: TimeInterval
    /// Claims a token must have. RFC 9068 §2.2: `iss exp aud sub client_id iat jti`.
    public var requiredClaims: Set<String>
    /// Bearer, DPoP or both.
    public var dpop: DPoPMode
    /// How DPoP proofs are checked (algorithms, `iat` window, sizes).
    public var proofs: DPoPProofVerifier
    /// `resource_metadata` (RFC 9728 §5.1) for every challenge, when set.
    public var resourceMetadataURL: String?
    /// `realm` for every challenge, when set.
    public var realm: String?
    /// The longest `Authorization` value accepted, in bytes (longer: `invalid_request`).
    public var maximumAuthorizationLength: Int
    /// The clock: returns "now".
    public var clock: @Sendable () -> Date
    /// Whether an introspection answer without `aud` is refused. RFC 7662 makes `aud` optional, so by
    /// default an answer without one is not audience-checked; a server that must only accept tokens issued
    /// for it (the MCP authorization specification's rule) sets this, with an authorization server that
    /// binds tokens to resources (RFC 8707) and says so in `aud`.
    public var introspectedTokensNeedAudience = false
    /// How many verified access tokens are remembered, so that a token presented again costs a lookup
    /// instead of a signature check (default 1,024; 0 turns it off). Only the signature and the parsing are
    /// remembered, tied to the key that verified them: `exp`, `nbf`, `iss`, `aud`, the binding, the proof and
    /// the scopes are checked on every request, and once the key source stops giving that key (withdrawn, or
    /// replaced under the same `kid`) the token is verified again. Only tokens of requests that passed every
    /// check are kept; each costs its size plus its parsed claims (a few times the payload's size).
    public var verifiedTokenCacheLimit = 1024

    /// A configuration: Bearer and DPoP both allowed, `at+jwt` only, 30 s leeway, RFC 9068's claims.
    ///
    /// - Parameters:
    ///   - issuer: the exact `iss` accepted, byte for byte.
    ///   - resource: this resource's identifier, which `aud` must contain byte for byte.
    ///   - algorithms: the algorithms access tokens may be signed with; no default (RFC 8725 §3.1).
    ///   - acceptedTokenTypes: accepted `typ` headers; default `at+jwt` only.
    ///   - leeway: seconds of clock skew allowed on `exp`, `nbf` and `iat` (default 30).
    ///   - requiredClaims: claims a token must carry; default RFC 9068 §2.2's seven.
    ///   - dpop: Bearer, DPoP or both (default `.allowed`: each token by its binding).
    ///   - proofs: how DPoP proofs are checked; default: `DPoPProofVerifier()`'s rules.
    ///   - resourceMetadataURL: `resource_metadata` for every challenge (RFC 9728 §5.1); `nil`: none.
    ///   - realm: `realm` for every challenge; `nil`: none.
    ///   - maximumAuthorizationLength: the longest `Authorization` value accepted, in bytes (default 16 KiB).
    ///   - clock: the current time; default: the system's.
    public init(
        issuer: String, resource: String, algorithms: Set<JWTAlgorithm>, acceptedTokenTypes: [String] = ["at+jwt"],
        leeway: TimeInterval = 30,
        requiredClaims: Set<String> = ["iss", "exp", "aud", "sub", "client_id", "iat", "jti"],
        dpop: DPoPMode = .allowed, proofs: DPoPProofVerifier = DPoPProofVerifier(), resourceMetadataURL: String? = nil,
        realm: String? = nil, maximumAuthorizationLength: Int = 16 * 1024,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.issuer = issuer
        self.resource = resource
        self.algorithms = algorithms
        self.acceptedTokenTypes = acceptedTokenTypes
        self.leeway = leeway
        self.requiredClaims = requiredClaims
        self.dpop = dpop
        self.proofs = proofs
        self.resourceMetadataURL = resourceMetadataURL
        self.realm = realm
        self.maximumAuthorizationLength = maximumAuthorizationLength
        self.clock = clock
    }
}

extension ResourceServerConfiguration {
    /// The `alg` names of the proofs accepted (`proofs.allowedAlgorithms` without HMAC), sorted: the DPoP
    /// challenge's `algs` and the RFC 9728 document's `dpop_signing_alg_values_supported`.
    var dpopProofAlgorithmNames: [String] {
        proofs.allowedAlgorithms.filter { $0.keyFamily != .hmac }.map(\.rawValue).sorted()
    }
}

/// Verifies what clients present to a resource server, framework-neutrally: give it a request's
/// `Authorization` and `DPoP` header values, method and URL; get a `VerifiedPrincipal`, or a
/// `ResourceServerRefusal` that carries the status and challenges to answer with.
///
/// ```swift
/// let server = ResourceServer(
///     configuration: ResourceServerConfiguration(issuer: issuer, resource: "https://api.example.com", algorithms: [.rs256]),
///     keys: JWKSCache(url: jwksURI, transport: CurlTransport()))
/// do {
///     let who = try await server.verify(authorizationHeader: request.headers["Authorization"],
///                                       dpopHeader: request.headers["DPoP"], method: "GET",
///                                       url: "https://api.example.com/items?page=2", requiredScopes: ["api.read"])
///     print(who.subject, who.scopes)
/// } catch {
///     respond(status: error.status, headers: error.headers)   // WWW-Authenticate, DPoP-Nonce
/// }
/// ```
public struct ResourceServer: Sendable {
    /// The rules.
    public let configuration: ResourceServerConfiguration
    private let keys: any AccessTokenKeySource
    private let replayCache: any DPoPReplayCache
    private let nonces: (any DPoPNonceSource)?
    private let introspector: (any AccessTokenIntrospector)?
    /// Tokens verified before (`nil`: `verifiedTokenCacheLimit` is 0).
    let verifiedTokens: VerifiedTokens?

    /// A verifier taking the issuer's keys from `keys`, remembering proof `jti`s in `replayCache`
    /// and, with `nonces`, requiring server nonces in proofs (RFC 9449 §9). With `introspector`,
    /// tokens that are not JWTs (opaque ones) are checked by RFC 7662 introspection; JWTs are always
    /// verified locally.
    ///
    /// - Parameters:
    ///   - configuration: the rules.
    ///   - keys: the issuer's verification keys (a `JWKSCache`, fixed keys…).
    ///   - replayCache: remembers DPoP proofs' `jti`s; default: an in-memory one (one process only: use
    ///     a shared one, such as PostgreSQL's, behind a load balancer).
    ///   - nonces: issues and checks DPoP server nonces; `nil` (the default): proofs need no nonce.
    ///   - introspector: checks tokens that are not JWTs (RFC 7662); `nil` (the default): such tokens
    ///     are refused as `invalid_token`.
    public init(
        configuration: ResourceServerConfiguration, keys: any AccessTokenKeySource,
        replayCache: any DPoPReplayCache = InMemoryDPoPReplayCache(), nonces: (any DPoPNonceSource)? = nil,
        introspector: (any AccessTokenIntrospector)? = nil
    ) {
        self.configuration = configuration
        self.keys = keys
        self.replayCache = replayCache
        self.nonces = nonces
        self.introspector = introspector
        verifiedTokens =
            configuration.verifiedTokenCacheLimit > 0
            ? VerifiedTokens(limit: configuration.verifiedTokenCacheLimit) : nil
    }

    /// The nonce to send in `DPoP-Nonce` on successful responses too (RFC 9449 §9), when nonces are on.
    public func currentNonce() async -> String? { await nonces?.currentNonce() }

    /// Verifies one request's credentials.
    ///
    /// - Parameters:
    ///   - authorizationHeader: the `Authorization` value (`nil` when absent). Several values combined
    ///     with commas are refused as malformed.
    ///   - dpopHeader: the `DPoP` value (`nil` when absent); several combined with commas are refused.
    ///   - method: the request's method, as received (`GET`).
    ///   - url: the request's absolute URL as the client addressed it (behind a proxy: the external one).
    ///   - requiredScopes: scopes the request needs; a token lacking one gets `insufficient_scope`.
    /// - Returns: who the token speaks for: subject, client, scopes, scheme and binding.
    /// - Throws: `ResourceServerRefusal`, with the answer to send: `missingCredentials` (401, no
    ///   `Authorization`), `unsupportedScheme` (401, neither Bearer nor DPoP; no error code),
    ///   `invalidRequest` (400, malformed or too long; DPoP when it is disabled), `invalidToken` (401: bad
    ///   signature, expired, wrong `iss` or `aud`, inactive, a binding that does not fit the scheme, Bearer
    ///   when DPoP is required), `insufficientScope` (403), `invalidDPoPProof` (401: the proof is missing,
    ///   fails a check of RFC 9449 §4.3, or comes twice) or `useDPoPNonce` (401), or
    ///   `temporarilyUnavailable` (503: the issuer's keys, the introspection or the replay cache could
    ///   not be had).
    public func verify(
        authorizationHeader: String?, dpopHeader: String?, method: String, url: String,
        requiredScopes: [String] = []
    ) async throws(ResourceServerRefusal) -> VerifiedPrincipal {
        let (scheme, token) = try presented(authorizationHeader)
        let claims: JWTClaims
        var fresh: (jwt: JWT, key: JWTKey)? = nil
        let introspected = introspector != nil && !Self.isCompactJWS(token)
        if introspected {
            claims = try await introspect(token, scheme: scheme)
        } else {
            (claims, fresh) = try await verifiedClaims(token, scheme: scheme)
        }
        let binding = try confirmation(of: claims, scheme: scheme)
        if scheme == .dpop, let thumbprint = binding.thumbprint {
            try await verifyProof(dpopHeader, method: method, url: url, token: token, thumbprint: thumbprint)
        }
        let caller = try principal(
            claims, scheme: scheme, introspected: introspected, binding: binding, requiredScopes: requiredScopes)
        if let fresh { remember(token, fresh) }
        return caller
    }

    /// `verify` for a caller that cannot wait — a synchronous request validator — given what the
    /// asynchronous path would have fetched: `keys(kid)` answers from keys already at hand, and
    /// `introspection(token)` from answers already at hand (`nil`: none for this token yet, refused as
    /// `invalid_token`). Every check of `verify` is made, by the same code; Bearer only: a DPoP request is
    /// refused as `invalid_request` (its proof's `jti` needs the replay cache, which is asynchronous).
    ///
    /// ```swift
    /// let principal = try server.verifyBearer(authorizationHeader: auth, requiredScopes: ["mcp"],
    ///                                         keys: { kid in snapshot.keys(for: kid) }, introspection: { _ in nil })
    /// ```
    ///
    /// - Parameters:
    ///   - authorizationHeader: the `Authorization` value (`nil` when absent); Bearer only.
    ///   - requiredScopes: scopes the request needs; a token lacking one gets `insufficient_scope`.
    ///   - keys: the verification keys at hand for a JWT's `kid` (`nil`: the token names none); none
    ///     fitting refuses the token as `invalid_token`.
    ///   - introspection: the answer at hand for an opaque token (used only with an `introspector`).
    /// - Returns: who the token speaks for, as `verify` returns it.
    /// - Throws: `ResourceServerRefusal`, as `verify` (no `temporarilyUnavailable` for keys: they are
    ///   the caller's); `invalidRequest` for a DPoP request.
    public func verifyBearer(
        authorizationHeader: String?, requiredScopes: [String] = [], keys: (String?) -> [JWTKey],
        introspection: (String) -> IntrospectionAnswer?
    ) throws(ResourceServerRefusal) -> VerifiedPrincipal {
        let (scheme, token) = try presented(authorizationHeader)
        guard scheme == .bearer else {
            throw refusal(
                ResourceServerRefusal.invalidRequest, .dpop, "DPoP proofs are verified by the asynchronous verify only")
        }
        let claims: JWTClaims
        var fresh: (jwt: JWT, key: JWTKey)? = nil
        let introspected = introspector != nil && !Self.isCompactJWS(token)
        if introspected {
            guard let answer = introspection(token) else {
                throw refusal(ResourceServerRefusal.invalidToken, scheme, "no introspection answer for this token yet")
            }
            claims = try checkIntrospection(answer, scheme: scheme)
        } else if let hit = verifiedTokens?.entry(for: token),
            let remembered = try revalidated(hit, token: token, keys: keys(hit.header.keyID), scheme: scheme)
        {
            claims = remembered
        } else {
            let jws = try parseToken(token, scheme: scheme)
            let verified = try checkToken(jws, keys: keys(jws.header.keyID), scheme: scheme)
            fresh = verified
            claims = verified.jwt.claims
        }
        let binding = try confirmation(of: claims, scheme: scheme)
        let caller = try principal(
            claims, scheme: scheme, introspected: introspected, binding: binding, requiredScopes: requiredScopes)
        if let fresh { remember(token, fresh) }
        return caller
    }

    /// The scheme and token of `Authorization`, once its presence, size, syntax and the DPoP mode are checked.
    private func presented(_ authorizationHeader: String?) throws(ResourceServerRefusal) -> (
        VerifiedPrincipal.Scheme, String
    ) {
        guard let authorizationHeader else {
            throw refusal(ResourceServerRefusal.missingCredentials, nil, "no Authorization header")
        }
        guard authorizationHeader.utf8.count <= configuration.maximumAuthorizationLength else {
            throw refusal(
                ResourceServerRefusal.invalidRequest, nil,
                "Authorization is \(authorizationHeader.utf8.count) bytes; the limit is \(configuration.maximumAuthorizationLength)"
            )
        }
        guard let scheme = Self.scheme(of: authorizationHeader) else {
            // RFC 6750 §3.1: a client that "attempted using an unsupported authentication method" gets the
            // challenges without an error code, as one that sent nothing: 401, so that it starts its login.
            throw refusal(
                ResourceServerRefusal.unsupportedScheme, nil, "the Authorization scheme is not Bearer or DPoP")
        }
        guard let (_, token) = Self.credentials(authorizationHeader) else {
            throw refusal(
                ResourceServerRefusal.invalidRequest, scheme, "Authorization is not `Bearer <token>` or `DPoP <token>`")
        }
        switch (scheme, configuration.dpop) {
        case (.bearer, .required):
            // No Bearer challenge is sent in this mode: the error goes on the DPoP one (RFC 9449 §7.1).
            throw refusal(
                ResourceServerRefusal.invalidToken, .dpop, "a Bearer token was presented; this resource requires DPoP",
                description: "This resource requires a DPoP-bound access token and a DPoP proof")
        case (.dpop, .disabled):
            throw refusal(
                ResourceServerRefusal.invalidRequest, .bearer,
                "a DPoP token was presented; this resource does not accept DPoP",
                description: "This resource accepts Bearer tokens only, not DPoP")
        default: break
        }
        return (scheme, token)
    }

    /// `cnf` and `cnf.jkt`, checked against the scheme: a bound token never as Bearer (RFC 9449 §7.2),
    /// an unbound one never as DPoP.
    private func confirmation(of claims: JWTClaims, scheme: VerifiedPrincipal.Scheme) throws(ResourceServerRefusal)
        -> (object: JSONObject?, thumbprint: String?)
    {
        var confirmation: JSONObject? = nil
        var thumbprint: String? = nil
        if let cnf = claims["cnf"] {
            guard let object = cnf.objectValue else {
                throw refusal(ResourceServerRefusal.invalidToken, scheme, "cnf is not an object")
            }
            confirmation = object
            if let jkt = object["jkt"] {
                guard let text = jkt.stringValue, !text.isEmpty else {
                    throw refusal(ResourceServerRefusal.invalidToken, scheme, "cnf.jkt is not a string")
                }
                thumbprint = text
            }
        }
        switch scheme {
        case .bearer:
            // RFC 9449 §7.2: a DPoP-bound token is never accepted as a bearer token.
            if thumbprint != nil {
                throw refusal(ResourceServerRefusal.invalidToken, .bearer, "a DPoP-bound token was presented as Bearer")
            }
        case .dpop:
            guard thumbprint != nil else {
                throw refusal(ResourceServerRefusal.invalidToken, .dpop, "the token is not DPoP-bound (no cnf.jkt)")
            }
        }
        return (confirmation, thumbprint)
    }

    /// The granted scopes: RFC 9068's `scope` (space-separated), else an `scp` array of strings (Azure
    /// AD, Okta and others send that; RFC 8693's `scp` too); none when neither is there; `nil` when the
    /// one present has the wrong shape (a `scope` that is not a string, an `scp` with a non-string). A
    /// member that is JSON `null` counts as absent.
    static func scopes(of claims: JWTClaims) -> [String]? {
        // A member that is JSON null counts as absent.
        if let scope = claims["scope"], scope != .null {
            return scope.stringValue?.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        }
        guard let scp = claims["scp"], scp != .null else { return [] }
        if let single = scp.stringValue {
            return single.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        }
        guard let items = scp.arrayValue, items.count <= 1_000 else { return nil }
        var scopes: [String] = []
        for item in items {
            guard let scope = item.stringValue, !scope.isEmpty else { return nil }
            scopes.append(scope)
        }
        return scopes
    }

    /// The principal of checked claims, once its required members and `requiredScopes` are there.
    private func principal(
        _ claims: JWTClaims, scheme: VerifiedPrincipal.Scheme, introspected: Bool,
        binding: (object: JSONObject?, thumbprint: String?),
        requiredScopes: [String]
    ) throws(ResourceServerRefusal) -> VerifiedPrincipal {
        guard let scopes = Self.scopes(of: claims) else {
            throw refusal(
                ResourceServerRefusal.invalidToken, scheme, "scope is not a string (or scp not an array of strings)")
        }
        // An introspection answer may leave out sub (client credentials: the client is the subject), iss
        // (the introspecting server's own tokens) and exp (RFC 7662 §2.2).
        let subject =
            claims.subject ?? (introspected ? claims["username"]?.stringValue ?? claims["client_id"]?.stringValue : nil)
        let issuer = claims.issuer ?? (introspected ? configuration.issuer : nil)
        guard let subject, let issuer, introspected || claims.expiresAt != nil,
            let clientID = claims["client_id"]?.stringValue
        else {
            throw refusal(
                ResourceServerRefusal.invalidToken, scheme, "sub, iss, exp or client_id is missing or not a string")
        }
        let principal = VerifiedPrincipal(
            subject: subject, clientID: clientID, issuer: issuer, audiences: claims.audience ?? [], scopes: scopes,
            authorizationDetails: claims["authorization_details"], expiresAt: claims.expiresAt,
            issuedAt: claims.issuedAt,
            tokenID: claims.jwtID, confirmationThumbprint: binding.thumbprint, confirmation: binding.object,
            scheme: scheme, claims: claims, verification: introspected ? .introspection : .signature)
        if !principal.hasScopes(requiredScopes) {
            throw refusal(
                ResourceServerRefusal.insufficientScope, scheme, "the token lacks a required scope",
                scope: requiredScopes.joined(separator: " "))
        }
        return principal
    }

    // MARK: - The access token (RFC 9068 §4)

    private func parseToken(_ token: String, scheme: VerifiedPrincipal.Scheme) throws(ResourceServerRefusal) -> JWS {
        let jws: JWS
        do { jws = try JWS(compact: token, maximumSize: configuration.maximumAuthorizationLength) } catch {
            throw refusal(ResourceServerRefusal.invalidToken, scheme, "the token is not a JWS: \(error.code)")
        }
        guard let type = jws.header.type,
            configuration.acceptedTokenTypes.contains(where: { Self.sameMediaType($0, type) })
        else {
            throw refusal(
                ResourceServerRefusal.invalidToken, scheme,
                "typ is not one of \(configuration.acceptedTokenTypes.joined(separator: ", "))")
        }
        return jws
    }

    /// A JWT access token's checked claims: a token verified before is taken from `verifiedTokens` while the
    /// key source's keys still select the key that verified it (its claims checked again); any other is
    /// parsed and verified, and comes back as `fresh`, to be remembered once the whole request passed.
    private func verifiedClaims(_ token: String, scheme: VerifiedPrincipal.Scheme) async throws(ResourceServerRefusal)
        -> (claims: JWTClaims, fresh: (jwt: JWT, key: JWTKey)?)
    {
        if let hit = verifiedTokens?.entry(for: token) {
            let current = try await sourcedKeys { try await self.keys.keys(for: hit.header.keyID) }
            if let claims = try revalidated(hit, token: token, keys: current, scheme: scheme) { return (claims, nil) }
        }
        let verified = try await checkToken(parseToken(token, scheme: scheme), scheme: scheme)
        return (verified.jwt.claims, verified)
    }

    /// A remembered token's claims, checked again against the clock and the rules, when `keys` still select
    /// the key that verified it for its header (every rule of `JWTVerifier`'s key choice applied again);
    /// `nil` (and forgotten) when they do not. A failed claim check forgets it too.
    private func revalidated(
        _ hit: VerifiedTokens.Entry, token: String, keys: [JWTKey], scheme: VerifiedPrincipal.Scheme
    ) throws(ResourceServerRefusal) -> JWTClaims? {
        let verifier = JWTVerifier(
            keys: keys, allowedAlgorithms: configuration.algorithms,
            maximumTokenSize: configuration.maximumAuthorizationLength)
        guard let key = try? verifier.key(for: hit.header), key.identity == hit.keyIdentity else {
            verifiedTokens?.remove(token)
            return nil
        }
        do { try claimValidation.validate(hit.claims) } catch {
            verifiedTokens?.remove(token)
            throw tokenRefusal(error, scheme)
        }
        verifiedTokens?.honoured()
        return hit.claims
    }

    /// Keeps a token that passed every check, with the key that verified it.
    private func remember(_ token: String, _ verified: (jwt: JWT, key: JWTKey)) {
        guard let verifiedTokens else { return }
        let entry = VerifiedTokens.Entry(
            claims: verified.jwt.claims, header: verified.jwt.header, keyIdentity: verified.key.identity,
            usefulUntil: verified.jwt.claims.expiresAt.map { $0.addingTimeInterval(configuration.leeway) })
        verifiedTokens.insert(token, entry, now: configuration.clock())
    }

    private func checkToken(
        _ jws: JWS, keys: [JWTKey], scheme: VerifiedPrincipal.Scheme, parsed: JWT? = nil
    ) throws(ResourceServerRefusal) -> (jwt: JWT, key: JWTKey) {
        do { return try verifiedToken(jws, keys: keys, parsed: parsed) } catch { throw tokenRefusal(error, scheme) }
    }

    /// `checkToken` with the keys of `self.keys`: a signature that fails with the keys it gave (a `kid` they
    /// lack, key material the issuer replaced under the same `kid`) is tried once more with the keys
    /// `keysAfterFailedVerification(for:)` gives. Keys that cannot be had: `temporarilyUnavailable`.
    private func checkToken(_ jws: JWS, scheme: VerifiedPrincipal.Scheme) async throws(ResourceServerRefusal)
        -> (jwt: JWT, key: JWTKey)
    {
        // A token whose `iss` names another issuer is refused before any key is looked up: its `kid`
        // would only be missing here (saying "unknownKey", and asking the JWKS again). The rule is the
        // one its claims get after the signature (`claimValidation`), so nothing is accepted earlier.
        // The claims are read once, here, and used after the signature (not read again).
        let parsed = try? JWT(jws: jws)
        if let issuer = parsed?.claims.issuer, !issuer.utf8.elementsEqual(configuration.issuer.utf8) {
            throw refusal(ResourceServerRefusal.invalidToken, scheme, "the token failed issuerMismatch (iss)")
        }
        let kid = jws.header.keyID
        let cached = try await sourcedKeys { try await self.keys.keys(for: kid) }
        do { return try verifiedToken(jws, keys: cached, parsed: parsed) } catch {
            guard JWKSCache.refetchMayHelp(error) else { throw tokenRefusal(error, scheme) }
        }
        let fresh = try await sourcedKeys { try await self.keys.keysAfterFailedVerification(for: kid) }
        return try checkToken(jws, keys: fresh, scheme: scheme, parsed: parsed)
    }

    /// What `body` answers; a failure is `temporarilyUnavailable` (503), not a verdict on the token.
    private func sourcedKeys(_ body: () async throws -> [JWTKey]) async throws(ResourceServerRefusal) -> [JWTKey] {
        do { return try await body() } catch {
            throw ResourceServerRefusal(
                code: ResourceServerRefusal.temporarilyUnavailable, status: 503, challenges: [],
                reason: "the issuer's keys could not be fetched")
        }
    }

    /// The claim rules of RFC 9068 §4 for this resource: `iss`, `aud`, the required claims, the times.
    private var claimValidation: ClaimValidation {
        ClaimValidation(
            issuer: configuration.issuer, audiences: [configuration.resource], leeway: configuration.leeway,
            requiredClaims: configuration.requiredClaims, clock: configuration.clock)
    }

    /// `jws` verified with `keys`, then its claims (`parsed`, when they were read already) validated.
    private func verifiedToken(_ jws: JWS, keys: [JWTKey], parsed: JWT? = nil) throws(JWTError) -> (
        jwt: JWT, key: JWTKey
    ) {
        let validation = claimValidation
        let verifier = JWTVerifier(
            keys: keys, allowedAlgorithms: configuration.algorithms, validation: validation,
            maximumTokenSize: configuration.maximumAuthorizationLength)
        let key = try verifier.verifySignature(of: jws)
        let jwt: JWT
        if let parsed { jwt = parsed } else { jwt = try JWT(jws: jws) }
        try validation.validate(jwt.claims)
        return (jwt, key)
    }

    private func tokenRefusal(_ error: JWTError, _ scheme: VerifiedPrincipal.Scheme) -> ResourceServerRefusal {
        // The code and field only: a JWTError's message may quote claims.
        refusal(
            ResourceServerRefusal.invalidToken, scheme,
            "the token failed \(error.code)\(error.field.map { " (\($0))" } ?? "")")
    }

    // MARK: - Opaque tokens (RFC 7662)

    private func introspect(_ token: String, scheme: VerifiedPrincipal.Scheme) async throws(ResourceServerRefusal)
        -> JWTClaims
    {
        guard let introspector else {
            throw refusal(ResourceServerRefusal.invalidToken, scheme, "no introspection configured")
        }
        let answer: IntrospectionAnswer
        do { answer = try await introspector.introspect(token) } catch {
            var unavailable = ResourceServerRefusal(
                code: ResourceServerRefusal.temporarilyUnavailable, status: 503, challenges: [],
                reason: "introspection failed: \((error as? IntrospectionError)?.message ?? "transport error")")
            unavailable.introspectionStatus = (error as? IntrospectionError)?.status
            throw unavailable
        }
        return try checkIntrospection(answer, scheme: scheme)
    }

    private func checkIntrospection(_ answer: IntrospectionAnswer, scheme: VerifiedPrincipal.Scheme)
        throws(ResourceServerRefusal) -> JWTClaims
    {
        guard answer.active else {
            throw refusal(ResourceServerRefusal.invalidToken, scheme, "the token is not active (introspection)")
        }
        // The same checks as for a JWT, on what the answer says: iss and aud only when present (aud always
        // with `introspectedTokensNeedAudience`).
        let claims = answer.claims
        if configuration.introspectedTokensNeedAudience, claims.audience == nil {
            throw refusal(ResourceServerRefusal.invalidToken, scheme, "the introspected token has no audience")
        }
        let validation = ClaimValidation(
            issuer: claims.issuer == nil ? nil : configuration.issuer,
            audiences: claims.audience == nil ? nil : [configuration.resource],
            leeway: configuration.leeway, clock: configuration.clock)
        do { try validation.validate(claims) } catch {
            throw refusal(
                ResourceServerRefusal.invalidToken, scheme,
                "the introspected token failed \(error.code)\(error.field.map { " (\($0))" } ?? "")")
        }
        return claims
    }

    /// `true` when `token` has the shape of a JWS compact serialization (RFC 7515 §7.1: three
    /// dot-separated parts, the first two non-empty): what `verify` checks locally, by signature and
    /// claims (RFC 9068); any other token goes to introspection (RFC 7662), when it is configured.
    public static func isCompactJWS(_ token: String) -> Bool {
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return parts.count == 3 && parts.prefix(2).allSatisfy { !$0.isEmpty }
    }

    // MARK: - The proof (RFC 9449 §4.3, §7.1)

    private func verifyProof(
        _ header: String?, method: String, url: String, token: String,
        thumbprint: String
    ) async throws(ResourceServerRefusal) {
        guard let header, !header.isEmpty else {
            throw refusal(ResourceServerRefusal.invalidDPoPProof, .dpop, "no DPoP proof")
        }
        // RFC 9449 §4.3 check 1: one DPoP field only. Several arrive joined with commas, which no JWS has.
        guard !header.utf8.contains(UInt8(ascii: ",")) else {
            throw refusal(
                ResourceServerRefusal.invalidDPoPProof, .dpop, "several DPoP header fields (RFC 9449 §4.3: one only)",
                description: "The request carries more than one DPoP proof")
        }
        let proof: DPoPProof
        do { proof = try configuration.proofs.verify(header, method: method, url: url, accessToken: token) } catch {
            throw refusal(
                ResourceServerRefusal.invalidDPoPProof, .dpop,
                "the proof failed \(error.code)\(error.field.map { " (\($0))" } ?? "")")
        }
        guard proof.thumbprint.utf8.elementsEqual(thumbprint.utf8) else {
            throw refusal(
                ResourceServerRefusal.invalidDPoPProof, .dpop,
                "the proof's key is not the one the token is bound to (cnf.jkt)")
        }
        if let nonces {
            guard let nonce = proof.nonce, await nonces.accepts(nonce) else {
                throw ResourceServerRefusal(
                    code: ResourceServerRefusal.useDPoPNonce, status: 401,
                    challenges: challenges(
                        for: .dpop, error: ResourceServerRefusal.useDPoPNonce,
                        description: "Resource server requires nonce in DPoP proof"),
                    dpopNonce: await nonces.currentNonce(), reason: "the proof has no nonce or a stale one")
            }
        }
        // Last, so that proofs refused above do not fill the cache. Keyed by key and jti (RFC 9449 §11.1).
        let expiry = proof.issuedAt.addingTimeInterval(
            configuration.proofs.maximumAge + configuration.proofs.futureLeeway + 1)
        let first: Bool
        do {
            // Attributed to the proof's key, so that a key sending too many proofs is refused, not the others.
            first = try await replayCache.firstUse(
                of: proof.thumbprint + " " + proof.jti, until: expiry, proofKey: proof.thumbprint)
        } catch let quota as DPoPReplayQuotaExceeded {
            throw ResourceServerRefusal(
                code: ResourceServerRefusal.temporarilyUnavailable, status: 503, challenges: [],
                reason: "\(quota) (proof key \(proof.thumbprint))")
        } catch {
            throw ResourceServerRefusal(
                code: ResourceServerRefusal.temporarilyUnavailable, status: 503, challenges: [],
                reason: "the DPoP replay cache could not answer")
        }
        guard first else {
            throw refusal(ResourceServerRefusal.invalidDPoPProof, .dpop, "the proof's jti was used before")
        }
    }

    // MARK: - Answers

    /// The challenges for a refusal of `code` on a request that used `scheme` (`nil`: none or unreadable).
    /// `description` replaces the code's fixed `error_description` (a fixed text too: nothing from the request).
    func refusal(
        _ code: ResourceServerRefusal.Code, _ scheme: VerifiedPrincipal.Scheme?, _ reason: String,
        description: String? = nil, scope: String? = nil
    ) -> ResourceServerRefusal {
        let status: Int
        switch code {
        case ResourceServerRefusal.invalidRequest: status = 400
        case ResourceServerRefusal.insufficientScope: status = 403
        default: status = 401
        }
        let bare = code == ResourceServerRefusal.missingCredentials || code == ResourceServerRefusal.unsupportedScheme
        let error: ResourceServerRefusal.Code? = bare ? nil : code
        return ResourceServerRefusal(
            code: code, status: status,
            challenges: challenges(
                for: scheme, error: error, description: description ?? Self.describe(code), scope: scope),
            reason: reason)
    }

    /// One challenge per accepted scheme; the error goes on the scheme the request used (or on all
    /// when it used none readable), RFC 9449 §7.1.
    func challenges(
        for scheme: VerifiedPrincipal.Scheme?, error: ResourceServerRefusal.Code?, description: String? = nil,
        scope: String? = nil
    ) -> [ResourceServerChallenge] {
        var schemes: [VerifiedPrincipal.Scheme] = []
        if configuration.dpop != .required { schemes.append(.bearer) }
        if configuration.dpop != .disabled { schemes.append(.dpop) }
        return schemes.map { candidate in
            var parameters: [(String, String)] = []
            if let realm = configuration.realm { parameters.append(("realm", realm)) }
            if let error, scheme == nil || scheme == candidate {
                parameters.append(("error", error.name))
                if let description { parameters.append(("error_description", description)) }
                if let scope { parameters.append(("scope", scope)) }
            }
            if let metadata = configuration.resourceMetadataURL { parameters.append(("resource_metadata", metadata)) }
            if candidate == .dpop {
                parameters.append(("algs", configuration.dpopProofAlgorithmNames.joined(separator: " ")))
            }
            return ResourceServerChallenge(scheme: candidate.rawValue, parameters: parameters)
        }
    }

    /// Fixed descriptions: nothing from the request reaches a challenge.
    static func describe(_ code: ResourceServerRefusal.Code) -> String? {
        switch code {
        case ResourceServerRefusal.invalidRequest: "The request is malformed"
        case ResourceServerRefusal.invalidToken: "The access token is invalid"
        case ResourceServerRefusal.insufficientScope: "The access token lacks a required scope"
        case ResourceServerRefusal.invalidDPoPProof: "The DPoP proof is invalid"
        default: nil
        }
    }

    /// The scheme an `Authorization` value names (the text before its first space, case-insensitive,
    /// RFC 9110 §11.4) when it is `Bearer` or `DPoP`; `nil` for any other (`Basic`, garbage).
    static func scheme(of value: String) -> VerifiedPrincipal.Scheme? {
        let bytes = Array(value.utf8.prefix(16))
        let name = bytes.prefix { $0 != 0x20 && $0 != 0x09 && $0 != 0x2C }
        switch String(decoding: name, as: UTF8.self).lowercased() {
        case "bearer": return .bearer
        case "dpop": return .dpop
        default: return nil
        }
    }

    /// `Bearer <token68>` or `DPoP <token68>` (RFC 9110 §11.4, scheme case-insensitive; RFC 6750 §2.1).
    static func credentials(_ value: String) -> (VerifiedPrincipal.Scheme, String)? {
        guard let scheme = scheme(of: value) else { return nil }
        var value = value
        return value.withUTF8 { bytes -> (VerifiedPrincipal.Scheme, String)? in
            guard let space = bytes.firstIndex(of: 0x20), space == (scheme == .bearer ? 6 : 4) else { return nil }
            var start = space
            while start < bytes.count, bytes[start] == 0x20 { start += 1 }
            let token = UnsafeBufferPointer(rebasing: bytes[start...])
            guard !token.isEmpty else { return nil }
            // token68: ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/", then "=" padding only.
            var seenPadding = false
            for byte in token {
                let isBody =
                    (byte >= 0x30 && byte <= 0x39) || ((byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A)
                    || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E || byte == 0x2B || byte == 0x2F
                if byte == 0x3D { seenPadding = true } else if !isBody || seenPadding { return nil }
            }
            return (scheme, String(decoding: token, as: UTF8.self))
        }
    }

    static func sameMediaType(_ expected: String, _ actual: String) -> Bool {
        func bare(_ type: String) -> String {
            let lower = type.lowercased()
            return lower.hasPrefix("application/") ? String(lower.dropFirst("application/".count)) : lower
        }
        return bare(expected).utf8.elementsEqual(bare(actual).utf8)
    }
}
