#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import MooseJWT
import MooseOAuth

/// Verification keys gathered from the places a person names: key files (PEM or JWK), JWKS files and
/// URLs, an issuer's discovery document, an HMAC secret's file — what `moose inspect` verifies with,
/// for a tool or a test of one's own that takes keys the same way.
///
/// Every file is read with a size limit (`maximumFileSize`, `maximumSecretSize`; a FIFO such as
/// `<(command)` works) and every download too (`maximumDocumentSize`); JWKS are fetched over https only
/// (plain http to this machine aside, `TransportSecurity`), as keys decide what "verified" means.
/// Each failure is a `VerificationInputError` naming the file, URL or issuer.
///
/// ```swift
/// let keys = try await VerificationKeys.load(
///     [.issuer("https://id.example.com"), .keyFile("extra.pem")], transport: CurlTransport())
/// let verifier = keys.verifier(validation: ClaimValidation(audiences: ["my-api"]))
/// ```
///
/// Keys from a provider's `jwks_uri` that follow the provider as it rotates them are `JWKSCache`'s job;
/// this type reads a set once.
public struct VerificationKeys: Sendable {
    /// Where keys come from.
    public enum Source: Sendable, Hashable {
        /// A JWKS document (RFC 7517 §5) or a single JWK: the path of a file, or an `http(s)://` URL
        /// (https, or plain http to this machine only).
        case jwks(String)
        /// An issuer: its discovery document (OpenID Connect Discovery 1.0 §4, RFC 8414 §3) names its
        /// `jwks_uri`, whose keys are fetched. The issuer must follow `IssuerRule`.
        case issuer(String)
        /// A key file: PEM (a public key, a certificate, or a private key), a JWK, or a JWKS.
        case keyFile(String)
        /// A file whose bytes, as they are, are an HMAC secret (RFC 7518 §3.2).
        case secretFile(String)

        /// `true` for the sources read over the network: a JWKS URL and an issuer.
        public var isRemote: Bool {
            switch self {
            case .jwks(let location): VerificationKeys.isURL(location)
            case .issuer: true
            case .keyFile, .secretFile: false
            }
        }
    }

    /// The largest key or JWKS file read, in bytes: 1 MiB.
    public static let maximumFileSize = 1 << 20
    /// The largest HMAC secret file read, in bytes: 64 KiB.
    public static let maximumSecretSize = 64 * 1024
    /// The largest JWKS or discovery answer accepted, in bytes: 1 MiB.
    public static let maximumDocumentSize = 1 << 20

    /// The keys, in the order their sources were given (and within a JWKS, document order).
    public var keys: [JWTKey]
    /// The JWKS members skipped as unusable (RFC 7517 §5: keys of an unsupported type or curve are
    /// ignored), each as "SOURCE: keys[INDEX] (kid KID): REASON". Not escaped: the reasons quote the
    /// document's `kid` values.
    public var skipped: [String]

    /// A set of `keys`, with the `skipped` members noted.
    public init(keys: [JWTKey] = [], skipped: [String] = []) {
        self.keys = keys
        self.skipped = skipped
    }

    /// Every algorithm one of the keys can verify (`JWTKey.verifiableAlgorithms`): the allow-list when
    /// the caller names none. Never `none`; HMAC only for secrets.
    public var algorithms: Set<JWTAlgorithm> {
        keys.reduce(into: Set<JWTAlgorithm>()) { $0.formUnion($1.verifiableAlgorithms) }
    }

    /// A verifier of these keys with `validation`, allowing `allowedAlgorithms` (`nil`: `algorithms`);
    /// `nil` when there are no keys (nothing to verify with: the signature stays unchecked).
    public func verifier(
        allowedAlgorithms: Set<JWTAlgorithm>? = nil, validation: ClaimValidation
    ) -> JWTVerifier? {
        guard !keys.isEmpty else { return nil }
        return JWTVerifier(keys: keys, allowedAlgorithms: allowedAlgorithms ?? algorithms, validation: validation)
    }

    /// The keys of every source in order: files read, URLs fetched and issuers discovered with
    /// `transport`.
    ///
    /// - Throws: `VerificationInputError` for the first source that fails.
    public static func load(
        _ sources: [Source], transport: any HTTPTransport
    ) async throws(VerificationInputError) -> VerificationKeys {
        var result = VerificationKeys()
        for source in sources {
            let loaded: VerificationKeys
            switch source {
            case .jwks(let location) where isURL(location):
                loaded = try await fetchJWKS(location, source: source, transport: transport)
            case .issuer(let issuer):
                loaded = try await discover(issuer, transport: transport)
            default:
                loaded = try read(source)
            }
            result.keys += loaded.keys
            result.skipped += loaded.skipped
        }
        return result
    }

    /// The keys of local sources (files), read without a transport and without starting a task.
    ///
    /// - Throws: `VerificationInputError` for the first source that fails;
    ///   `VerificationInputError.insecureLocation` for a remote source (`Source.isRemote`: use
    ///   `load(_:transport:)`).
    public static func read(_ sources: [Source]) throws(VerificationInputError) -> VerificationKeys {
        var result = VerificationKeys()
        for source in sources {
            let loaded = try read(source)
            result.keys += loaded.keys
            result.skipped += loaded.skipped
        }
        return result
    }

    /// The keys of a JWKS document (or a single JWK) in `bytes`; `source` names it in messages.
    ///
    /// - Throws: `VerificationInputError.unusableKey` when the bytes are no JWKS or hold no usable key
    ///   (the reasons of the skipped members are in the message).
    public static func jwks(_ bytes: [UInt8], source: String) throws(VerificationInputError) -> VerificationKeys {
        let set: JWKS
        do throws(JWTError) {
            set = try JWKS(json: bytes)
        } catch {
            throw notAJWKS(source, error)
        }
        guard !set.keys.isEmpty else {
            // The reasons quote the document's own `kid`s: each clipped, and at most five of them.
            let shown = set.skipped.prefix(5).map { $0.clipped(to: 120) }
            let more = set.skipped.count > 5 ? "; and \(set.skipped.count - 5) more" : ""
            let reasons = set.skipped.isEmpty ? "" : " (skipped: " + shown.joined(separator: "; ") + more + ")"
            throw VerificationInputError(VerificationInputError.unusableKey, "\(source) holds no usable key\(reasons)")
        }
        do throws(JWTError) {
            let keys = try set.keys.map { jwk throws(JWTError) in try jwk.verificationKey() }
            return VerificationKeys(keys: keys, skipped: set.skipped.map { "\(source): \($0)" })
        } catch {
            throw notAJWKS(source, error)
        }
    }

    private static func notAJWKS(_ source: String, _ error: JWTError) -> VerificationInputError {
        VerificationInputError(
            VerificationInputError.unusableKey, "\(source) is not a usable JWKS: \(error.message)", underlying: error)
    }

    /// The key in a key file's `bytes`: PEM (a public key, a certificate or a private key), or JSON (a
    /// JWK or a JWKS, as `jwks(_:source:)`); `source` names it in messages.
    ///
    /// - Throws: `VerificationInputError.unusableKey`.
    public static func keyFile(_ bytes: [UInt8], source: String) throws(VerificationInputError) -> VerificationKeys {
        let text = String(decoding: bytes, as: UTF8.self)
        let trimmed = text.drop { $0.isWhitespace }
        if trimmed.hasPrefix("{") { return try jwks(bytes, source: source) }
        guard trimmed.hasPrefix("-----BEGIN") else {
            throw VerificationInputError(
                VerificationInputError.unusableKey, "key file \(source) is neither PEM nor JSON (JWK)")
        }
        do throws(JWTError) {
            return VerificationKeys(keys: [try JWTKey(pem: text)])
        } catch {
            throw VerificationInputError(
                VerificationInputError.unusableKey, "key file \(source): \(error.message)", underlying: error)
        }
    }

    /// Fetches the JWKS at `url` with `transport` (`Accept: application/jwk-set+json`, 15 s) and reads it.
    ///
    /// - Throws: `VerificationInputError.insecureLocation` for a URL that is not https (plain http to
    ///   this machine aside); `fetchFailed` when the transport fails (`underlying`), the answer is not
    ///   200 or is larger than `maximumDocumentSize`; `unusableKey` as `jwks(_:source:)`.
    public static func fetchJWKS(
        _ url: URL, transport: any HTTPTransport
    ) async throws(VerificationInputError) -> VerificationKeys {
        try await fetchJWKS(url.absoluteString, source: .jwks(url.absoluteString), transport: transport)
    }

    /// The keys of `issuer`: its discovery document's `jwks_uri`, fetched (`fetchJWKS(_:transport:)`).
    ///
    /// - Throws: `VerificationInputError.invalidIssuer` when `issuer` breaks `IssuerRule`;
    ///   `discoveryFailed` when discovery fails (`underlying`: the `OAuthError`) or names no `jwks_uri`;
    ///   the errors of `fetchJWKS(_:transport:)`.
    public static func discover(
        _ issuer: String, transport: any HTTPTransport
    ) async throws(VerificationInputError) -> VerificationKeys {
        let source = Source.issuer(issuer)
        if let problem = IssuerRule.problem(issuer) {
            throw VerificationInputError(
                VerificationInputError.invalidIssuer, "issuer \(issuer) \(problem.predicate)", source: source)
        }
        let metadata: ProviderMetadata
        do {
            metadata = try await ProviderMetadata.discover(issuer: issuer, transport: transport)
        } catch let error as OAuthError {
            throw VerificationInputError(
                VerificationInputError.discoveryFailed, "cannot use issuer \(issuer): \(error.message)",
                source: source, underlying: error)
        } catch {
            throw VerificationInputError(
                VerificationInputError.discoveryFailed, "cannot use issuer \(issuer): \(error)", source: source)
        }
        guard let jwksURI = metadata.jwksURI else {
            throw VerificationInputError(
                VerificationInputError.discoveryFailed, "issuer \(issuer) publishes no jwks_uri", source: source)
        }
        return try await fetchJWKS(jwksURI.absoluteString, source: source, transport: transport)
    }
}

extension VerificationKeys {
    /// `true` when a JWKS location is a URL rather than a file's path.
    static func isURL(_ location: String) -> Bool {
        location.hasPrefix("https://") || location.hasPrefix("http://")
    }

    /// The keys of a local source.
    static func read(_ source: Source) throws(VerificationInputError) -> VerificationKeys {
        switch source {
        case .jwks(let location) where !isURL(location):
            return try jwks(try readFile(location, what: "JWKS file", source: source), source: location)
        case .keyFile(let path):
            return try keyFile(try readFile(path, what: "key file", source: source), source: path)
        case .secretFile(let path):
            let secret = try readFile(path, what: "secret file", limit: maximumSecretSize, source: source)
            guard !secret.isEmpty else {
                throw VerificationInputError(
                    VerificationInputError.unusableKey, "secret file \(path) is empty", source: source)
            }
            return VerificationKeys(keys: [JWTKey(secret: secret)])
        case .jwks, .issuer:
            throw VerificationInputError(
                VerificationInputError.insecureLocation,
                "a JWKS URL or an issuer is read over the network: load it with a transport",
                source: source)
        }
    }

    /// A whole file, at most `limit` bytes.
    static func readFile(
        _ path: String, what: String, limit: Int = maximumFileSize, source: Source
    ) throws(VerificationInputError) -> [UInt8] {
        do {
            return try SessionPlan.readFile(path, what: what, limit: limit)
        } catch let error as OAuthError {
            throw VerificationInputError(VerificationInputError.unreadableFile, error.message, source: source)
        } catch {
            throw VerificationInputError(
                VerificationInputError.unreadableFile, "cannot read \(what) \(path)", source: source)
        }
    }

    /// Fetches and reads the JWKS at `location` for `source`.
    static func fetchJWKS(
        _ location: String, source: Source, transport: any HTTPTransport
    ) async throws(VerificationInputError) -> VerificationKeys {
        guard let url = URL(string: location), url.host != nil else {
            throw VerificationInputError(
                VerificationInputError.insecureLocation, "JWKS URL \(location) is not a valid URL", source: source)
        }
        let shown = url.redactedForLogs
        guard TransportSecurity.permits(url) else {
            throw VerificationInputError(
                VerificationInputError.insecureLocation,
                "JWKS URL \(shown) is not https (plain http is allowed only to 127.0.0.1, ::1 or localhost)",
                source: source)
        }
        let request = APIRequest(
            url: url, headerFields: [.accept: "application/jwk-set+json, application/json"], timeout: 15)
        let response: APIResponse
        do {
            response = try await transport.send(request)
        } catch let error as HTTPRequestError {
            let detail =
                error.code == HTTPRequestError.tls
                ? "the TLS connection to \(shown) failed (\(error.message))" : "\(error)"
            throw VerificationInputError(
                VerificationInputError.fetchFailed, "cannot fetch the JWKS: \(detail)", source: source,
                underlying: error)
        } catch {
            throw VerificationInputError(
                VerificationInputError.fetchFailed, "cannot fetch the JWKS: \(shown): \(error)", source: source)
        }
        guard response.status.code == 200 else {
            throw VerificationInputError(
                VerificationInputError.fetchFailed,
                "cannot fetch the JWKS: \(shown) answered HTTP \(response.status.code)", source: source)
        }
        guard response.body.count <= maximumDocumentSize else {
            throw VerificationInputError(
                VerificationInputError.fetchFailed,
                "cannot fetch the JWKS: \(shown) answered more than \(maximumDocumentSize) bytes", source: source)
        }
        do throws(VerificationInputError) {
            return try jwks(Array(response.body), source: shown)
        } catch {
            throw VerificationInputError(error.code, error.message, source: source, underlying: error.underlying)
        }
    }
}
