#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
import MooseJWT

/// Where a workload's own OpenID Connect token comes from — the identity a CI platform or a cluster
/// gives a job or a pod — to be exchanged for an access token at a provider that trusts that
/// platform (`TokenExchangeFlow`, or `JWTBearerFlow` with it as the assertion). No secret on disk.
///
/// Every call asks the source again: a projected token file is re-read (the kubelet rotates it), a
/// CI platform is asked for a fresh token. What comes back must look like a compact JWT (three
/// base64url parts, at most 64 KiB) or the call fails, naming the source — the platform's side,
/// `OAuthError.workloadIdentity` — before anything reaches the provider.
///
/// ```swift
/// let workload = WorkloadIdentity.githubActions(transport: URLSessionTransport())
/// let flow = TokenExchangeFlow(client: client) {
///     ExchangeToken(try await workload.token(audience: "https://id.example.com"), type: ExchangeToken.idTokenType)
/// }
/// ```
public struct WorkloadIdentity: Sendable {
    /// What the source is, for messages (`GitHub Actions`, `the file /var/run/…`).
    public let name: String
    private let fetch: @Sendable (_ audience: String?) async throws -> String

    /// What makes the source of a plan's `command:PROGRAM ARG…` spec from its words: MooseOAuthSystem's
    /// `WorkloadIdentity.command`, which runs the program on every read. MooseOAuth starts no process
    /// (it builds where none can be started), so a plan's command source runs only where this is given
    /// (`TokenManager(plan:…, commands:)`, `TokenManager.open(…, commands:)`,
    /// `SessionPlan.identity(_:transport:commands:)`, `SessionPlan.workloadGrant(transport:commands:)`).
    public typealias Commands = @Sendable ([String]) -> WorkloadIdentity

    /// A source of your own: `fetch` returns the token for `audience` (which a source may ignore).
    public init(name: String, fetch: @escaping @Sendable (_ audience: String?) async throws -> String) {
        self.name = name
        self.fetch = fetch
    }

    /// The workload's token, for `audience` where the source can ask for one (GitHub Actions).
    public func token(audience: String?) async throws -> String {
        guard let token = Self.compactJWS(try await fetch(audience)) else {
            throw OAuthError(
                OAuthError.workloadIdentity,
                "\(name) gave something that is not a JWT (a compact JWS); nothing was sent to the provider")
        }
        return token
    }

    /// `raw` without surrounding ASCII whitespace when it has a compact JWS's shape — three base64url
    /// parts, the first two non-empty, at most 64 KiB — else `nil`. Total over any text (fuzzed).
    package static func compactJWS(_ raw: String) -> String? {
        let token = raw.trimmingASCIIWhitespace()
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        let base64url = { (byte: UInt8) in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2D || byte == 0x5F
        }
        guard token.utf8.count <= TokenCharacters.maximumTokenLength, parts.count == 3, parts[0].count > 0,
            parts[1].count > 0,
            parts.allSatisfy({ $0.allSatisfy(base64url) })
        else { return nil }
        return token
    }

    /// The token in a file, read on every call: a Kubernetes projected service-account token
    /// (`/var/run/secrets/tokens/…`, rotated by the kubelet), or any file a platform writes.
    public static func file(_ path: String) -> WorkloadIdentity {
        WorkloadIdentity(name: "the token file \(path)") { _ in
            guard let data = FileManager.default.contents(atPath: path) else {
                throw OAuthError(
                    OAuthError.workloadIdentity,
                    "the token file \(path) cannot be read (is the volume mounted, the path right?)")
            }
            guard data.count <= TokenCharacters.maximumTokenLength + 2 else {
                throw OAuthError(OAuthError.workloadIdentity, "the token file \(path) is larger than a token can be")
            }
            return String(decoding: data, as: UTF8.self)
        }
    }

    /// The token in an environment variable, read on every call: GitLab CI's `id_tokens` (a job
    /// declares `id_tokens: { MOOSE_ID_TOKEN: { aud: … } }`; the audience is the job's to declare),
    /// or, with another `platform` name, any variable the caller sets.
    ///
    /// An unset or empty variable is a `workloadIdentity` error that names it (and, for GitLab CI,
    /// the job's `id_tokens`).
    public static func environmentVariable(
        _ variable: String, platform: String = "GitLab CI",
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> WorkloadIdentity {
        let hint =
            platform == "GitLab CI"
            ? "declare it in the job's id_tokens (with the provider's aud)"
            : "set it to the workload's identity token (a JWT) before this runs"
        return WorkloadIdentity(name: "\(platform) (the variable \(variable))") { _ in
            guard let value = environment[variable], !value.isEmpty else {
                throw OAuthError(
                    OAuthError.workloadIdentity,
                    "\(platform): the variable \(variable) is not set (or is empty); \(hint)")
            }
            return value
        }
    }

    /// GitHub Actions' OIDC token: asked of `ACTIONS_ID_TOKEN_REQUEST_URL` with
    /// `ACTIONS_ID_TOKEN_REQUEST_TOKEN` (both set only for a job with `permissions: id-token: write`),
    /// with `audience` as the token's `aud`. The request token goes only to an https URL (or loopback).
    public static func githubActions(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        transport: any HTTPTransport
    ) -> WorkloadIdentity {
        WorkloadIdentity(name: "GitHub Actions") { audience in
            guard let address = environment["ACTIONS_ID_TOKEN_REQUEST_URL"], !address.isEmpty,
                let requestToken = environment["ACTIONS_ID_TOKEN_REQUEST_TOKEN"], !requestToken.isEmpty
            else {
                throw OAuthError(
                    OAuthError.workloadIdentity,
                    "GitHub Actions: ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN are not set; "
                        + "give the job `permissions: id-token: write`")
            }
            guard var components = URLComponents(string: address), let base = components.url,
                TransportSecurity.permits(base)
            else {
                throw OAuthError(
                    OAuthError.workloadIdentity,
                    "GitHub Actions: ACTIONS_ID_TOKEN_REQUEST_URL is not an https URL; not sending the request token")
            }
            guard TokenCharacters.isVisibleASCII(requestToken), !requestToken.utf8.contains(0x20),
                requestToken.utf8.count <= 8192
            else {
                throw OAuthError(
                    OAuthError.workloadIdentity,
                    "GitHub Actions: ACTIONS_ID_TOKEN_REQUEST_TOKEN has characters a token cannot have")
            }
            if let audience {
                components.queryItems =
                    (components.queryItems ?? []) + [URLQueryItem(name: "audience", value: audience)]
            }
            guard let url = components.url else {
                throw OAuthError(OAuthError.workloadIdentity, "GitHub Actions: the token URL cannot take an audience")
            }
            var headers = HTTPFields()
            headers[.authorization] = "Bearer \(requestToken)"
            headers[.accept] = "application/json"
            let response: APIResponse
            do {
                response = try await transport.send(APIRequest(url: url, headerFields: headers, timeout: 30))
            } catch {
                throw OAuthError(
                    OAuthError.workloadIdentity, "GitHub Actions' token endpoint could not be reached",
                    underlying: error)
            }
            guard response.status.code == 200 else {
                let hint =
                    response.status.code == 401 || response.status.code == 403
                    ? " (does the job have `permissions: id-token: write`?)" : ""
                throw OAuthError(
                    OAuthError.workloadIdentity,
                    "GitHub Actions' token endpoint answered HTTP \(response.status.code)\(hint)",
                    status: response.status.code)
            }
            guard response.body.count <= 1 << 20,
                case .object(let object)? = try? JSONValue(parsing: Array(response.body)),
                let value = object["value"]?.stringValue
            else {
                throw OAuthError(
                    OAuthError.workloadIdentity,
                    "GitHub Actions' token endpoint answered without a token (no JSON \"value\")")
            }
            return value
        }
    }
}
