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
/// (`authorization_code`, `refresh_token`, `client_credentials`, `device_code`, `token_exchange`,
/// `jwt_bearer`, else `other`) and `outcome` (`ok`, `refused` for 4xx, `unavailable` for 5xx and 429,
/// `unreachable`), with its duration in `moose_token_request_duration`; any other request (discovery,
/// JWKS, UserInfo, revocation) is span `oauth.request` and counts in `moose_provider_requests_total`
/// by `outcome`. No token, code, secret or query string ever becomes an attribute or a dimension:
/// spans carry the method, the host, the path, the grant and the status.
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
        let span = tracer.startSpan(grant == nil ? "oauth.request" : "oauth.token", context: ServiceContext.current ?? .topLevel, ofKind: .client)
        defer { span.end() }
        span.attributes["http.request.method"] = request.method.rawValue
        span.attributes["server.address"] = request.url?.host ?? ""
        span.attributes["url.path"] = request.url?.path ?? ""   // never the query: codes and states travel there
        if let grant { span.attributes["oauth.grant_type"] = grant }
        let started = ContinuousClock.now
        var outcome = "unreachable"
        defer {
            if let grant {
                Counter(label: "moose_token_requests_total", dimensions: [("grant", grant), ("outcome", outcome)], factory: factory).increment()
                let elapsed = ContinuousClock.now - started
                CoreMetrics.Timer(label: "moose_token_request_duration", dimensions: [("grant", grant)], factory: factory)
                    .recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
            } else {
                Counter(label: "moose_provider_requests_total", dimensions: [("outcome", outcome)], factory: factory).increment()
            }
        }
        do {
            let response = try await base.send(request)
            let code = response.status.code
            span.attributes["http.response.status_code"] = code
            outcome = code < 400 ? "ok" : (code >= 500 || code == 429) ? "unavailable" : "refused"
            if code >= 400 { span.setStatus(SpanStatus(code: .error)) }
            return response
        } catch {
            outcome = "unreachable"
            // The error's kind only: a transport message may quote a URL with its query.
            span.attributes["error.type"] = (error as? HTTPRequestError)?.code.description ?? String(describing: type(of: error))
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }

    /// The grant a token request names, as a bounded label; `nil` for anything that is not a token request.
    static func grant(of request: APIRequest) -> String? {
        guard request.method == .post, let body = request.body, body.count <= 256 << 10 else { return nil }
        for pair in body.split(separator: UInt8(ascii: "&")) where pair.starts(with: Array("grant_type=".utf8)) {
            // Form-decoded (%XX, +), on bytes: only the known grant names matter.
            var bytes: [UInt8] = []
            var rest = pair.dropFirst(11)[...]
            while let byte = rest.popFirst() {
                if byte == UInt8(ascii: "%"), rest.count >= 2, let value = UInt8(String(decoding: rest.prefix(2), as: UTF8.self), radix: 16) {
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
/// `moose_refreshes_total` by `outcome` (`ok`, the failure's code, `needs_login`),
/// `moose_logouts_total`, and the single flight's steps (`RefreshCoordinator.activity`) in
/// `moose_single_flight_total` by `outcome` — `joined` (waited for a refresh already running in this
/// process), `read` (the storage held a fresh token: another process's or machine's refresh), `granted`
/// (this process went to the provider). Many callers and one `granted` is the single flight working.
/// Pair it with `ObservedSessionStorage` for the storage's operations.
public enum CoordinatorMetrics {
    /// Starts counting `coordinator`'s events; cancel the task to stop.
    @discardableResult
    public static func record(_ coordinator: RefreshCoordinator, metrics: (any MetricsFactory)? = nil) -> Task<Void, Never> {
        let factory = metrics ?? MetricsSystem.factory
        let events = coordinator.events
        let activity = coordinator.activity
        return Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await event in events {
                        switch event {
                        case .refreshed: Counter(label: "moose_refreshes_total", dimensions: [("outcome", "ok")], factory: factory).increment()
                        case .refreshFailed(let error):
                            Counter(label: "moose_refreshes_total", dimensions: [("outcome", error.code.description)], factory: factory).increment()
                        case .needsReauthentication:
                            Counter(label: "moose_refreshes_total", dimensions: [("outcome", "needs_login")], factory: factory).increment()
                        case .loggedOut: Counter(label: "moose_logouts_total", factory: factory).increment()
                        }
                    }
                }
                group.addTask {
                    for await step in activity {
                        let outcome = switch step {
                        case .joined: "joined"
                        case .read: "read"
                        case .granted: "granted"
                        }
                        Counter(label: "moose_single_flight_total", dimensions: [("outcome", outcome)], factory: factory).increment()
                    }
                }
            }
        }
    }
}
#endif
