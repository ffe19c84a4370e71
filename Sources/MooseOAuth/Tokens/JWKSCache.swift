#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import MooseJWT
import MooseCrypto
import Logging

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
        public init(
            load: @escaping @Sendable () -> (document: [UInt8], fetchedAt: Date)?,
            save: @escaping @Sendable ([UInt8], Date) -> Void
        ) {
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
    ///
    /// - Parameters:
    ///   - url: the provider's `jwks_uri`.
    ///   - transport: what fetches it (15 s timeout, no retries).
    ///   - cooldown: the least number of seconds between two fetches for an unknown `kid` (default 60),
    ///     so tokens naming made-up keys cannot make it fetch on every call.
    ///   - persistence: where the last document is kept between runs; `nil` (the default): memory only.
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
    ///
    /// - Parameter kid: the token's `kid`; `nil`: the cached keys as they are (fetched on first use).
    /// - Returns: every verification key of the set (symmetric keys left out), not only `kid`'s; the
    ///   verifier picks the key. May lack `kid` while the cooldown runs.
    /// - Throws: `OAuthError` with `transient` (a 5xx answer, an unreachable host), `tls`, `discovery`
    ///   (another non-200 answer), or `invalidResponse` (its `underlying` the `JWTError`) for a document
    ///   that is not a JWKS (not a JSON object, a `keys` member that is not an array); unusable keys in
    ///   it are skipped.
    public func keys(for kid: String?) async throws -> [JWTKey] {
        if fetchedAt == nil, let saved = persistence?.load(), let parsed = try? Self.parse(saved.document) {
            keys = parsed
            fetchedAt = saved.fetchedAt
        }
        if fetchedAt == nil { keys = try await refetch() }
        if let kid, !keys.contains(where: { $0.keyID == kid }), let last = fetchedAt,
            Date().timeIntervalSince(last) >= cooldown
        {
            keys = try await refetch()
        }
        return keys
    }

    private func refetch() async throws -> [JWTKey] {
        if let inFlight { return try await inFlight.value }
        let url = self.url, transport = self.transport, persistence = self.persistence
        let task = Task { () throws -> [JWTKey] in
            let response = try await OAuthHTTP.send(
                APIRequest(url: url, headerFields: [.accept: "application/json"], timeout: 15),
                over: transport, logger: nil, what: url.redactedForLogs)
            guard response.status.code == 200 else {
                throw OAuthError(
                    response.status.code >= 500 ? OAuthError.transient : OAuthError.discovery,
                    "\(url.redactedForLogs) answered HTTP \(response.status.code)", status: response.status.code)
            }
            let keys: [JWTKey]
            do { keys = try JWKSCache.parse(Array(response.body)) } catch {
                // Classed (a provider answering something that is no key set), not a bare JWTError.
                throw OAuthError(
                    OAuthError.invalidResponse, "\(url.redactedForLogs) answered a document that is not a JWK Set",
                    underlying: error)
            }
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
