#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// A request Moose sends: swift-http-types' `HTTPRequest` (method, URL, header fields — the same
/// value swift-openapi-runtime, Hummingbird 2 and AsyncHTTPClient's `HTTPTypes` bridges use), plus
/// what that type leaves out on purpose: the body and the time allowed for the whole exchange.
///
/// ```swift
/// var request = APIRequest(url: URL(string: "https://api.example.com/v1/me")!)
/// request.headerFields[.accept] = "application/json"
/// let response = try await transport.send(request)
/// ```
///
/// Header values are `HTTPField` values: a line break or NUL in one is replaced by a space when the
/// field is made, so no value can start another header line.
public struct APIRequest: Sendable {
    /// Method, scheme, authority, path (with the query) and header fields.
    public var head: HTTPRequest
    /// The body, if any.
    public var body: Data?
    /// A file to stream as the body instead of `body` (uploads, multipart forms).
    public var bodyFile: URL?
    /// Whether `bodyFile` is a temporary file to delete once the request is done.
    public var removesBodyFileAfterUse = false
    /// The time allowed for the whole exchange, in seconds.
    public var timeout: TimeInterval

    /// A request for an absolute `http`/`https` URL.
    public init(
        method: HTTPRequest.Method = .get, url: URL, headerFields: HTTPFields = [:], body: Data? = nil,
        timeout: TimeInterval = 20
    ) {
        head = HTTPRequest(method: method, url: url, headerFields: headerFields)
        self.body = body
        self.timeout = timeout
    }

    /// A request from a swift-http-types head (what swift-openapi and Hummingbird hand around).
    public init(head: HTTPRequest, body: Data? = nil, timeout: TimeInterval = 20) {
        self.head = head
        self.body = body
        self.timeout = timeout
    }

    /// The method.
    public var method: HTTPRequest.Method {
        get { head.method }
        set { head.method = newValue }
    }

    /// The absolute URL, from the head's scheme, authority and path (nil only for a head that has
    /// none, which transports refuse as `invalidRequest`).
    public var url: URL? {
        get { head.url }
        set { head.url = newValue }
    }

    /// The header fields.
    public var headerFields: HTTPFields {
        get { head.headerFields }
        set { head.headerFields = newValue }
    }

    /// The URL for messages and logs: secret query values and userinfo replaced by `***`.
    public var redactedURL: String { url?.redactedForLogs ?? "(no URL)" }
}

extension HTTPRequest.Method {
    /// RFC 9110 §9.2.2: methods whose repetition has the same effect as one request.
    public var isIdempotent: Bool {
        switch self {
        case .get, .head, .put, .delete, .options, .trace: true
        default: false
        }
    }
}

extension HTTPFields {
    /// The fields as HTTP/1.1 header lines: one line per name, in first-seen order, repeated
    /// values combined the way swift-http-types reads them (`Cookie` crumbs with "; ", others with
    /// ", "). Transports that speak HTTP/1.1 (libcurl, URLSession) send these, so a `Cookie` set as
    /// one string — which `HTTPFields` splits into crumbs — arrives as one valid header again.
    package var http1Lines: [(name: String, value: String)] {
        var seen = Set<HTTPField.Name>()
        var lines: [(name: String, value: String)] = []
        for field in self where seen.insert(field.name).inserted {
            lines.append((field.name.rawName, self[field.name] ?? field.value))
        }
        return lines
    }
}
