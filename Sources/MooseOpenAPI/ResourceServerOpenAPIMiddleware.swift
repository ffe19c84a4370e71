#if MooseOpenAPI
public import HTTPTypes
public import Logging
public import MooseResourceServer
public import OpenAPIRuntime
import MooseHTTP

/// The caller that `ResourceServerOpenAPIMiddleware` verified for the request being handled: a task-local
/// value, set while the generated server's handler for that request runs, `nil` outside it (and for the
/// middleware's `publicOperations`).
///
/// ```swift
/// func listItems(_ input: Operations.ListItems.Input) async throws -> Operations.ListItems.Output {
///     guard let caller = ResourceServerPrincipal.current else { return .unauthorized(.init()) }
///     return .ok(.init(body: .json(items(ownedBy: caller.subject))))
/// }
/// ```
public enum ResourceServerPrincipal {
    /// The verified caller of the current request (subject, client, scopes, claims, confirmation).
    /// Only what the middleware verified is ever stored here.
    @TaskLocal public static var current: VerifiedPrincipal?
}

/// A swift-openapi-runtime `ServerMiddleware` for resource servers: every operation behind it needs an
/// access token (Bearer or DPoP, verified by MooseResourceServer's `ResourceServer`) granting the scopes
/// that operation requires; otherwise the middleware answers with the refusal's status,
/// `WWW-Authenticate` challenges (RFC 6750 §3, RFC 9449 §7.1), `DPoP-Nonce` and `Cache-Control:
/// no-store`, an empty body, and the handler never runs. An accepted request's handler runs with
/// `ResourceServerPrincipal.current` set.
///
/// ```swift
/// let middleware = ResourceServerOpenAPIMiddleware(
///     server: server, publicBaseURL: "https://api.example.com",
///     requiredScopes: ["api.read"],                                   // every operation not named below
///     scopesByOperation: ["deleteItem": ["api.read", "api.write"]],  // operationId → its scopes
///     publicOperations: ["getHealth"])                                // no token asked for
/// try handler.registerHandlers(on: transport, serverURL: URL(string: "/")!, middlewares: [middleware])
/// ```
///
/// - **Scopes** are per `operationId`: the closure (or the dictionary, falling back to `requiredScopes`)
///   says what each needs; an operation missing from a dictionary still needs a token.
/// - **URL.** A DPoP proof's `htu` names the URL the client addressed, which behind a proxy is not the
///   one this process sees: the middleware verifies against `publicBaseURL` + the request's path.
/// - **Order.** In `middlewares:`, the first is outermost: put anything that needs the caller after it.
/// - **Refusals** are logged at `refusalLogLevel` (`info` by default) on `logger` as `access token refused`
///   with their code, status and reason, the method and the path — never the token, the proof or the
///   query — and handed to `onRefusal`, for a counter.
/// - **Nonces.** With server nonces on (`ResourceServer(nonces:)`), successful responses carry the
///   current `DPoP-Nonce` too (RFC 9449 §9).
public struct ResourceServerOpenAPIMiddleware: ServerMiddleware {
    /// The verifier.
    public let server: ResourceServer
    /// The scheme and authority clients address (`https://api.example.com`), with no trailing slash.
    public let publicBaseURL: String
    /// Operations (`operationId`s) passed through untouched: no token asked for, no principal set.
    public let publicOperations: Set<String>
    /// Where refusals are logged.
    public let logger: Logger
    /// The level refusals are logged at.
    public let refusalLogLevel: Logger.Level
    /// Called with every refusal (after it is logged), to count them: a swift-metrics `Counter` keyed
    /// by `refusal.code`, for one.
    public let onRefusal: (@Sendable (ResourceServerRefusal) -> Void)?
    private let scopes: @Sendable (_ operationID: String) -> [String]

    /// The label of the logger refusals go to when none is given.
    public static let defaultLoggerLabel = "moose.resource-server"

    /// A middleware whose operations need the scopes `requiredScopes(operationID)` returns (an empty
    /// list: a valid token, no particular scope).
    ///
    /// - Parameters:
    ///   - server: the verifier.
    ///   - publicBaseURL: the scheme and authority clients address, without a trailing slash.
    ///   - publicOperations: operations passed through without a token.
    ///   - logger: where refusals are logged; default: a `Logger` labelled `defaultLoggerLabel` (the
    ///     process's `LoggingSystem` decides where it writes).
    ///   - refusalLogLevel: the level refusals are logged at; default `info`.
    ///   - onRefusal: called with every refusal, to count them; default: none.
    ///   - requiredScopes: the scopes an operation (by `operationId`) needs.
    public init(
        server: ResourceServer, publicBaseURL: String, publicOperations: Set<String> = [],
        logger: Logger = Logger(label: defaultLoggerLabel), refusalLogLevel: Logger.Level = .info,
        onRefusal: (@Sendable (ResourceServerRefusal) -> Void)? = nil,
        requiredScopes: @escaping @Sendable (_ operationID: String) -> [String]
    ) {
        self.server = server
        self.publicBaseURL = publicBaseURL
        self.publicOperations = publicOperations
        self.logger = logger
        self.refusalLogLevel = refusalLogLevel
        self.onRefusal = onRefusal
        self.scopes = requiredScopes
    }

    /// A middleware whose operations need `scopesByOperation[operationID]`, else `requiredScopes`.
    ///
    /// - Parameters:
    ///   - server: the verifier.
    ///   - publicBaseURL: the scheme and authority clients address, without a trailing slash.
    ///   - requiredScopes: the scopes of every operation `scopesByOperation` does not name.
    ///   - scopesByOperation: `operationId` → the scopes that operation needs.
    ///   - publicOperations: operations passed through without a token.
    ///   - logger: where refusals are logged; default: a `Logger` labelled `defaultLoggerLabel`.
    ///   - refusalLogLevel: the level refusals are logged at; default `info`.
    ///   - onRefusal: called with every refusal, to count them; default: none.
    public init(
        server: ResourceServer, publicBaseURL: String, requiredScopes: [String] = [],
        scopesByOperation: [String: [String]] = [:], publicOperations: Set<String> = [],
        logger: Logger = Logger(label: defaultLoggerLabel), refusalLogLevel: Logger.Level = .info,
        onRefusal: (@Sendable (ResourceServerRefusal) -> Void)? = nil
    ) {
        self.init(
            server: server, publicBaseURL: publicBaseURL, publicOperations: publicOperations, logger: logger,
            refusalLogLevel: refusalLogLevel, onRefusal: onRefusal
        ) { operationID in
            scopesByOperation[operationID] ?? requiredScopes
        }
    }

    /// The scopes `operationID` needs.
    public func requiredScopes(for operationID: String) -> [String] { scopes(operationID) }

    /// Verifies, then runs `next` with `ResourceServerPrincipal.current` set; a refusal is answered here.
    public func intercept(
        _ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)
    )
        async throws -> (HTTPResponse, HTTPBody?)
    {
        if publicOperations.contains(operationID) { return try await next(request, body, metadata) }
        // Repeated fields are joined with commas (RFC 9110 §5.3), which the verifier refuses as malformed.
        let authorization = request.headerFields[values: .authorization]
        let dpop = request.headerFields[values: .dpop]
        // The query is no part of a proof's htu (RFC 9449 §4.3): the path alone.
        let path =
            (request.path ?? "/").split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(
                String.init) ?? "/"
        let principal: VerifiedPrincipal
        do {
            principal = try await server.verify(
                authorizationHeader: authorization.isEmpty ? nil : authorization.joined(separator: ", "),
                dpopHeader: dpop.isEmpty ? nil : dpop.joined(separator: ", "),
                method: request.method.rawValue, url: publicBaseURL + path,
                requiredScopes: scopes(operationID))
        } catch {
            logger.log(
                level: refusalLogLevel, "access token refused",
                metadata: error.logFields(method: request.method.rawValue, path: path).mapValues { .string($0) })
            onRefusal?(error)
            return (Self.response(for: error), nil)
        }
        let (answer, responseBody) = try await ResourceServerPrincipal.$current.withValue(principal) {
            try await next(request, body, metadata)
        }
        var response = answer
        if let nonce = await server.currentNonce() { response.headerFields[.dpopNonce] = nonce }
        return (response, responseBody)
    }

    /// The answer to a refusal: its status and headers (`WWW-Authenticate`, `DPoP-Nonce`, `Cache-Control`).
    static func response(for refusal: ResourceServerRefusal) -> HTTPResponse {
        var fields = HTTPFields()
        for header in refusal.headers {
            if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
        }
        return HTTPResponse(status: HTTPResponse.Status(code: refusal.status), headerFields: fields)
    }
}
#endif
