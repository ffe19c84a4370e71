internal import CMooseCurl
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// An `HTTPTransport` over libcurl, loaded with `dlopen` on the first request.
///
/// Programs that only sometimes talk to the network (the `moose` CLI) use it so that start-up does
/// not pay for libcurl and the libraries behind it; programs that always do can use URLSession.
/// Redirects are not followed (the caller decides), only `http` and `https` are allowed, and the
/// response body is capped.
///
/// ```swift
/// let transport = CurlTransport()
/// let response = try await transport.send(HTTPRequest(url: URL(string: "https://id.example.com/jwks")!))
/// ```
public struct CurlTransport: HTTPTransport {
    /// The largest response body accepted.
    public var maximumResponseSize: Int
    /// The time allowed to establish a connection.
    public var connectTimeout: TimeInterval

    /// A transport.
    public init(maximumResponseSize: Int = 16 << 20, connectTimeout: TimeInterval = 10) {
        self.maximumResponseSize = maximumResponseSize
        self.connectTimeout = connectTimeout
    }

    /// `true` when libcurl can be loaded on this machine.
    public static var isAvailable: Bool { moose_curl_load(nil, 0) == 1 }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try Task.checkCancellation()
        let flag = CancelFlag()
        let maximumResponseSize = self.maximumResponseSize, connectTimeout = self.connectTimeout
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, any Error>) in
                // libcurl's easy API blocks: run it on a Dispatch thread, never on the cooperative pool.
                DispatchQueue.global().async {
                    continuation.resume(with: Result {
                        try CurlTransport.perform(request, maximumResponseSize: maximumResponseSize,
                                                  connectTimeout: connectTimeout, cancel: flag)
                    })
                }
            }
        } onCancel: {
            flag.cancel()
        }
    }

    /// Sends `request` synchronously, blocking the calling thread (for command-line tools).
    public func sendBlocking(_ request: HTTPRequest) throws -> HTTPResponse {
        try CurlTransport.perform(request, maximumResponseSize: maximumResponseSize, connectTimeout: connectTimeout,
                                  cancel: CancelFlag())
    }

    static func perform(_ request: HTTPRequest, maximumResponseSize: Int, connectTimeout: TimeInterval,
                        cancel: CancelFlag) throws -> HTTPResponse {
        guard let scheme = request.url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw HTTPError(HTTPError.invalidRequest, "only http and https URLs are supported: \(request.url.redactedForLogs)")
        }
        var request = request
        if let file = request.bodyFile {
            // libcurl's easy API here takes the body in memory: fine for the CLI's small requests.
            guard let data = FileManager.default.contents(atPath: file.path) else {
                throw HTTPError(HTTPError.invalidRequest, "cannot read the body file \(file.path)")
            }
            request.body = data
        }
        let headerLines = request.headers.map { "\($0.name): \($0.value)" }
        var response = moose_curl_response()
        defer { moose_curl_response_free(&response) }
        let code: Int32 = withCStrings(headerLines) { headerPointers in
            request.url.absoluteString.withCString { url in
                request.method.rawValue.withCString { method in
                    let perform = { (body: UnsafePointer<UInt8>?, count: Int) -> Int32 in
                        moose_curl_perform(method, url, headerPointers, headerLines.count, body, count,
                                           Int(request.timeout * 1000), Int(connectTimeout * 1000),
                                           maximumResponseSize, cancel.pointer, &response)
                    }
                    if let body = request.body {
                        return body.withUnsafeBytes { bytes in
                            perform(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? emptyBody, bytes.count)
                        }
                    }
                    return perform(nil, 0)
                }
            }
        }
        let message = withUnsafeBytes(of: response.error) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if cancel.isCancelled { throw CancellationError() }
        guard code == 0 else {
            if response.truncated != 0 {
                throw HTTPError(HTTPError.responseTooLarge, "\(request.url.redactedForLogs): \(message)")
            }
            // CURLE_OPERATION_TIMEDOUT = 28
            if code == 28 { throw HTTPError(HTTPError.timedOut, "\(request.url.redactedForLogs): \(message)") }
            throw HTTPError(HTTPError.transport, "\(request.url.redactedForLogs): \(message)")
        }
        let body = response.body.map { Data(bytes: $0, count: response.body_length) } ?? Data()
        let headerText = response.headers.map { String(cString: $0) } ?? ""
        return HTTPResponse(status: response.status, headers: parseHeaders(headerText), body: body)
    }

    /// Parses a raw header block; with several blocks (a `100 Continue`, a proxy), the last one wins.
    static func parseHeaders(_ text: String) -> HTTPHeaders {
        var headers = HTTPHeaders()
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            if line.hasPrefix("HTTP/") {
                headers = HTTPHeaders()
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = trimmed(line[..<colon])
            let value = trimmed(line[line.index(after: colon)...])
            if !name.isEmpty { headers.add(name, value) }
        }
        return headers
    }
}

func trimmed(_ text: Substring) -> String {
    var text = text
    while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
    while let last = text.last, last == " " || last == "\t" { text.removeLast() }
    return String(text)
}

nonisolated(unsafe) private let emptyBodyStorage = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
private var emptyBody: UnsafePointer<UInt8> { UnsafePointer(emptyBodyStorage) }

/// A flag the transfer polls; set from the cancellation handler on another thread.
final class CancelFlag: @unchecked Sendable {
    // An aligned Int32 written once (0 → 1) and polled by C: a torn read is impossible.
    let pointer: UnsafeMutablePointer<Int32>

    init() {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: 0)
    }

    deinit { pointer.deallocate() }

    func cancel() { pointer.pointee = 1 }
    var isCancelled: Bool { pointer.pointee != 0 }
}

/// Calls `body` with a C array of C strings.
func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    var storage: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    defer { for pointer in storage { free(pointer) } }
    return storage.withUnsafeMutableBufferPointer { buffer in
        buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) { body($0) }
    }
}
