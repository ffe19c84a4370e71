#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import MooseJWT
import MooseCrypto
import Logging

/// PKCE (RFC 7636) with S256, always.
public struct PKCE: Sendable {
    /// The verifier: 43 characters of base64url from 32 random bytes (RFC 7636 §4.1).
    public let verifier: String
    /// `BASE64URL(SHA256(verifier))` (RFC 7636 §4.2).
    public var challenge: String { PKCE.challenge(for: verifier) }

    /// A fresh verifier.
    public init() throws { verifier = Base64URL.encode(try SecureRandom.bytes(count: 32)) }
    /// A given verifier (test vectors).
    public init(verifier: String) { self.verifier = verifier }

    /// The S256 challenge of a verifier.
    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(HashFunction.sha256.hash(Array(verifier.utf8)))
    }
}

/// A provider's signing keys (its `jwks_uri`), cached; an unknown `kid` triggers one refetch
/// (key rotation), shared by concurrent callers and at most once per `cooldown`.
public actor JWKSCache {
    /// Where a cache keeps its last JWKS document between runs (the CLI uses the secret store).
    public struct Persistence: Sendable {
        /// Returns the saved document and when it was fetched, if any.
        public var load: @Sendable () -> (document: [UInt8], fetchedAt: Date)?
        /// Saves a freshly fetched document.
        public var save: @Sendable ([UInt8], Date) -> Void

        /// A persistence.
        public init(load: @escaping @Sendable () -> (document: [UInt8], fetchedAt: Date)?,
                    save: @escaping @Sendable ([UInt8], Date) -> Void) {
            self.load = load
            self.save = save
        }
    }

    private let url: URL
    private let transport: any HTTPTransport
    private let cooldown: TimeInterval
    private let persistence: Persistence?
    private var keys: [JWTKey] = []
    private var fetchedAt: Date? = nil
    private var inFlight: Task<[JWTKey], any Error>? = nil
    /// How many times the set was fetched (for tests and diagnostics).
    public private(set) var fetchCount = 0

    /// A cache for `url`; with `persistence`, it starts from the saved document (no fetch at start-up
    /// while the saved keys know the token's `kid`) and saves each new one.
    public init(url: URL, transport: any HTTPTransport, cooldown: TimeInterval = 60, persistence: Persistence? = nil) {
        self.url = url
        self.transport = transport
        self.cooldown = cooldown
        self.persistence = persistence
    }

    static func parse(_ document: [UInt8]) throws -> [JWTKey] {
        // A provider's JWKS publishes public keys: symmetric ("oct") keys there are refused.
        try JWKS(json: document).keys.filter { $0.keyType != "oct" }.map { try $0.verificationKey() }
    }

    /// Keys able to verify a token with `kid`: cached ones, or — when none matches and the cooldown
    /// allows — freshly fetched ones.
    public func keys(for kid: String?) async throws -> [JWTKey] {
        if fetchedAt == nil, let saved = persistence?.load(), let parsed = try? Self.parse(saved.document) {
            keys = parsed
            fetchedAt = saved.fetchedAt
        }
        if fetchedAt == nil { keys = try await refetch() }
        if let kid, !keys.contains(where: { $0.keyID == kid }), let last = fetchedAt, Date().timeIntervalSince(last) >= cooldown {
            keys = try await refetch()
        }
        return keys
    }

    private func refetch() async throws -> [JWTKey] {
        if let inFlight { return try await inFlight.value }
        let url = self.url, transport = self.transport, persistence = self.persistence
        let task = Task { () throws -> [JWTKey] in
            let response = try await transport.send(HTTPRequest(url: url, headers: ["Accept": "application/json"], timeout: 15))
            guard response.status == 200 else {
                throw OAuthError(response.status >= 500 ? OAuthError.transient : OAuthError.discovery,
                                 "\(url.redactedForLogs) answered HTTP \(response.status)", status: response.status)
            }
            let keys = try JWKSCache.parse(Array(response.body))
            persistence?.save(Array(response.body), Date())
            return keys
        }
        inFlight = task
        defer { inFlight = nil }
        let fresh = try await task.value
        fetchCount += 1
        fetchedAt = Date()
        return fresh
    }
}

/// Validates ID tokens (OpenID Connect Core 1.0 §3.1.3.7).
public struct IDTokenValidator: Sendable {
    /// The expected issuer (exact).
    public let issuer: String
    /// This client's id: must be in `aud`.
    public let clientID: String
    /// Where the provider's keys come from.
    public let jwks: JWKSCache
    /// Algorithms accepted (default RS256, the OIDC default; never `none`, never HMAC here).
    public var algorithms: Set<JWTAlgorithm>
    /// Clock-skew tolerance, seconds.
    public var leeway: TimeInterval
    /// The clock.
    public var clock: @Sendable () -> Date

    /// A validator.
    public init(issuer: String, clientID: String, jwks: JWKSCache, algorithms: Set<JWTAlgorithm> = [.rs256],
                leeway: TimeInterval = 60, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.issuer = issuer
        self.clientID = clientID
        self.jwks = jwks
        self.algorithms = algorithms.subtracting([.hs256, .hs384, .hs512])
        self.leeway = leeway
        self.clock = clock
    }

    /// Validates `token`; `nonce` is the value sent in the authorization request (nil for a refresh,
    /// where OIDC Core §12.2 lets the nonce be absent but, if present, it must equal the original).
    ///
    /// - Throws: `OAuthError.invalidIDToken` whose `underlying` is the specific `JWTError`
    ///   (`issuerMismatch`, `audienceMismatch`, `expired`, `invalidSignature`, `unknownKey`…) or, for the
    ///   nonce and `azp` rules, a message naming the rule.
    @discardableResult
    public func validate(_ token: String, nonce: String?) async throws -> JWTClaims {
        try await validate(token, nonce: nonce, serverClockOffset: nil)
    }

    /// Validates with the provider's clock when ours is off by more than the leeway (the offset
    /// comes from the token response's `Date` header); logs that it did.
    @discardableResult
    public func validate(_ token: String, nonce: String?, serverClockOffset: TimeInterval?) async throws -> JWTClaims {
        var clock = self.clock
        if let offset = serverClockOffset, abs(offset) > leeway {
            let base = self.clock
            clock = { base().addingTimeInterval(offset) }
            Logger(label: "moose.oauth").warning("local clock differs from \(issuer)'s by \(Int(offset)) s; judging the ID token by the provider's clock")
        }
        let header: JOSEHeader
        do { header = try JWS(compact: token).header } catch { throw invalid("ID token is malformed: \(error.message)", error) }
        let keys = try await jwks.keys(for: header.keyID)
        // Rules 2–3, 9, 10 (iss, aud, exp, iat) and 6–7 (alg, signature) through the JWT verifier.
        let verifier = JWTVerifier(keys: keys, allowedAlgorithms: algorithms,
                                   validation: ClaimValidation(issuer: issuer, audiences: [clientID], leeway: leeway,
                                                               requiredClaims: ["iss", "sub", "aud", "exp", "iat"], clock: clock))
        let jwt: JWT
        do { jwt = try verifier.verify(token) } catch { throw invalid("ID token rejected: \(error.message)", error) }
        let claims = jwt.claims
        // Rule 4–5: with several audiences, azp must be present and be this client.
        if let audience = claims.audience, audience.count > 1, claims["azp"]?.stringValue != clientID {
            throw invalid("ID token has several audiences and azp is not this client (OIDC Core 3.1.3.7 rule 5)", nil)
        }
        if let azp = claims["azp"]?.stringValue, azp != clientID {
            throw invalid("ID token azp is \(azp), not this client", nil)
        }
        // Rule 11: the nonce must match the request's.
        let tokenNonce = claims["nonce"]?.stringValue
        if let nonce {
            guard let tokenNonce, ConstantTime.equals(Array(tokenNonce.utf8), Array(nonce.utf8)) else {
                throw invalid("ID token nonce does not match the request's (OIDC Core 3.1.3.7 rule 11)", nil)
            }
        }
        return claims
    }

    private func invalid(_ message: String, _ error: JWTError?) -> OAuthError {
        OAuthError(OAuthError.invalidIDToken, message, underlying: error)
    }
}
