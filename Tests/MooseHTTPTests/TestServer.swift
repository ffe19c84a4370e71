import Foundation
import Logging
import MooseHTTP
import MooseTestSupport
import Synchronization
import Testing
import HTTPTypes

/// tools/testserver/http_test_server.py, started once per test process on 127.0.0.1 (it exits when
/// this process does).
enum TestServer {
    static let base: URL = URL(string: "http://127.0.0.1:\(LocalServer.start("tools/testserver/http_test_server.py"))")!
}

/// A transport wrapper that counts what reaches the real transport.
final class CountingTransport: HTTPTransport, @unchecked Sendable {
    let inner: any HTTPTransport
    private let counter = Mutex(0)
    init(_ inner: any HTTPTransport) { self.inner = inner }
    var count: Int { counter.withLock { $0 } }
    func send(_ request: APIRequest) async throws -> APIResponse {
        counter.withLock { $0 += 1 }
        return try await inner.send(request)
    }
}

/// Captures log lines (to assert that no secret reaches them).
final class CapturedLog: @unchecked Sendable {
    private let lines = Mutex<[String]>([])
    var text: String { lines.withLock { $0.joined(separator: "\n") } }
    func append(_ line: String) { lines.withLock { $0.append(line) } }

    func logger() -> Logger {
        var logger = Logger(label: "test") { _ in CaptureHandler(log: self) }
        logger.logLevel = .trace
        return logger
    }

    struct CaptureHandler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { log.append("\(event.level) \(event.message)") }
    }
}

/// What /echo saw.
struct Echo: Decodable {
    let method: String
    let path: String
    let query: String
    let headers: [String: String]
    let body: String
    let body_sha256: String
    let body_size: Int

    var bodyText: String { String(decoding: Data(base64Encoded: body) ?? Data(), as: UTF8.self) }
}

/// An endpoint made of plain values, for tests.
struct TestEndpoint: Endpoint {
    var baseURL: URL = TestServer.base
    var path: String
    var pathParameters: [String: String] = [:]
    var method: HTTPRequest.Method = .get
    var query: [QueryItem] = []
    var arrayEncoding: ArrayEncoding = .repeatedKeys
    var headerFields: HTTPFields = [:]
    var body: EndpointBody = .none
    var timeout: TimeInterval? = nil
    var retryable: Bool? = nil
    var isRetryable: Bool { retryable ?? method.isIdempotent }

    struct APIError: Error, Decodable, Equatable { let code: String; let message: String }
    func serverError(for response: APIResponse) -> (any Error)? { decodeServerError(APIError.self, from: response) }
}
