#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
import MooseJWT

/// Fetches and validates provider metadata, and caches it.
///
/// Reads the OpenID Connect document and, liberally, the RFC 8414 document too: some providers
/// list revocation and introspection only in the latter. The `issuer` in each document must equal
/// the requested issuer exactly (OIDC Discovery §4.3, RFC 8414 §3.3), or discovery fails.
///
/// ```swift
/// let discovery = Discovery(transport: URLSessionTransport())
/// let metadata = try await discovery.metadata(for: "https://id.example.com")
/// ```
public actor Discovery {
    let transport: any HTTPTransport
    private let timeToLive: TimeInterval
    private var cache: [String: (metadata: ProviderMetadata, fetched: Date)] = [:]
    private var inFlight: [String: Task<ProviderMetadata, any Error>] = [:]

    /// A discovery client; documents are cached for `timeToLive` seconds.
    ///
    /// - Parameters:
    ///   - transport: what fetches the documents.
    ///   - timeToLive: seconds a fetched document is served from the cache (default 3600: an hour).
    public init(transport: any HTTPTransport, timeToLive: TimeInterval = 3600) {
        self.transport = transport
        self.timeToLive = timeToLive
    }

    /// The metadata of `issuer`, from the cache or the network (one fetch for concurrent callers).
    ///
    /// - Parameters:
    ///   - issuer: the issuer URL exactly as the provider names itself (scheme, path and trailing
    ///     slash count); also the cache key.
    ///   - overrides: endpoints set by hand, each replacing the discovered one; default: none.
    /// - Returns: the validated metadata with `overrides` applied (the cache keeps it without them).
    /// - Throws: as `fetch(issuer:transport:)`; `OAuthError.insecureEndpoint` also for an override
    ///   that is plain `http` to another machine.
    public func metadata(for issuer: String, overrides: EndpointOverrides = EndpointOverrides()) async throws
        -> ProviderMetadata
    {
        if let cached = cache[issuer], Date().timeIntervalSince(cached.fetched) < timeToLive {
            let merged = cached.metadata.overridden(by: overrides)
            try merged.checkTransportSecurity()
            return merged
        }
        if let running = inFlight[issuer] {
            let merged = try await running.value.overridden(by: overrides)
            try merged.checkTransportSecurity()
            return merged
        }
        let transport = self.transport
        let task = Task { try await Discovery.fetch(issuer: issuer, transport: transport) }
        inFlight[issuer] = task
        defer { inFlight[issuer] = nil }
        let metadata = try await task.value
        cache[issuer] = (metadata, Date())
        let merged = metadata.overridden(by: overrides)
        try merged.checkTransportSecurity()
        return merged
    }

    /// Forgets a cached document (after a key rotation the JWKS URI may change, for instance).
    public func invalidate(_ issuer: String) { cache[issuer] = nil }

    /// Fetches and validates both documents.
    ///
    /// - Parameters:
    ///   - issuer: the issuer URL, compared byte for byte with each document's `issuer`.
    ///   - transport: what fetches the documents (15 s timeout each, no retries).
    /// - Returns: the OpenID Connect document's metadata, its gaps filled from the RFC 8414 one (or
    ///   the RFC 8414 document alone), uncached.
    /// - Throws: `OAuthError` with `invalidConfiguration` for an issuer that breaks `IssuerRule` (not
    ///   an http(s) URL usable as an issuer); `insecureEndpoint` for a plain-`http` issuer or endpoint to another
    ///   machine; `issuerMismatch` for a document naming another issuer; `discovery` for no document, an
    ///   unusable one (not JSON, a REQUIRED member missing, over 256 KiB) or a 4xx answer; `transient`
    ///   for a 5xx answer or an unreachable host; `tls` for a failed TLS handshake.
    public static func fetch(issuer: String, transport: any HTTPTransport) async throws -> ProviderMetadata {
        // The one issuer rule (`IssuerRule`): an absolute http(s) URL usable as an issuer (RFC 8414 §2),
        // https or loopback http (RFC 8414 §2, OIDC Discovery §3, RFC 8252 §8.3).
        try IssuerRule.check(issuer)
        // The order of RFC 8414 §3.1 / §5 and the MCP authorization specification (2025-11-25): the
        // RFC 8414 document (well-known segment between host and path), then OpenID Connect's — for an
        // issuer with a path first with the segment inserted the same way, then appended (OIDC
        // Discovery §4). Both kinds are read and merged (OpenID Connect's members win; the RFC 8414
        // document fills the gaps: some providers list revocation and introspection only there).
        let trimmed = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        let path = URLComponents(string: trimmed)?.path ?? ""
        func inserted(_ segment: String) -> String? {
            var components = URLComponents(string: trimmed)
            components?.path = "/.well-known/" + segment + path
            return components?.string
        }
        var rfc8414: ProviderMetadata? = nil
        var rfc8414Failure: (any Error)? = nil
        if let url = inserted("oauth-authorization-server") {
            do {
                rfc8414 = try await document(url, issuer: issuer, kind: .authorizationServer, transport: transport)
            } catch let error as OAuthError where error.code == OAuthError.tls {
                // The host's TLS failed (an untrusted certificate, a key that is not pinned): no other location is asked.
                throw error
            } catch {
                rfc8414Failure = error
            }
        }
        var oidc: ProviderMetadata? = nil
        var insertedFailure: (any Error)? = nil
        if !path.isEmpty, let url = inserted("openid-configuration") {
            // A provider that does not know this (newer) location may answer anything there: only a
            // valid document counts, anything else is remembered and the appended location is asked.
            do {
                oidc = try await document(url, issuer: issuer, kind: .openIDConnect, transport: transport)
            } catch let error as OAuthError where error.code == OAuthError.tls {
                throw error
            } catch {
                insertedFailure = error
            }
        }
        if oidc == nil {
            oidc = try await document(
                trimmed + "/.well-known/openid-configuration", issuer: issuer, kind: .openIDConnect,
                transport: transport)
        }
        var metadata = oidc
        if let rfc8414 { metadata = (metadata ?? rfc8414).filling(from: rfc8414) }
        guard let metadata else {
            if let failure = rfc8414Failure ?? insertedFailure { throw failure }
            throw OAuthError(OAuthError.discovery, "\(issuer) publishes no discovery document")
        }
        try metadata.checkTransportSecurity()
        return metadata
    }

    /// The two metadata documents, each with its own REQUIRED members.
    public enum DocumentKind: Sendable {
        /// `/.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §3).
        case openIDConnect
        /// `/.well-known/oauth-authorization-server` (RFC 8414 §2).
        case authorizationServer
    }

    /// Parses and validates one metadata document: a JSON object (at most 256 KiB) whose `issuer`
    /// equals `issuer` exactly (byte for byte; OIDC Discovery §4.3, RFC 8414 §3.3) and which has
    /// every member its kind makes REQUIRED. The error names each missing member.
    package static func parseDocument(_ body: [UInt8], issuer: String, kind: DocumentKind) throws -> ProviderMetadata {
        guard body.count <= 256 << 10 else {
            throw OAuthError(OAuthError.discovery, "the discovery document of \(issuer) is larger than 256 KiB")
        }
        guard case .object(let object)? = try? JSONValue(parsing: body) else {
            throw OAuthError(OAuthError.discovery, "the discovery document of \(issuer) is not a JSON object")
        }
        let metadata: ProviderMetadata
        do {
            metadata = try JSONDecoder().decode(ProviderMetadata.self, from: Data(body))
        } catch {
            throw OAuthError(
                OAuthError.discovery,
                "the discovery document of \(issuer) has a member of the wrong type or a malformed URL")
        }
        guard metadata.issuer.utf8.elementsEqual(issuer.utf8) else {
            throw OAuthError(
                OAuthError.issuerMismatch,
                "the discovery document of \(issuer) names another issuer (\(metadata.issuer)); refusing it. "
                    + "If \(metadata.issuer) is the provider you mean, use exactly that as the issuer (scheme, path and trailing slash count)"
            )
        }
        var missing: [String] = []
        func need(_ name: String) { if object[name] == nil || object[name] == .null { missing.append(name) } }
        let responseTypes = metadata.responseTypesSupported ?? []
        let implicitOnly =
            !responseTypes.isEmpty && responseTypes.allSatisfy { !$0.split(separator: " ").contains("code") }
        switch kind {
        case .openIDConnect:
            need("authorization_endpoint")
            if !implicitOnly { need("token_endpoint") }
            for name in [
                "jwks_uri", "response_types_supported", "subject_types_supported",
                "id_token_signing_alg_values_supported"
            ] {
                need(name)
            }
        case .authorizationServer:
            need("response_types_supported")
            // authorization_endpoint: REQUIRED unless no grant type uses it (RFC 8414 §2).
            let grants = metadata.grantTypesSupported ?? ["authorization_code", "implicit"]
            if grants.contains("authorization_code") || grants.contains("implicit") { need("authorization_endpoint") }
            if !implicitOnly { need("token_endpoint") }
        }
        guard missing.isEmpty else {
            let which = kind == .openIDConnect ? "OpenID Connect Discovery §3" : "RFC 8414 §2"
            throw OAuthError(
                OAuthError.discovery,
                "the discovery document of \(issuer) lacks \(missing.joined(separator: ", ")) (REQUIRED by \(which))")
        }
        return metadata
    }

    /// One document; `nil` for a 404 (so the other may stand in), an error for anything else wrong.
    static func document(_ text: String, issuer: String, kind: DocumentKind, transport: any HTTPTransport) async throws
        -> ProviderMetadata?
    {
        guard let url = URL(string: text) else { throw OAuthError(OAuthError.discovery, "bad discovery URL \(text)") }
        let response = try await OAuthHTTP.send(
            APIRequest(url: url, headerFields: [.accept: "application/json"], timeout: 15),
            over: transport, logger: nil, what: url.redactedForLogs)
        if response.status.code == 404 { return nil }
        guard response.status.code == 200 else {
            throw OAuthError(
                response.status.code >= 500 ? OAuthError.transient : OAuthError.discovery,
                "\(url.redactedForLogs) answered HTTP \(response.status.code)", status: response.status.code)
        }
        return try parseDocument(Array(response.body), issuer: issuer, kind: kind)
    }
}
