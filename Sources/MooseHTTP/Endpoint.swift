#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// One query parameter: a single value or an array (encoded per `ArrayEncoding`).
public struct QueryItem: Sendable, Hashable {
    /// The name.
    public var name: String
    /// The values (one for a scalar parameter).
    public var values: [String]
    /// Whether this is an array parameter.
    public var isArray: Bool

    /// `name=value`
    public init(_ name: String, _ value: String) {
        self.name = name
        values = [value]
        isArray = false
    }

    /// An array parameter.
    public init(_ name: String, array values: [String]) {
        self.name = name
        self.values = values
        isArray = true
    }
}

/// How array query parameters are written.
public enum ArrayEncoding: Sendable {
    /// `ids=1&ids=2` (the default; what most servers read)
    case repeatedKeys
    /// `ids=1,2`
    case commaSeparated
    /// `ids[]=1&ids[]=2` (PHP, Rails)
    case brackets
}

/// A request body.
public enum EndpointBody: Sendable {
    /// No body.
    case none
    /// JSON from an `Encodable` value (`Content-Type: application/json`).
    case json(any Encodable & Sendable)
    /// `application/x-www-form-urlencoded` fields, in order.
    case form([(String, String)])
    /// `multipart/form-data`; file parts are streamed from disk.
    case multipart(MultipartForm)
    /// Raw bytes with their media type.
    case data(Data, MIMEType)
    /// A file's bytes, streamed from disk.
    case file(URL, MIMEType)
}

/// One API operation: everything needed to build a request, with defaults for all but `baseURL`,
/// `path` and (for anything but GET) `method`. Usually one enum per API.
///
/// ```swift
/// enum UsersAPI: Endpoint {
///     case user(id: String)
///     case search(tags: [String])
///     case create(NewUser)
///
///     var baseURL: URL { URL(string: "https://api.example.com/v1")! }
///     var path: String {
///         switch self {
///         case .user: "/users/{id}"
///         case .search: "/users"
///         case .create: "/users"
///         }
///     }
///     var pathParameters: [String: String] { if case .user(let id) = self { ["id": id] } else { [:] } }
///     var method: HTTPRequest.Method { if case .create = self { .post } else { .get } }
///     var query: [QueryItem] { if case .search(let tags) = self { [QueryItem("tag", array: tags)] } else { [] } }
///     var body: EndpointBody { if case .create(let user) = self { .json(user) } else { .none } }
///     var requiresAuthentication: Bool { true }
/// }
/// ```
public protocol Endpoint: Sendable {
    /// The API's base URL (`https://api.example.com/v1`).
    var baseURL: URL { get }
    /// The path, appended to the base URL, with `{name}` placeholders for `pathParameters`.
    var path: String { get }
    /// Values for the path's placeholders; each is percent-encoded as one path segment.
    var pathParameters: [String: String] { get }
    /// The method (default GET).
    var method: HTTPRequest.Method { get }
    /// Query parameters.
    var query: [QueryItem] { get }
    /// How array query parameters are written (default repeated keys).
    var arrayEncoding: ArrayEncoding { get }
    /// Extra header fields.
    var headerFields: HTTPFields { get }
    /// The body.
    var body: EndpointBody { get }
    /// A timeout for this request, overriding the client's (nil: the client's).
    var timeout: TimeInterval? { get }
    /// Whether an authentication interceptor must attach credentials.
    var requiresAuthentication: Bool { get }
    /// Whether the request may be retried even though its method is not idempotent.
    var isRetryable: Bool { get }
    /// Turns an error response into the API's own error type (nil: the generic `HTTPRequestError`).
    func serverError(for response: APIResponse) -> (any Error)?
}

extension Endpoint {
    public var pathParameters: [String: String] { [:] }
    public var method: HTTPRequest.Method { .get }
    public var query: [QueryItem] { [] }
    public var arrayEncoding: ArrayEncoding { .repeatedKeys }
    public var headerFields: HTTPFields { [:] }
    public var body: EndpointBody { .none }
    public var timeout: TimeInterval? { nil }
    public var requiresAuthentication: Bool { false }
    public var isRetryable: Bool { method.isIdempotent }
    public func serverError(for response: APIResponse) -> (any Error)? { nil }
}

/// Decodes an API's JSON error body into `E` when the status is not 2xx: a ready-made
/// `serverError(for:)` for the common case.
///
/// ```swift
/// struct APIError: Error, Decodable { let code: String; let message: String }
/// func serverError(for response: APIResponse) -> (any Error)? { decodeServerError(APIError.self, from: response) }
/// ```
public func decodeServerError<E: Error & Decodable>(
    _ type: E.Type, from response: APIResponse,
    decoder: JSONDecoder = JSONDecoder()
) -> E? {
    try? decoder.decode(E.self, from: response.body)
}
