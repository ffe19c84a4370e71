public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
public import MooseHTTP

/// The default `HTTPTransport`: URLSession (FoundationNetworking on Linux).
///
/// Kept in its own module so that programs that must start fast (the `moose` CLI) do not link
/// FoundationNetworking and libcurl's dependencies; they use `CurlTransport` instead.
///
/// ```swift
/// let client = HTTPClient(transport: URLSessionTransport(configuration: .init(userAgent: "my-app/1.0")))
/// ```
public final class URLSessionTransport: HTTPTransport, @unchecked Sendable {
    /// Settings for the session.
    public struct Configuration: Sendable {
        /// Time allowed between bytes of a request (default 20 s).
        public var requestTimeout: TimeInterval
        /// Time allowed for a whole exchange (default 40 s).
        public var resourceTimeout: TimeInterval
        /// Concurrent connections per host.
        public var maximumConnectionsPerHost: Int
        /// Headers added to every request (the request's own win).
        public var defaultHeaders: HTTPHeaders
        /// `User-Agent`.
        public var userAgent: String

        /// A configuration.
        public init(requestTimeout: TimeInterval = 20, resourceTimeout: TimeInterval = 40, maximumConnectionsPerHost: Int = 6,
                    defaultHeaders: HTTPHeaders = [:], userAgent: String = "Moose/0.1") {
            self.requestTimeout = requestTimeout
            self.resourceTimeout = resourceTimeout
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.defaultHeaders = defaultHeaders
            self.userAgent = userAgent
        }
    }

    // URLSession is thread-safe; the class holds only immutable references.
    private let session: URLSession
    private let delegate: NoRedirects
    /// The configuration in use.
    public let configuration: Configuration

    /// A transport with its own session. Redirects are not followed: the caller sees the 3xx.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = configuration.requestTimeout
        sessionConfiguration.timeoutIntervalForResource = configuration.resourceTimeout
        sessionConfiguration.httpMaximumConnectionsPerHost = configuration.maximumConnectionsPerHost
        sessionConfiguration.httpCookieStorage = nil
        sessionConfiguration.urlCache = nil
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        delegate = NoRedirects()
        session = URLSession(configuration: sessionConfiguration, delegate: delegate, delegateQueue: nil)
    }

    deinit { session.finishTasksAndInvalidate() }

    func urlRequest(for request: HTTPRequest) -> URLRequest {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method.rawValue
        urlRequest.timeoutInterval = request.timeout
        urlRequest.setValue(configuration.userAgent, forHTTPHeaderField: "User-Agent")
        for field in configuration.defaultHeaders where request.headers[field.name] == nil {
            urlRequest.setValue(field.value, forHTTPHeaderField: field.name)
        }
        for field in request.headers { urlRequest.addValue(field.value, forHTTPHeaderField: field.name) }
        return urlRequest
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try Task.checkCancellation()
        let urlRequest = urlRequest(for: request)
        do {
            let (data, response): (Data, URLResponse)
            if let file = request.bodyFile {
                (data, response) = try await session.upload(for: urlRequest, fromFile: file)
            } else if let body = request.body {
                (data, response) = try await session.upload(for: urlRequest, from: body)
            } else {
                (data, response) = try await session.data(for: urlRequest)
            }
            return try Self.response(response, body: data, for: request)
        } catch let error as URLError {
            throw Self.map(error, request)
        }
    }

    /// Downloads the response body to `destination`: URLSession streams it to a temporary file (never
    /// held in memory), which is then moved into place with mode 0600. `progress` gets (bytes, expected).
    public func download(_ request: HTTPRequest, to destination: URL,
                         progress: (@Sendable (Int64, Int64?) -> Void)? = nil) async throws -> HTTPResponse {
        try Task.checkCancellation()
        do {
            let (temporary, response) = try await session.download(for: urlRequest(for: request))
            try? FileManager.default.removeItem(at: destination)
            try FileManager.default.moveItem(at: temporary, to: destination)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: destination.path)
            let size = (try? FileManager.default.attributesOfItem(atPath: destination.path)[.size] as? Int64) ?? nil
            progress?(size ?? 0, response.expectedContentLength > 0 ? response.expectedContentLength : size)
            return try Self.response(response, body: Data(), for: request)
        } catch let error as URLError {
            throw Self.map(error, request)
        }
    }

    static func response(_ response: URLResponse, body: Data, for request: HTTPRequest) throws -> HTTPResponse {
        guard let http = response as? HTTPURLResponse else {
            throw HTTPError.transportFailure("not an HTTP response", request)
        }
        var headers = HTTPHeaders()
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers.add(name, value) }
        }
        return HTTPResponse(status: http.statusCode, headers: headers, body: body)
    }

    static func map(_ error: URLError, _ request: HTTPRequest) -> any Error {
        switch error.code {
        case .cancelled: CancellationError()
        case .timedOut: HTTPError.timeout("timed out after \(request.timeout) s", request)
        default: HTTPError.transportFailure(error.localizedDescription, request)
        }
    }
}

/// Refuses redirects so that credentials never follow a `Location` to another origin unasked.
final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}
