#if MooseAsyncHTTPClient
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import AsyncHTTPClient
public import MooseHTTP
import NIOCore
import NIOHTTP1
import NIOFoundationCompat
import HTTPTypes
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An `HTTPTransport` on swift-server/async-http-client: server apps hand Moose the `HTTPClient`
/// they already have, so token traffic shares its connection pool, event loops, proxy and TLS
/// settings (all from AsyncHTTPClient's own `HTTPClient.Configuration`).
///
/// ```swift
/// var configuration = HTTPClient.Configuration()
/// configuration.redirectConfiguration = .disallow          // see "Redirects"
/// let httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
/// let transport = HTTPClientTransport(client: httpClient)
/// let moose = TokenManager(issuer: issuer, clientID: "svc", authentication: .clientSecretBasic(secret),
///                          storage: InMemorySessionStorage(), transport: transport)
/// ```
///
/// - **Redirects** are never followed for token traffic. AsyncHTTPClient decides that per client,
///   not per request, and does not say how a client was configured, so: make the client with
///   `redirectConfiguration: .disallow` (the 3xx then reaches the caller). With a client that follows
///   redirects, Moose still (1) sends every body as a one-shot stream, which AsyncHTTPClient never
///   re-sends to a redirect target (it returns the 3xx instead: a client secret or refresh token in a
///   form never follows a `Location`), and (2) refuses any response that arrived through a redirect
///   (`HTTPRequestError.transport`); a body-less request's headers may by then have gone to the target
///   (AsyncHTTPClient drops `Authorization` and `Cookie` only when the origin changes).
/// - **Size**: a response body larger than `maximumResponseSize` is refused (`responseTooLarge`), by its
///   `Content-Length` before reading when it has one. Downloads stream to a file instead.
/// - **Timeouts**: the request's `timeout` bounds the wait for the response head (AsyncHTTPClient's
///   deadline); a stalled body is ended by the client's read timeout (`HTTPClient.Configuration.timeout.read`).
///   `APIClient`, which every Moose request goes through, bounds the whole exchange by the timeout.
/// - **Cancellation**: cancelling the task cancels the request (`CancellationError`).
/// - **Schemes**: `http` and `https` only (no `unix:` sockets from a URL that came from outside).
public struct HTTPClientTransport: FileTransferTransport {
    /// The app's client (not shut down by this transport).
    public let client: HTTPClient
    /// The largest response body `send` accepts (default 16 MiB).
    public var maximumResponseSize: Int
    /// The size of the chunks a file body is read in (default 64 KiB).
    public var fileChunkSize: Int

    /// A transport on `client`.
    public init(client: HTTPClient, maximumResponseSize: Int = 16 << 20, fileChunkSize: Int = 64 << 10) {
        self.client = client
        self.maximumResponseSize = max(0, maximumResponseSize)
        self.fileChunkSize = min(max(4096, fileChunkSize), 16 << 20)
    }

    /// The most header fields kept from one response; the rest are dropped.
    static let maximumHeaderFields = 256

    /// Sends `request` on the app's client and returns the response whatever its status, the body read
    /// whole (at most `maximumResponseSize`), all within the request's `timeout`.
    public func send(_ request: APIRequest) async throws -> APIResponse {
        try Task.checkCancellation()
        let deadline = Self.deadline(request.timeout)
        let prepared = try prepare(request, bodyFile: request.bodyFile, progress: nil)
        let response = try await execute(prepared, request, deadline: deadline)
        let maximum = maximumResponseSize
        if let length = response.headers.first(name: "content-length").flatMap({ Int($0) }), length > maximum {
            throw HTTPRequestError(
                HTTPRequestError.responseTooLarge,
                "the response body has \(length) bytes (at most \(maximum) accepted)",
                method: request.method, url: request.redactedURL)
        }
        // No race of our own around the body (it cost a task group and a timer per request, ~10% of a
        // loopback request): AsyncHTTPClient's read timeout ends a stalled body, and APIClient — which
        // every Moose request goes through — bounds the whole exchange by the request's timeout.
        let body = try await Self.map(request) { try await response.body.collect(upTo: maximum) }
        return try Self.response(response, body: Data(buffer: body, byteTransferStrategy: .noCopy), for: request)
    }

    /// Downloads the response body into `destination` (mode 0600), never holding it in memory: each
    /// chunk is written before the next is read (AsyncHTTPClient's back-pressure), into a temporary file
    /// beside `destination` that replaces it only when the whole body has arrived.
    public func download(_ request: APIRequest, to destination: URL) throws(HTTPRequestError) -> Transfer {
        let prepared = try prepare(request, bodyFile: request.bodyFile, progress: nil)
        let (stream, progress) = AsyncStream<TransferProgress>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let task = Task<APIResponse, any Error> {
            defer { progress.finish() }
            let response = try await execute(prepared, request, deadline: Self.deadline(request.timeout))
            let total = response.headers.first(name: "content-length").flatMap { Int64($0) }
            let partial = destination.deletingLastPathComponent()
                .appendingPathComponent(
                    ".\(destination.lastPathComponent).moose-partial-\(UInt64.random(in: 0...UInt64.max))")
            let file = try OpenFile(writingNew: partial.path, request)
            var written: Int64 = 0
            do {
                try await Self.map(request) {
                    for try await chunk in response.body {
                        try file.writeChunk(chunk, request)
                        written += Int64(chunk.readableBytes)
                        progress.yield(TransferProgress(completed: written, total: total))
                    }
                }
                file.closeFile()
                guard rename(partial.path, destination.path) == 0 else {
                    throw HTTPRequestError.transportFailure(
                        "cannot save the download to \(destination.path) (errno \(errno))", request)
                }
            } catch {
                file.closeFile()
                unlink(partial.path)
                throw error
            }
            progress.yield(TransferProgress(completed: written, total: total ?? written))
            return try Self.response(response, body: Data(), for: request)
        }
        return Transfer(progress: stream, task: task)
    }

    /// Sends `file` as the body, read in `fileChunkSize` chunks as the connection takes them, with
    /// progress counted in bytes handed to the connection.
    public func upload(_ request: APIRequest, fromFile file: URL) throws(HTTPRequestError) -> Transfer {
        let (stream, progress) = AsyncStream<TransferProgress>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let prepared = try prepare(request, bodyFile: file) { sent, total in
            progress.yield(TransferProgress(completed: sent, total: total))
        }
        let maximum = maximumResponseSize
        let task = Task<APIResponse, any Error> {
            defer { progress.finish() }
            let response = try await execute(prepared, request, deadline: Self.deadline(request.timeout))
            let body = try await Self.map(request) { try await response.body.collect(upTo: maximum) }
            return try Self.response(response, body: Data(buffer: body, byteTransferStrategy: .noCopy), for: request)
        }
        return Transfer(progress: stream, task: task)
    }

    // MARK: - Requests

    /// The AsyncHTTPClient request for `request`: checked URL, HTTP/1.1 header lines, the body as a
    /// one-shot stream (see "Redirects").
    func prepare(
        _ request: APIRequest, bodyFile: URL?,
        progress: (@Sendable (Int64, Int64?) -> Void)?
    ) throws(HTTPRequestError) -> HTTPClientRequest {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw HTTPRequestError(
                HTTPRequestError.invalidRequest, "only http and https URLs are supported: \(request.redactedURL)",
                method: request.method, url: request.redactedURL)
        }
        var prepared = HTTPClientRequest(url: url.absoluteString)
        prepared.method = HTTPMethod(rawValue: request.method.rawValue)
        for line in request.headerFields.http1Lines { prepared.headers.add(name: line.name, value: line.value) }
        if let bodyFile {
            var info = stat()
            guard stat(bodyFile.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                throw HTTPRequestError(
                    HTTPRequestError.invalidRequest, "cannot read the body file \(bodyFile.path)",
                    method: request.method, url: request.redactedURL)
            }
            let size = Int64(info.st_size)
            prepared.body = .stream(
                FileChunks(path: bodyFile.path, chunkSize: fileChunkSize, size: size, progress: progress),
                length: .known(size))
        } else if let body = request.body {
            prepared.body = .stream(OneChunk(buffer: ByteBuffer(bytes: body)), length: .known(Int64(body.count)))
        }
        return prepared
    }

    func execute(_ prepared: HTTPClientRequest, _ request: APIRequest, deadline: NIODeadline) async throws
        -> HTTPClientResponse
    {
        let response = try await Self.map(request) { try await client.execute(prepared, deadline: deadline) }
        guard response.history.count <= 1 else {
            throw HTTPRequestError.transportFailure(
                "the HTTPClient followed a redirect (make it with redirectConfiguration: .disallow; Moose refuses redirects for token traffic)",
                request)
        }
        return response
    }

    static func deadline(_ timeout: TimeInterval) -> NIODeadline {
        .now() + .milliseconds(Int64(max(1, min(timeout, 86_400)) * 1000))
    }

    /// Maps AsyncHTTPClient's and NIO's errors to Moose's: cancellation, timeouts, size, transport.
    static func map<T>(_ request: APIRequest, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as HTTPRequestError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as HTTPClientError {
            if Task.isCancelled || error == .cancelled { throw CancellationError() }
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout, .tlsHandshakeTimeout,
                .getConnectionFromPoolTimeout:
                throw HTTPRequestError.timeout("timed out (\(error)) after at most \(request.timeout) s", request)
            default:
                throw HTTPRequestError.transportFailure("\(error)", request)
            }
        } catch is NIOTooManyBytesError {
            throw HTTPRequestError(
                HTTPRequestError.responseTooLarge, "the response body is larger than allowed",
                method: request.method, url: request.redactedURL)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw HTTPRequestError.transportFailure("\(error)", request)
        }
    }

    /// The response head as swift-http-types values: the status bounded before conversion (hostile
    /// input), header names that are not RFC 9110 tokens dropped, at most 256 fields.
    static func response(_ response: HTTPClientResponse, body: Data, for request: APIRequest) throws -> APIResponse {
        guard let code = Int(exactly: response.status.code), let status = APIResponse.status(code: code) else {
            throw HTTPRequestError.transportFailure(
                "the status line has no valid code (\(response.status.code))", request)
        }
        var fields = HTTPFields()
        var count = 0
        for (name, value) in response.headers where count < maximumHeaderFields {
            guard let fieldName = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: fieldName, value: value))
            count += 1
        }
        return APIResponse(status: status, headerFields: fields, body: body)
    }
}

/// One in-memory body, sent once (a stream to AsyncHTTPClient, so it is never replayed to a redirect target).
struct OneChunk: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let buffer: ByteBuffer
    struct AsyncIterator: AsyncIteratorProtocol {
        var buffer: ByteBuffer?
        mutating func next() async throws -> ByteBuffer? {
            defer { buffer = nil }
            return buffer
        }
    }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(buffer: buffer) }
}

/// A file read in chunks as the connection asks for them: the body never sits in memory whole.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let path: String
    let chunkSize: Int
    let size: Int64
    let progress: (@Sendable (Int64, Int64?) -> Void)?

    struct AsyncIterator: AsyncIteratorProtocol {
        let file: OpenFile?
        let chunkSize: Int
        let size: Int64
        let progress: (@Sendable (Int64, Int64?) -> Void)?
        var sent: Int64 = 0

        mutating func next() async throws -> ByteBuffer? {
            guard let file else { throw HTTPRequestError(HTTPRequestError.invalidRequest, "cannot open the body file") }
            guard sent < size else { file.closeFile(); return nil }
            var buffer = ByteBufferAllocator().buffer(capacity: chunkSize)
            let want = Int(Swift.min(Int64(chunkSize), size - sent))
            let count = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { pointer in
                try file.readChunk(into: UnsafeMutableRawBufferPointer(rebasing: pointer.prefix(want)))
            }
            guard count > 0 else {
                file.closeFile()
                throw HTTPRequestError(
                    HTTPRequestError.invalidRequest, "the body file ended early (\(sent) of \(size) bytes)")
            }
            sent += Int64(count)
            progress?(sent, size)
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(file: try? OpenFile(reading: path), chunkSize: chunkSize, size: size, progress: progress)
    }
}

/// A file descriptor owned by one transfer, closed once (explicitly or when the owner goes).
final class OpenFile: Sendable {
    // Used by one task at a time (a transfer's body loop); `close` is idempotent.
    private let descriptor: Mutex<Int32>

    init(reading path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        descriptor = Mutex(fd)
        guard fd >= 0 else {
            throw HTTPRequestError(HTTPRequestError.invalidRequest, "cannot open the body file \(path)")
        }
    }

    init(writingNew path: String, _ request: APIRequest) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        descriptor = Mutex(fd)
        guard fd >= 0 else {
            throw HTTPRequestError.transportFailure("cannot create \(path) (errno \(errno))", request)
        }
    }

    deinit { closeFile() }

    func closeFile() {
        descriptor.withLock { descriptor in
            if descriptor >= 0 {
                _ = close(descriptor)
                descriptor = -1
            }
        }
    }

    /// Reads up to `buffer.count` bytes; 0 at the end of the file.
    func readChunk(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let descriptor = self.descriptor.withLock { $0 }
        while true {
            let count = read(descriptor, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            if errno != EINTR {
                throw HTTPRequestError(HTTPRequestError.invalidRequest, "cannot read the body file (errno \(errno))")
            }
        }
    }

    /// Writes the whole chunk.
    func writeChunk(_ chunk: ByteBuffer, _ request: APIRequest) throws {
        let descriptor = self.descriptor.withLock { $0 }
        try chunk.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let count = write(descriptor, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
                if count > 0 {
                    offset += count
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    throw HTTPRequestError.transportFailure("cannot write the download (errno \(errno))", request)
                }
            }
        }
    }
}
#endif
