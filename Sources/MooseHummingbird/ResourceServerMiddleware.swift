#if MooseHummingbird
public import Hummingbird
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

    /// A middleware verifying with `server`; `publicBaseURL` has no trailing slash.
    public init(server: ResourceServer, publicBaseURL: String, requiredScopes: [String] = []) {
        self.server = server
        self.publicBaseURL = publicBaseURL
        self.requiredScopes = requiredScopes
    }

    /// Verifies, then runs `next` with `context.principal` set; a refusal is answered here.
    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        // Repeated fields are joined with commas (RFC 9110 §5.3), which the verifier refuses as malformed.
        let authorization = request.headers[values: .authorization]
        let dpop = request.headers[values: .dpop]
        let principal: VerifiedPrincipal
        do {
            principal = try await server.verify(
                authorizationHeader: authorization.isEmpty ? nil : authorization.joined(separator: ", "),
                dpopHeader: dpop.isEmpty ? nil : dpop.joined(separator: ", "),
                method: request.method.rawValue, url: publicBaseURL + request.uri.path,
                requiredScopes: requiredScopes)
        } catch {
            return Self.response(for: error)
        }
        var context = context
        context.principal = principal
        var response = try await next(request, context)
        if let nonce = await server.currentNonce() { response.headers[.dpopNonce] = nonce }
        return response
    }

    /// The answer to a refusal: its status and headers, and an empty body.
    static func response(for refusal: ResourceServerRefusal) -> Response {
        var headers = HTTPFields()
        for header in refusal.headers {
            if let name = HTTPField.Name(header.name) { headers.append(HTTPField(name: name, value: header.value)) }
        }
        return Response(status: HTTPResponse.Status(code: refusal.status), headers: headers)
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
