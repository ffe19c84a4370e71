#if MooseObservability
public import CoreMetrics
public import MooseHTTP
public import MooseOAuth
public import Tracing
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An `HTTPTransport` that measures (swift-metrics) and traces (swift-distributed-tracing) every
/// request Moose makes to a provider, wrapping the transport that sends it. Give it to the
/// `OAuthClient` (or `TokenManager`) whose traffic should be seen:
///
/// ```swift
/// let transport = ObservedTransport(URLSessionTransport())
/// let moose = TokenManager(issuer: issuer, clientID: "svc", storage: storage, transport: transport)
/// ```
///
/// Nothing happens until the app bootstraps a backend (`MetricsSystem.bootstrap`,
/// `InstrumentationSystem.bootstrap`): both default to no-ops. A token request (a form POST naming
/// a `grant_type`) is span `oauth.token` and counts in `moose_token_requests_total` by `grant`
/// (`authorization_code`, `refresh_token`, `client_credentials`, `password`, `device_code`,
/// `token_exchange`, `jwt_bearer`, else `other`) and `outcome` (`ok`, `refused` for 4xx, `unavailable`
/// for 5xx and 429, `unreachable`), with its duration in `moose_token_request_duration_seconds`; any
/// other request (discovery, JWKS, UserInfo, revocation) is span `oauth.request` and counts in
/// `moose_provider_requests_total` by `outcome` — the same values, plus `not_found` for a 404 to a
/// `/.well-known/` path: discovery probing a location the provider does not use (an issuer with a path
/// costs two such probes before its document), which is neither a refusal nor a failed span.
///
/// A failed span (a 4xx or 5xx answer, or no answer) has status error and `error.type`: the OAuth
/// `error` the answer carries (RFC 6749 §5.2, RFC 6750 §3: from a JSON body's `error` member or a
/// `WWW-Authenticate` challenge's `error` parameter) when it is one of the registered codes, else
/// the status code (`"404"`), else the transport error's kind. No token, code, secret, query string
/// or provider text ever becomes an attribute or a dimension: spans carry the method, the host, the
/// path, the grant, the status and that bounded `error.type`.
public struct ObservedTransport: HTTPTransport {
    /// The transport that sends.
    public let base: any HTTPTransport
    private let metrics: (any MetricsFactory)?
    private let tracer: (any Tracer)?

    /// Wraps `base`; `metrics` and `tracer` default to the bootstrapped systems (tests pass their own).
    public init(_ base: any HTTPTransport, metrics: (any MetricsFactory)? = nil, tracer: (any Tracer)? = nil) {
        self.base = base
        self.metrics = metrics
        self.tracer = tracer
    }

    public func send(_ request: APIRequest) async throws -> APIResponse {
        let grant = Self.grant(of: request)
        let tracer = self.tracer ?? InstrumentationSystem.tracer
        let factory = metrics ?? MetricsSystem.factory
        let span = tracer.startSpan(
            grant == nil ? "oauth.request" : "oauth.token", context: ServiceContext.current ?? .topLevel,
            ofKind: .client)
        defer { span.end() }
        span.attributes["http.request.method"] = request.method.rawValue
        span.attributes["server.address"] = request.url?.host ?? ""
        span.attributes["url.path"] = request.url?.path ?? "" // never the query: codes and states travel there
        if let grant { span.attributes["oauth.grant_type"] = grant }
        let started = ContinuousClock.now
        var outcome = "unreachable"
        defer {
            if let grant {
                Counter(
                    label: "moose_token_requests_total", dimensions: [("grant", grant), ("outcome", outcome)],
                    factory: factory
                ).increment()
                let elapsed = ContinuousClock.now - started
                CoreMetrics.Timer(
                    label: "moose_token_request_duration_seconds", dimensions: [("grant", grant)], factory: factory
                )
                .recordNanoseconds(
                    elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
            } else {
                Counter(label: "moose_provider_requests_total", dimensions: [("outcome", outcome)], factory: factory)
                    .increment()
            }
        }
        do {
            let response = try await base.send(request)
            let code = response.status.code
            span.attributes["http.response.status_code"] = code
            if code == 404, request.method == .get, (request.url?.path ?? "").contains("/.well-known/") {
                outcome = "not_found" // a discovery probe that found nothing: not a refusal, not a failure
            } else {
                outcome = code < 400 ? "ok" : (code >= 500 || code == 429) ? "unavailable" : "refused"
                if code >= 400 {
                    span.attributes["error.type"] = Self.errorType(of: response)
                    span.setStatus(SpanStatus(code: .error))
                }
            }
            return response
        } catch {
            outcome = "unreachable"
            // The error's kind only: a transport message may quote a URL with its query.
            span.attributes["error.type"] =
                (error as? HTTPRequestError)?.code.description ?? String(describing: type(of: error))
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }

    /// A failed answer's `error.type`: its OAuth `error` when that is a registered code (from a JSON
    /// body's `error` member, else a `WWW-Authenticate` challenge's `error` parameter), else its status
    /// code. Never free text: a provider's own `error` value could carry anything.
    static func errorType(of response: APIResponse) -> String {
        if response.body.count <= 16 << 10, let body = try? JSONDecoder().decode(ErrorBody.self, from: response.body),
            let error = body.error, oauthErrors.contains(error)
        {
            return error
        }
        if let challenge = response.head.headerFields[.wwwAuthenticate], let error = challengeError(challenge),
            oauthErrors.contains(error)
        {
            return error
        }
        return String(response.status.code)
    }

    /// An OAuth error answer's `error` member (RFC 6749 §5.2); any other member is ignored.
    private struct ErrorBody: Decodable { let error: String? }

    /// The `error` auth-param of a challenge (RFC 6750 §3: `Bearer error="invalid_token", …`), as
    /// written; `nil` when there is none.
    static func challengeError(_ challenge: String) -> String? {
        for part in challenge.prefix(4096).split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
        where part.hasPrefix("error=") {
            return String(part.dropFirst(6).drop { $0 == "\"" }.prefix { $0.isASCII && ($0.isLetter || $0 == "_") })
        }
        return nil
    }

    /// The OAuth error codes that may become `error.type`: those the IANA "OAuth Extensions Error
    /// Registry" and the specifications Moose speaks define (RFC 6749 §4.1.2.1/§5.2, RFC 6750 §3,
    /// RFC 7009, RFC 7591, RFC 8628 §3.5, RFC 8707, RFC 9396, RFC 9449, OIDC Core §3.1.2.6).
    static let oauthErrors: Set<String> = [
        "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type",
        "invalid_scope",
        "access_denied", "unsupported_response_type", "server_error", "temporarily_unavailable",
        "invalid_token", "insufficient_scope", "unsupported_token_type",
        "invalid_redirect_uri", "invalid_client_metadata", "invalid_software_statement",
        "unapproved_software_statement",
        "authorization_pending", "slow_down", "expired_token", "invalid_target",
        "invalid_dpop_proof", "use_dpop_nonce", "invalid_authorization_details",
        "interaction_required", "login_required", "account_selection_required", "consent_required",
        "invalid_request_uri",
        "invalid_request_object", "request_not_supported", "request_uri_not_supported", "registration_not_supported"
    ]

    /// The grant a token request names, as a bounded label; `nil` for anything that is not a token request.
    static func grant(of request: APIRequest) -> String? {
        guard request.method == .post, let body = request.body, body.count <= 256 << 10 else { return nil }
        for pair in body.split(separator: UInt8(ascii: "&")) where pair.starts(with: Array("grant_type=".utf8)) {
            // Form-decoded (%XX, +), on bytes: only the known grant names matter.
            var bytes: [UInt8] = []
            var rest = pair.dropFirst(11)[...]
            while let byte = rest.popFirst() {
                if byte == UInt8(ascii: "%"), rest.count >= 2,
                    let value = UInt8(String(decoding: rest.prefix(2), as: UTF8.self), radix: 16)
                {
                    bytes.append(value)
                    rest = rest.dropFirst(2)
                } else {
                    bytes.append(byte == UInt8(ascii: "+") ? 0x20 : byte)
                }
            }
            let value = String(decoding: bytes, as: UTF8.self)
            switch value {
            case "authorization_code", "refresh_token", "client_credentials", "password": return value
            case "urn:ietf:params:oauth:grant-type:device_code": return "device_code"
            case TokenExchangeFlow.grantType: return "token_exchange"
            case JWTBearerFlow.grantType: return "jwt_bearer"
            default: return "other"
            }
        }
        return nil
    }
}

/// Counts a coordinator's events in swift-metrics for as long as the returned task runs:
/// `moose_refreshes_total` by `outcome` (`ok` for a refresh made here or tokens another process's
/// refresh stored; the failure's `OAuthError` code in snake_case — `invalid_client`, `transient`,
/// `invalid_response`… — or `needs_login` when the refresh token was refused; a call refused before any
/// grant, such as `refreshLimit`, counts none),
/// `moose_logouts_total`, and the single flight's steps (`RefreshCoordinator.activity`) in
/// `moose_single_flight_total` by `outcome` — `joined` (waited for a refresh already running in this
/// process), `read` (the storage held a fresh token: another process's or machine's refresh), `granted`
/// (this process went to the provider). Many callers and one `granted` is the single flight working.
/// Pair it with `ObservedSessionStorage` for the storage's operations.
public enum CoordinatorMetrics {
    /// Starts counting `coordinator`'s events; cancel the task to stop.
    @discardableResult
    public static func record(_ coordinator: RefreshCoordinator, metrics: (any MetricsFactory)? = nil) -> Task<
        Void, Never
    > {
        let factory = metrics ?? MetricsSystem.factory
        let events = coordinator.events
        let activity = coordinator.activity
        return Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await event in events {
                        switch event {
                        case .refreshed:
                            Counter(label: "moose_refreshes_total", dimensions: [("outcome", "ok")], factory: factory)
                                .increment()
                        case .refreshFailed(let error):
                            Counter(
                                label: "moose_refreshes_total",
                                dimensions: [("outcome", snakeCase(error.code.description))], factory: factory
                            )
                            .increment()
                        case .needsReauthentication:
                            Counter(
                                label: "moose_refreshes_total", dimensions: [("outcome", "needs_login")],
                                factory: factory
                            ).increment()
                        case .loggedOut: Counter(label: "moose_logouts_total", factory: factory).increment()
                        }
                    }
                }
                group.addTask {
                    for await step in activity {
                        let outcome =
                            switch step {
                            case .joined: "joined"
                            case .read: "read"
                            case .granted: "granted"
                            }
                        Counter(
                            label: "moose_single_flight_total", dimensions: [("outcome", outcome)], factory: factory
                        ).increment()
                    }
                }
            }
        }
    }
}

/// `invalidGrant` → `invalid_grant`, `invalidIDToken` → `invalid_id_token`: the one case style of
/// every label value (Prometheus' and OpenTelemetry's conventions).
func snakeCase(_ name: String) -> String {
    let characters = Array(name)
    var result = ""
    for (index, character) in characters.enumerated() {
        if character.isUppercase, index > 0 {
            let previous = characters[index - 1]
            let next = index + 1 < characters.count ? characters[index + 1] : nil
            // A word starts at a capital after a small letter or digit, or at the last capital of an
            // acronym that a small letter follows (`IDToken` → `id_token`).
            if previous.isLowercase || previous.isNumber || (previous.isUppercase && next?.isLowercase == true) {
                result.append("_")
            }
        }
        result.append(contentsOf: character.lowercased())
    }
    return result
}
#endif
