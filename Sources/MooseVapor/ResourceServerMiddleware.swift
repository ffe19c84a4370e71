#if MooseVapor
public import Logging
public import MooseResourceServer
public import Vapor

/// The caller verified by `ResourceServerMiddleware`, as Vapor's `req.auth` holds it.
///
/// ```swift
/// let principal = try req.auth.require(AuthenticatedPrincipal.self).verified
/// ```
public struct AuthenticatedPrincipal: Authenticatable, Sendable {
    /// What the verifier established: subject, client, scopes, the DPoP key's thumbprint, the claims.
    public let verified: VerifiedPrincipal

    /// Wraps a verified principal.
    public init(_ verified: VerifiedPrincipal) { self.verified = verified }
}

extension Request {
    /// The caller verified by `ResourceServerMiddleware`; `nil` outside routes behind it.
    public var verifiedPrincipal: VerifiedPrincipal? { auth.get(AuthenticatedPrincipal.self)?.verified }
}

/// Vapor 4 middleware: every request behind it must carry a valid access token (Bearer or DPoP)
/// with `requiredScopes`; otherwise it is answered by the middleware with the refusal's status,
/// `WWW-Authenticate` challenges and `DPoP-Nonce` (RFC 6750 §3, RFC 9449 §7.1), and the route never runs.
/// It authenticates and guards at once: the verified caller is in `req.auth` as an `AuthenticatedPrincipal`.
///
/// Each refusal is logged at `refusalLogLevel` (`info` by default) on `logger` (by default `req.logger`)
/// with its code, status and reason, the method and the path — never the token, the proof or the query —
/// and handed to `onRefusal`, for a counter.
///
/// ```swift
/// let items = app.grouped(ResourceServerMiddleware(server: server, publicBaseURL: "https://api.example.com",
///                                                  requiredScopes: ["api.read"]))
/// items.get("items") { req in "hello \(req.verifiedPrincipal?.subject ?? "")" }
/// ```
public struct ResourceServerMiddleware: AsyncMiddleware {
    /// The verifier.
    public let server: ResourceServer
    /// The scheme and authority clients address (`https://api.example.com`): a proof's `htu` names
    /// the URL the client used, which behind a proxy is not the one this process sees.
    public let publicBaseURL: String
    /// Scopes every request behind the middleware needs.
    public let requiredScopes: [String]
    /// Where refusals are logged; `nil`: the request's logger.
    public let logger: Logger?
    /// The level refusals are logged at.
    public let refusalLogLevel: Logger.Level
    /// Called with every refusal (after it is logged), to count them: a swift-metrics `Counter` keyed
    /// by `refusal.code`, for one.
    public let onRefusal: (@Sendable (ResourceServerRefusal) -> Void)?

    /// A middleware verifying with `server`.
    ///
    /// - Parameters:
    ///   - server: the verifier.
    ///   - publicBaseURL: the scheme and authority clients address, without a trailing slash.
    ///   - requiredScopes: scopes every request behind the middleware needs.
    ///   - logger: where refusals are logged; `nil` (the default): the request's logger.
    ///   - refusalLogLevel: the level refusals are logged at; default `info`.
    ///   - onRefusal: called with every refusal, to count them; default: none.
    public init(
        server: ResourceServer, publicBaseURL: String, requiredScopes: [String] = [], logger: Logger? = nil,
        refusalLogLevel: Logger.Level = .info, onRefusal: (@Sendable (ResourceServerRefusal) -> Void)? = nil
    ) {
        self.server = server
        self.publicBaseURL = publicBaseURL
        self.requiredScopes = requiredScopes
        self.logger = logger
        self.refusalLogLevel = refusalLogLevel
        self.onRefusal = onRefusal
    }

    /// Verifies, then runs `next` with the principal in `request.auth`; a refusal is answered here.
    public func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
        let principal: VerifiedPrincipal
        do {
            principal = try await verify(request)
        } catch {
            record(error, of: request)
            return Self.response(for: error)
        }
        request.auth.login(AuthenticatedPrincipal(principal))
        let response = try await next.respond(to: request)
        if let nonce = await server.currentNonce() { response.headers.replaceOrAdd(name: "DPoP-Nonce", value: nonce) }
        return response
    }

    /// The request's credentials verified against `publicBaseURL` + its path (without the query).
    func verify(_ request: Request) async throws(ResourceServerRefusal) -> VerifiedPrincipal {
        // Repeated fields are joined with commas (RFC 9110 §5.3), which the verifier refuses as malformed.
        let authorization = request.headers[.authorization]
        let dpop = request.headers["DPoP"]
        return try await server.verify(
            authorizationHeader: authorization.isEmpty ? nil : authorization.joined(separator: ", "),
            dpopHeader: dpop.isEmpty ? nil : dpop.joined(separator: ", "),
            method: request.method.rawValue, url: publicBaseURL + request.url.path,
            requiredScopes: requiredScopes)
    }

    /// Logs `refusal` (never the token, the proof or the query) and hands it to `onRefusal`.
    func record(_ refusal: ResourceServerRefusal, of request: Request) {
        (logger ?? request.logger).log(
            level: refusalLogLevel, "access token refused",
            metadata: refusal.logFields(method: request.method.rawValue, path: request.url.path).mapValues {
                .string($0)
            })
        onRefusal?(refusal)
    }

    /// The answer to a refusal: its status and headers, and an empty body.
    static func response(for refusal: ResourceServerRefusal) -> Response {
        var headers = HTTPHeaders()
        for header in refusal.headers { headers.add(name: header.name, value: header.value) }
        return Response(status: HTTPResponseStatus(statusCode: refusal.status), headers: headers)
    }
}

/// Vapor's authenticator shape: a valid access token (Bearer or DPoP) logs its caller in
/// (`AuthenticatedPrincipal` in `req.auth`); any other request passes through unauthenticated, as Vapor's
/// authenticators do, for routes that serve anonymous callers too or that take other credentials as well.
/// A refusal's challenges are not sent: behind `AuthenticatedPrincipal.guardMiddleware()` a request
/// without a principal gets a bare 401. Routes that need a token should use `ResourceServerMiddleware`.
///
/// ```swift
/// let optional = app.grouped(ResourceServerAuthenticator(server: server, publicBaseURL: "https://api.example.com"))
/// optional.get("greeting") { req in "hello \(req.verifiedPrincipal?.subject ?? "stranger")" }
/// ```
public struct ResourceServerAuthenticator: AsyncRequestAuthenticator {
    /// The verifier.
    public let server: ResourceServer
    /// The scheme and authority clients address, as for `ResourceServerMiddleware`.
    public let publicBaseURL: String
    /// Scopes a token needs to log its caller in.
    public let requiredScopes: [String]
    /// Where refusals are logged; `nil`: the request's logger.
    public let logger: Logger?
    /// The level refusals of requests that carried credentials are logged at (a request without any is
    /// not logged: anonymous callers are expected here).
    public let refusalLogLevel: Logger.Level
    /// Called with every refusal of a request that carried credentials, to count them.
    public let onRefusal: (@Sendable (ResourceServerRefusal) -> Void)?

    /// An authenticator verifying with `server`.
    ///
    /// - Parameters:
    ///   - server: the verifier.
    ///   - publicBaseURL: the scheme and authority clients address, without a trailing slash.
    ///   - requiredScopes: scopes a token needs to log its caller in.
    ///   - logger: where refusals are logged; `nil` (the default): the request's logger.
    ///   - refusalLogLevel: the level refusals are logged at; default `info`.
    ///   - onRefusal: called with every refusal of a request with credentials; default: none.
    public init(
        server: ResourceServer, publicBaseURL: String, requiredScopes: [String] = [], logger: Logger? = nil,
        refusalLogLevel: Logger.Level = .info, onRefusal: (@Sendable (ResourceServerRefusal) -> Void)? = nil
    ) {
        self.server = server
        self.publicBaseURL = publicBaseURL
        self.requiredScopes = requiredScopes
        self.logger = logger
        self.refusalLogLevel = refusalLogLevel
        self.onRefusal = onRefusal
    }

    /// Logs in the caller of a request whose credentials verify; leaves any other request as it is
    /// (a refusal of credentials it carried is logged).
    public func authenticate(request: Request) async throws {
        let middleware = ResourceServerMiddleware(
            server: server, publicBaseURL: publicBaseURL, requiredScopes: requiredScopes, logger: logger,
            refusalLogLevel: refusalLogLevel, onRefusal: onRefusal)
        do {
            request.auth.login(AuthenticatedPrincipal(try await middleware.verify(request)))
        } catch ResourceServerRefusal.missingCredentials {
            return
        } catch {
            middleware.record(error, of: request)
        }
    }
}

extension ProtectedResourceDocument {
    /// Serves this document (RFC 9728 §3) at its `wellKnownPath` on `routes`, as `application/json`.
    /// Does nothing when `resource` is not an absolute http(s) URL.
    public func addRoute(to routes: any RoutesBuilder) {
        guard let path = wellKnownPath else { return }
        let json = self.json
        let components = path.split(separator: "/").map { PathComponent.constant(String($0)) }
        routes.get(components) { _ async -> Response in
            Response(
                status: .ok, headers: ["Content-Type": "application/json", "Cache-Control": "max-age=3600"],
                body: .init(string: json))
        }
    }
}
#endif
