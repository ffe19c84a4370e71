#if MooseMCP
// The SDK's HTTPClientTransport with a MooseMCPAuthorizer, made to read SSE answers on Linux: code
// written for the SDK's transport (the MooseMCP example since the beginning) keeps working against
// servers that answer text/event-stream, the Python and TypeScript SDKs' default.
public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
public import MCP
public import Logging
import MooseHTTP
import HTTPTypes
import Synchronization

extension HTTPClientTransport {
    /// The SDK's streamable HTTP transport authorized by `authorizer` — the line MooseMCP's example
    /// has always shown — made to work on Linux against servers that answer a POST with
    /// `text/event-stream` (the Python and TypeScript SDKs' default).
    ///
    /// SDK 0.12.1 on Linux reads a POST's answer whole with `URLSession.data(for:)` and hands an event
    /// stream to the client undecoded (swift-corelibs-foundation has no `URLSession.bytes`, which
    /// the SDK's SSE reader needs elsewhere): the client then waits for an answer that never comes.
    /// On Linux this initializer gives the transport a `URLSessionConfiguration` whose first protocol
    /// class sends MCP POSTs through Moose's `CurlTransport` (no redirects followed, the body bounded
    /// to 16 MiB, 300 s per exchange) and, when the answer is an event stream, parses it (bounded,
    /// like `MooseMCPTransport`) and hands the SDK the JSON-RPC response it carries as an
    /// `application/json` answer — as if the server had answered JSON. Elsewhere the SDK reads event
    /// streams itself and the configuration is the default.
    ///
    /// What an `application/json` answer cannot carry is dropped: notifications (progress, logs) and
    /// server requests inside a POST's event stream. For those, and for DPoP-bound tokens, use
    /// `MooseMCPTransport`, which delivers every event to the client.
    ///
    /// ```swift
    /// let transport = HTTPClientTransport(endpoint: url, streaming: false, authorizer: authorizer)
    /// ```
    public init(endpoint: URL, streaming: Bool = true, authorizer: MooseMCPAuthorizer, logger: Logger? = nil) {
        self.init(
            endpoint: endpoint, configuration: MooseMCPEventStreamReader.sessionConfiguration(), streaming: streaming,
            authorizer: authorizer as any HTTPClientAuthorizer, logger: logger)
    }
}

/// On Linux: the `URLProtocol` that sends MCP POSTs through Moose and turns an event-stream answer
/// into the JSON one the SDK can read there (see `HTTPClientTransport.init(endpoint:streaming:authorizer:logger:)`).
final class MooseMCPEventStreamReader: URLProtocol {

    /// The configuration the SDK's transport gets: on Linux, this class first; elsewhere the default.
    static func sessionConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.default
        #if canImport(FoundationNetworking)
        configuration.protocolClasses = [MooseMCPEventStreamReader.self] + (configuration.protocolClasses ?? [])
        #endif
        return configuration
    }

    static let http = CurlTransport()
    /// The time allowed for one exchange (a tool call may run long).
    static let timeout: TimeInterval = 300
    /// The largest request body read from a stream.
    static let maximumRequestBody = 16 << 20

    private let running = Mutex<Task<Void, Never>?>(nil)

    /// Who ends the exchange: exactly one final event (the answer or a failure) reaches the loading system.
    private enum Ending { case open, answered, cancelled }
    private let ending = Mutex(Ending.open)

    /// The loading system's client — none once this protocol ended the exchange itself. corelibs'
    /// `URLSessionTask.cancel()` delivers its own failure through this property after `stopLoading()`:
    /// a second final event made `URLSession.data(for:)` resume its continuation twice, or reach a task
    /// no longer registered, and both trap. `EventStreamReaderCancelTests` races the two.
    override var client: (any URLProtocolClient)? {
        get { ending.withLock { $0 } == .answered ? nil : super.client }
        set { super.client = newValue }
    }

    /// The client to end the exchange with, if it is still this protocol's to end: not after a
    /// cancellation (the loading system reported that), and only once.
    private func claimEnding() -> (any URLProtocolClient)? {
        let client = super.client
        return ending.withLock { ending in
            guard ending == .open else { return nil }
            ending = .answered
            return client
        }
    }

    override class func canInit(with request: URLRequest) -> Bool {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return false
        }
        return request.httpMethod?.utf8.elementsEqual("POST".utf8) == true
    }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    /// The loader, handed to the task that loads: the URL loading system calls a protocol's client
    /// from any thread, and this class's own state (the running task) is behind a Mutex.
    private struct Loader: @unchecked Sendable {
        let reader: MooseMCPEventStreamReader
    }

    override func startLoading() {
        let request = self.request
        let loader = Loader(reader: self)
        let task = Task { await loader.reader.load(request) }
        running.withLock { $0 = task }
    }

    override func stopLoading() {
        ending.withLock { if $0 == .open { $0 = .cancelled } }
        running.withLock { $0?.cancel() }
    }

    private func load(_ urlRequest: URLRequest) async {
        do {
            let request = try Self.apiRequest(urlRequest)
            let answer = try Self.translate(try await Self.http.send(request))
            guard let url = urlRequest.url,
                let head = HTTPURLResponse(
                    url: url, statusCode: answer.status.code, httpVersion: "HTTP/1.1",
                    headerFields: Self.dictionary(answer.headerFields))
            else {
                throw MCPError.internalError("the MCP server's answer could not be handed to URLSession")
            }
            guard let client = claimEnding() else { return } // cancelled meanwhile: nothing more to say
            client.urlProtocol(self, didReceive: head, cacheStoragePolicy: .notAllowed)
            if !answer.body.isEmpty { client.urlProtocol(self, didLoad: answer.body) }
            client.urlProtocolDidFinishLoading(self)
        } catch is CancellationError {
            // stopLoading(): the loading system no longer listens.
        } catch {
            claimEnding()?.urlProtocol(self, didFailWithError: error)
        }
    }

    /// The request as Moose sends it: method, URL, header fields (valid names only), body.
    static func apiRequest(_ urlRequest: URLRequest) throws -> APIRequest {
        guard let url = urlRequest.url else { throw MCPError.internalError("the MCP request has no URL") }
        var request = APIRequest(method: .post, url: url, timeout: timeout)
        for (name, value) in urlRequest.allHTTPHeaderFields ?? [:] {
            guard let name = HTTPField.Name(name) else { continue }
            request.headerFields[name] = value
        }
        if let body = urlRequest.httpBody {
            request.body = body
        } else if let stream = urlRequest.httpBodyStream {
            request.body = try read(stream)
        }
        return request
    }

    static func read(_ stream: InputStream) throws -> Data {
        stream.open()
        defer { stream.close() }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBufferPointer { pointer in
                pointer.baseAddress.map { stream.read($0, maxLength: pointer.count) } ?? -1
            }
            guard count >= 0 else { throw MCPError.internalError("the MCP request's body could not be read") }
            if count == 0 { return data }
            guard data.count + count <= maximumRequestBody else {
                throw MCPError.internalError("the MCP request's body is too large")
            }
            data.append(contentsOf: buffer[..<count])
        }
    }

    /// An event-stream answer as the JSON answer the SDK reads on Linux: the JSON-RPC response(s) it
    /// carries (one, or a batch of several), `202 Accepted` when it carries none. Other answers as they are.
    static func translate(_ response: APIResponse) throws -> APIResponse {
        guard response.status.kind == .successful,
            MooseMCPTransport.mediaType(response.headerFields[.contentType]).elementsEqual("text/event-stream".utf8)
        else { return response }
        var parser = ServerSentEventParser()
        let responses: [Data]
        do {
            responses = try parser.feed(response.body).compactMap { event in
                guard event.type.utf8.elementsEqual("message".utf8), !event.data.isEmpty else { return nil }
                let data = Data(event.data.utf8)
                return isResponse(data) ? data : nil
            }
        } catch {
            throw MCPError.internalError("the MCP server's event stream was refused: \(error)")
        }
        var translated = response
        translated.headerFields[.contentType] = nil
        translated.headerFields[.contentLength] = nil
        guard let first = responses.first else {
            translated.status = .accepted
            translated.body = Data()
            return translated
        }
        translated.body =
            responses.count == 1 ? first : Data("[".utf8) + responses.joined(separator: Data(",".utf8)) + Data("]".utf8)
        translated.headerFields[.contentType] = "application/json"
        return translated
    }

    private struct Message: Decodable {
        let id: ID?
        let method: String?
    }

    /// A JSON-RPC response (an `id`, no `method`), not a request or a notification.
    static func isResponse(_ data: Data) -> Bool {
        guard let message = try? JSONDecoder().decode(Message.self, from: data) else { return false }
        return message.id != nil && message.method == nil
    }

    /// Header fields as URLSession takes them (repeated names joined as HTTP/1.1 does).
    static func dictionary(_ fields: HTTPFields) -> [String: String] {
        var result: [String: String] = [:]
        for field in fields where result[field.name.rawName] == nil {
            result[field.name.rawName] = fields[values: field.name].joined(separator: ", ")
        }
        return result
    }
}
#endif
