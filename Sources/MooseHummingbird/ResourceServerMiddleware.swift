#if MooseHummingbird
public import Hummingbird
public import Logging
public import MooseResourceServer
import MooseHTTP
import NIOCore

/// A Hummingbird request context that carries the caller verified by `ResourceServerMiddleware`.
///
/// ```swift
/// struct APIContext: ResourceServerRequestContext {
///     var coreContext: CoreRequestContextStorage
///     var principal: VerifiedPrincipal?
///     init(source: Source) { coreContext = .init(source: source) }
/// }
/// ```
public protocol ResourceServerRequestContext: RequestContext {
    /// The verified caller; set by the middleware before any route behind it runs.
    var principal: VerifiedPrincipal? { get set }
}

/// Hummingbird 2 middleware: every request behind it must carry a valid access token (Bearer or DPoP)
/// with `requiredScopes`; otherwise it is answered by the middleware with the refusal's status,
/// `WWW-Authenticate` challenges and `DPoP-Nonce` (RFC 6750 §3, RFC 9449 §7.1), and the route never runs.
///
/// Each refusal is logged at `refusalLogLevel` (`info` by default) on `logger` (by default the request's
/// logger) with its code, status and reason, the method and the path — never the token, the proof or the
/// query — and handed to `onRefusal`, for a counter.
///
/// ```swift
/// let router = Router(context: APIContext.self)
/// router.group("items")
///     .add(middleware: ResourceServerMiddleware(server: server, publicBaseURL: "https://api.example.com",
///                                               requiredScopes: ["api.read"]))
///     .get { _, context in "hello \(context.principal?.subject ?? "")" }
/// ```
public struct ResourceServerMiddleware<Context: ResourceServerRequestContext>: RouterMiddleware {
    /// The verifier.
    public let server: ResourceServer
    /// The scheme and authority clients address (`https://api.example.com`): a proof's `htu` names
    /// the URL the client used, which behind a proxy is not the one this process sees.
    public let publicBaseURL: String
    /// Scopes every request behind the middleware needs.
    public let requiredScopes: [String]
    /// Where refusals are logged; `nil`: the request context's logger.
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
    ///   - logger: where refusals are logged; `nil` (the default): the request context's logger.
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

    /// Verifies, then runs `next` with `context.principal` set; a refusal is answered here.
    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        let principal: VerifiedPrincipal
        do {
            principal = try await server.verify(request, publicBaseURL: publicBaseURL, requiredScopes: requiredScopes)
        } catch {
            (logger ?? context.logger).log(
                level: refusalLogLevel, "access token refused",
                metadata: error.logFields(method: request.method.rawValue, path: request.uri.path).mapValues {
                    .string($0)
                })
            onRefusal?(error)
            return error.response
        }
        var context = context
        context.principal = principal
        var response = try await next(request, context)
        if let nonce = await server.currentNonce() { response.headers[.dpopNonce] = nonce }
        return response
    }

}

extension ResourceServer {
    /// Verifies a Hummingbird request's credentials: its `Authorization` and `DPoP` fields (repeated ones
    /// joined with commas, RFC 9110 §5.3, and so refused), its method, and `publicBaseURL` + its path as the
    /// URL a DPoP proof's `htu` must name. For a route that checks the token itself (the middleware does
    /// this for every route behind it).
    ///
    /// ```swift
    /// router.get("greeting") { request, _ -> Response in
    ///     do throws(ResourceServerRefusal) {
    ///         let caller = try await server.verify(request, publicBaseURL: "https://api.example.com")
    ///         return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: caller.subject)))
    ///     } catch {
    ///         return error.response
    ///     }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - request: the request.
    ///   - publicBaseURL: the scheme and authority clients address, without a trailing slash.
    ///   - requiredScopes: scopes the request needs.
    /// - Returns: the verified caller.
    /// - Throws: `ResourceServerRefusal`, as `verify(authorizationHeader:dpopHeader:method:url:requiredScopes:)`.
    public func verify(_ request: Request, publicBaseURL: String, requiredScopes: [String] = [])
        async throws(ResourceServerRefusal) -> VerifiedPrincipal
    {
        let authorization = request.headers[values: .authorization]
        let dpop = request.headers[values: .dpop]
        return try await verify(
            authorizationHeader: authorization.isEmpty ? nil : authorization.joined(separator: ", "),
            dpopHeader: dpop.isEmpty ? nil : dpop.joined(separator: ", "),
            method: request.method.rawValue, url: publicBaseURL + request.uri.path,
            requiredScopes: requiredScopes)
    }
}

extension ResourceServerRefusal {
    /// The Hummingbird answer to this refusal: its status, its headers (`WWW-Authenticate`, `DPoP-Nonce`,
    /// `Cache-Control: no-store`) and an empty body.
    public var response: Response {
        var fields = HTTPFields()
        for header in headers {
            if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
        }
        return Response(status: HTTPResponse.Status(code: status), headers: fields)
    }
}

extension ProtectedResourceDocument {
    /// Serves this document (RFC 9728 §3) at its `wellKnownPath` on `router`, as `application/json`.
    /// Does nothing when `resource` is not an absolute http(s) URL.
    public func addRoute<Context: RequestContext>(to router: Router<Context>) {
        guard let path = wellKnownPath else { return }
        let json = self.json
        router.get(RouterPath(path)) { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json", .cacheControl: "max-age=3600"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: json)))
        }
    }
}
#endif
