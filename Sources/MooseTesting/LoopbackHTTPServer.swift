#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Dispatch
import HTTPTypes
public import MooseHTTP
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A small HTTP/1.1 server on 127.0.0.1 that answers every request with an `HTTPTransport`: it
/// puts an in-process transport (a `ScriptedTransport`, a test provider) on a loopback port, for
/// other processes — the `moose` CLI, curl, Python's requests — to talk to.
///
/// One request per connection (`Connection: close`), each connection on a thread of its own and
/// served concurrently, at most `maximumConnections` at once (more are closed at once). A request
/// is read within `connectionDeadline` (head and body together) and refused when malformed: 400
/// for a bad request line or header field (obs-fold, a bare CR, a NUL, a name that is not a token,
/// a target that is not origin-form, differing `Content-Length`s), 431 for a head over 16 KiB or
/// 100 fields, 413 for a body over `maxBodyBytes`, 501 for a transfer coding other than
/// `chunked`, 505 for an HTTP version other than 1.0 and 1.1. `Expect: 100-continue` is honoured,
/// and a `chunked` body is decoded.
///
/// Every request reaches the transport with the URL `baseURL` + the request target (path and
/// query exactly as sent, whatever the `Host` header says) and the header fields as sent (a
/// decoded chunked body trades its `Transfer-Encoding` for a `Content-Length`). The transport runs
/// on a thread of its own, not the cooperative pool, so an in-process client that blocks that pool
/// (`CurlTransport` on Linux) is still answered. A transport that throws makes the server close
/// the connection without an answer: how a test simulates a dropped connection.
///
/// ```swift
/// let provider = ScriptedTransport { request in
///     request.url?.path == "/health" ? .json(#"{"ok":true}"#) : APIResponse(status: 404)
/// }
/// let server = try LoopbackHTTPServer()  // 127.0.0.1, a port the system picks
/// server.serve(provider)
/// defer { server.stop() }
/// // Another process, given server.baseURL: `curl http://127.0.0.1:<port>/health` prints {"ok":true}.
/// ```
public final class LoopbackHTTPServer: Sendable {
    private let listener: Listener

    /// The most connections served at once; more are closed as soon as they are accepted.
    public static let maximumConnections = 64
    /// How long one connection may take to send its request, head and body together (seconds).
    public static let connectionDeadline: Double = 10
    /// How long writing one response may take (seconds).
    public static let writeDeadline: Double = 10
    /// The largest request head read (bytes, the blank line included); a larger one gets a 431.
    public static let maximumHeadBytes = 16_384
    /// The most header field lines in a request; more get a 431.
    public static let maximumFieldCount = 100

    /// Listens on 127.0.0.1 at `port` (0: an ephemeral port the system picks; read it from `port`).
    /// Nothing is answered until `serve(_:)`: connections wait in the listen queue until then.
    ///
    /// - Parameters:
    ///   - port: the port to bind, or 0 for any free one.
    ///   - maxBodyBytes: the largest request body accepted; a larger one is refused with a 413.
    ///   - connectionDeadline: seconds a connection has to send its whole request (0.1…3600) before a 408;
    ///     default `LoopbackHTTPServer.connectionDeadline` (10).
    /// - Throws: `HTTPRequestError` (`transport`) when no socket can be made or the port cannot be
    ///   bound (in use, or privileged).
    public init(
        port: UInt16 = 0, maxBodyBytes: Int = 1 << 20,
        connectionDeadline: Double = LoopbackHTTPServer.connectionDeadline
    ) throws {
        listener = try Listener(
            port: port, maxBodyBytes: max(0, maxBodyBytes),
            deadline: connectionDeadline.isFinite ? min(max(connectionDeadline, 0.1), 3600) : 10)
    }

    deinit { listener.stop() }

    /// The port the server listens on (the system's choice when `init` was given 0).
    public var port: UInt16 { listener.port }

    /// `http://127.0.0.1:<port>`: what clients are pointed at, and the base of every request's URL.
    public var baseURL: URL { listener.baseURL }

    /// Starts answering connections with `transport`, on a thread of its own. Once: a second call,
    /// or a call after `stop()`, does nothing.
    public func serve(_ transport: any HTTPTransport) {
        let listener = self.listener
        let starts = listener.state.withLock { state -> Bool in
            guard !state.serving, !state.stopped else { return false }
            state.serving = true
            return true
        }
        guard starts else { return }
        // A blocking accept loop: on a thread of its own (a private serial queue), never on the
        // cooperative pool. It holds the listener, not the server, so dropping the server stops it.
        DispatchQueue(label: "moose.loopback-http.accept").async { listener.acceptLoop(transport) }
    }

    /// Stops accepting and closes the listening socket: once it returns, new connections are
    /// refused. Requests already accepted are still answered. Idempotent; also done by `deinit`.
    public func stop() { listener.stop() }

    /// How many requests were answered so far: every response the server started writing, the
    /// transport's or its own refusal (400, 408, 413…). A connection closed with no answer (the
    /// transport threw, the client sent nothing) does not count.
    public var requestCount: Int { listener.state.withLock { $0.answered } }
}

// MARK: - Request heads

extension LoopbackHTTPServer {
    /// A request head as it arrived: the request line, the header fields in order, and how the
    /// body is framed. Made only by `parseRequestHead(_:)`.
    package struct RequestHead: Sendable, Equatable {
        /// One header field line: a token name as sent, and its value without surrounding whitespace.
        package struct Field: Sendable, Equatable {
            package var name: String
            package var value: [UInt8]

            /// A field line `name: value`.
            package init(name: String, value: [UInt8]) {
                self.name = name
                self.value = value
            }
        }

        /// How the body is delimited.
        package enum Framing: Sendable, Equatable {
            /// No body (neither `Content-Length` nor `Transfer-Encoding`).
            case none
            /// `Content-Length` bytes (saturated at `Int.max` for absurd values, which no limit admits).
            case length(Int)
            /// `Transfer-Encoding: chunked`.
            case chunked
        }

        /// The method token (`GET`, `POST`…).
        package var method: String
        /// The origin-form target: the path and query, exactly as sent.
        package var target: String
        /// 0 for HTTP/1.0, 1 for HTTP/1.1.
        package var minorVersion: Int
        /// The header fields, in order.
        package var fields: [Field]
        /// How the body is framed.
        package var framing: Framing
        /// Whether the client waits for `100 Continue` before sending its body.
        package var expectsContinue: Bool
        /// The head's length in bytes, blank line included: where the body starts.
        package var length: Int

        /// The values of the fields named `name` (compared case-insensitively), in order.
        package func values(_ name: String) -> [[UInt8]] {
            fields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
        }
    }

    /// Why `parseRequestHead(_:)` made no head.
    package enum ParseFailure: Error, Sendable, Equatable {
        /// No blank line yet: more bytes may complete the head.
        case incomplete
        /// The head is refused with this status (400, 417, 431, 501, 505) and a short reason.
        case refused(status: Int, reason: String)
    }

    /// Parses the request head at the start of `bytes` (what follows it, the body's start, is left
    /// alone; `RequestHead.length` says where it begins). Total over any bytes: hostile input gets a
    /// refusal, never a trap.
    package static func parseRequestHead(_ bytes: [UInt8]) -> Result<RequestHead, ParseFailure> {
        guard let end = headEnd(in: bytes, from: 0) else {
            return .failure(
                bytes.count >= maximumHeadBytes ? .refused(status: 431, reason: "head too large") : .incomplete)
        }
        guard end <= maximumHeadBytes else { return .failure(.refused(status: 431, reason: "head too large")) }
        func refuse(_ reason: String, _ status: Int = 400) -> Result<RequestHead, ParseFailure> {
            .failure(.refused(status: status, reason: reason))
        }
        if bytes[0..<end].contains(0) { return refuse("NUL in the head") }
        var lines: [ArraySlice<UInt8>] = []
        var start = 0
        for index in 0..<end where bytes[index] == lineFeed {
            var line = bytes[start..<index]
            if line.last == carriageReturn { line = line.dropLast() }
            if line.contains(carriageReturn) { return refuse("bare CR in the head") }
            lines.append(line)
            start = index + 1
        }
        // headEnd ends the head with an empty line, after at least one other.
        guard lines.count >= 2, lines.last?.isEmpty == true else { return refuse("malformed head") }
        guard lines.count - 2 <= maximumFieldCount else { return refuse("too many header fields", 431) }

        // The request line: method SP origin-form SP HTTP-version.
        let parts = lines[0].split(separator: space, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return refuse("malformed request line") }
        guard !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte) else { return refuse("malformed method") }
        guard parts[1].first == UInt8(ascii: "/"), parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x23 })
        else { return refuse("the target must be origin-form (a path and query)") }
        let version = Array(parts[2])
        let minorVersion: Int
        if version.elementsEqual("HTTP/1.1".utf8) {
            minorVersion = 1
        } else if version.elementsEqual("HTTP/1.0".utf8) {
            minorVersion = 0
        } else if version.count == 8, version.starts(with: "HTTP/".utf8), isDigit(version[5]), version[6] == 0x2E,
            isDigit(version[7])
        {
            return refuse("HTTP version not supported", 505)
        } else {
            return refuse("malformed HTTP version")
        }

        // The header fields: token ":" OWS value OWS, one per line.
        var fields: [RequestHead.Field] = []
        for line in lines[1..<(lines.count - 1)] {
            guard let first = line.first, first != space, first != tab else { return refuse("obs-fold") }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                return refuse("a field line without a colon")
            }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { return refuse("malformed field name") }
            var value = line[(colon + 1)...]
            while let byte = value.first, byte == space || byte == tab { value = value.dropFirst() }
            while let byte = value.last, byte == space || byte == tab { value = value.dropLast() }
            guard value.allSatisfy({ $0 == tab || ($0 >= 0x20 && $0 != 0x7F) }) else {
                return refuse("control character in a field value")
            }
            fields.append(RequestHead.Field(name: String(decoding: name, as: UTF8.self), value: Array(value)))
        }
        var head = RequestHead(
            method: String(decoding: parts[0], as: UTF8.self), target: String(decoding: parts[1], as: UTF8.self),
            minorVersion: minorVersion, fields: fields, framing: .none, expectsContinue: false, length: end)

        if let failure = frame(&head) { return .failure(failure) }
        return .success(head)
    }

    /// Checks the head's `Host`, decides its body's framing (RFC 9112 §6) and its expectation: the
    /// refusal, or `nil` with `head.framing` and `head.expectsContinue` set.
    private static func frame(_ head: inout RequestHead) -> ParseFailure? {
        func refused(_ reason: String, _ status: Int = 400) -> ParseFailure { .refused(status: status, reason: reason) }
        let minorVersion = head.minorVersion
        // RFC 9112 §3.2: exactly one Host in HTTP/1.1, at most one in 1.0 (its value is not used).
        let hosts = head.values("host").count
        guard hosts == 1 || (hosts == 0 && minorVersion == 0) else { return refused("one Host field is required") }

        // RFC 9112 §6: Transfer-Encoding (chunked alone) or Content-Length, never both.
        let codings = head.values("transfer-encoding")
        let lengths = head.values("content-length")
        if !codings.isEmpty {
            guard minorVersion == 1 else { return refused("Transfer-Encoding in an HTTP/1.0 request") }
            guard lengths.isEmpty else { return refused("both Transfer-Encoding and Content-Length") }
            let elements = codings.flatMap { listElements($0) }
            guard elements.count == 1, elements[0].lowercased() == "chunked" else {
                return refused("only the chunked transfer coding is supported", 501)
            }
            head.framing = .chunked
        } else if !lengths.isEmpty {
            var length: Int?
            for element in lengths.flatMap({ listElements($0) }) {
                guard let value = decimal(element) else { return refused("malformed Content-Length") }
                guard length == nil || length == value else { return refused("differing Content-Length values") }
                length = value
            }
            guard let length else { return refused("malformed Content-Length") }
            head.framing = .length(length)
        }

        // RFC 9110 §10.1.1: 100-continue is the only expectation; an HTTP/1.0 client's is ignored.
        let expectations = head.values("expect").flatMap { listElements($0) }
        if !expectations.isEmpty {
            guard expectations.allSatisfy({ $0.lowercased() == "100-continue" }) else {
                return refused("unsupported expectation", 417)
            }
            head.expectsContinue = minorVersion == 1
        }
        return nil
    }

    /// The index just past the blank line that ends a head (`LF LF` or `LF CR LF`), searching from
    /// `start` (a little before it: the blank line may have begun in bytes already searched).
    package static func headEnd(in bytes: [UInt8], from start: Int) -> Int? {
        var index = max(0, min(start, bytes.count) - 2)
        while index < bytes.count {
            if bytes[index] == lineFeed {
                if index + 1 < bytes.count, bytes[index + 1] == lineFeed { return index + 2 }
                if index + 2 < bytes.count, bytes[index + 1] == carriageReturn, bytes[index + 2] == lineFeed {
                    return index + 3
                }
            }
            index += 1
        }
        return nil
    }

    /// The elements of a comma-separated field value, trimmed, empty ones dropped (RFC 9110 §5.6.1).
    private static func listElements(_ value: [UInt8]) -> [String] {
        value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).compactMap { element in
            var element = element
            while let byte = element.first, byte == space || byte == tab { element = element.dropFirst() }
            while let byte = element.last, byte == space || byte == tab { element = element.dropLast() }
            return element.isEmpty ? nil : String(decoding: element, as: UTF8.self)
        }
    }

    /// A `Content-Length` element: 1*DIGIT, its value saturated at `Int.max` (more than 18
    /// significant digits is more than any limit, so no conversion can overflow).
    private static func decimal(_ text: String) -> Int? {
        let digits = Array(text.utf8)
        guard !digits.isEmpty, digits.allSatisfy(isDigit) else { return nil }
        let significant = digits.drop { $0 == UInt8(ascii: "0") }
        guard significant.count <= 18 else { return Int.max }
        return significant.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }

    /// The request the transport gets for `head` and its `body`: `http://127.0.0.1:<port>` + the
    /// target as sent, the fields as sent (a decoded chunked body loses its `Transfer-Encoding` and
    /// gains its `Content-Length`). `nil` when swift-http-types or `URL` cannot carry it (a method
    /// like CONNECT, a target `URL` refuses).
    package static func makeRequest(_ head: RequestHead, body: [UInt8]?, port: UInt16) -> APIRequest? {
        guard let method = HTTPRequest.Method(head.method) else { return nil }
        var fields = HTTPFields()
        for field in head.fields {
            guard let name = HTTPField.Name(field.name) else { return nil }
            if head.framing == .chunked, name == .transferEncoding { continue }
            fields.append(HTTPField(name: name, value: field.value))
        }
        if head.framing == .chunked { fields[.contentLength] = String(body?.count ?? 0) }
        let request = APIRequest(
            head: HTTPRequest(
                method: method, scheme: "http", authority: "127.0.0.1:\(port)", path: head.target,
                headerFields: fields),
            body: body.map { Data($0) })
        return request.url == nil ? nil : request
    }

    /// The bytes of `response` on the wire: status line, its fields but its own `Content-Length`,
    /// `Transfer-Encoding` and `Connection`, then `Content-Length`, `Connection: close` and the body
    /// (none for a HEAD request, a 204 or a 304). A status outside 200…999 (an interim 1xx cannot be
    /// a final answer) is written as 500.
    package static func responseBytes(_ response: APIResponse, toHEAD: Bool = false) -> [UInt8] {
        let code = (200...999).contains(response.status.code) ? response.status.code : 500
        let given = code == response.status.code ? response.status.reasonPhrase : ""
        let reason = given.isEmpty ? reasonPhrase(code) : given
        var bytes = Array("HTTP/1.1 \(code) ".utf8)
        // The reason phrase is ISO Latin 1 text: anything else, or a control character, becomes a space.
        bytes += reason.unicodeScalars.map {
            $0.value >= 0x20 && $0.value < 0x100 && $0.value != 0x7F ? UInt8($0.value) : space
        }
        bytes += [carriageReturn, lineFeed]
        let skipped: Set<HTTPField.Name> = [.contentLength, .transferEncoding, .connection]
        for field in response.headerFields where !skipped.contains(field.name) {
            bytes += Array("\(field.name.rawName): \(field.value)\r\n".utf8)
        }
        let bodiless = code == 204 || code == 304
        if !bodiless { bytes += Array("Content-Length: \(response.body.count)\r\n".utf8) }
        bytes += Array("Connection: close\r\n\r\n".utf8)
        if !bodiless, !toHEAD { bytes += response.body }
        return bytes
    }

    /// A refusal the server writes itself: `status`, a one-line plain-text body.
    static func refusal(_ status: Int, _ reason: String) -> APIResponse {
        var fields = HTTPFields()
        fields[.contentType] = "text/plain; charset=utf-8"
        return APIResponse(
            status: HTTPResponse.Status(code: status, reasonPhrase: reasonPhrase(status)), headerFields: fields,
            body: Data("\(status) \(reasonPhrase(status)): \(reason)\n".utf8))
    }

    private static func reasonPhrase(_ code: Int) -> String {
        let phrases = [
            200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 301: "Moved Permanently", 302: "Found",
            303: "See Other", 304: "Not Modified", 307: "Temporary Redirect", 308: "Permanent Redirect",
            400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            406: "Not Acceptable", 408: "Request Timeout", 409: "Conflict", 410: "Gone", 411: "Length Required",
            412: "Precondition Failed", 413: "Content Too Large", 415: "Unsupported Media Type",
            417: "Expectation Failed", 422: "Unprocessable Content", 425: "Too Early", 428: "Precondition Required",
            429: "Too Many Requests", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
            501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
            505: "HTTP Version Not Supported"
        ]
        return phrases[code] ?? "Status \(code)"
    }

    /// RFC 9110 §5.6.2 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}

// MARK: - Chunked bodies

extension LoopbackHTTPServer {
    /// Decodes a `Transfer-Encoding: chunked` body (RFC 9112 §7.1) as its bytes arrive, in pieces
    /// of any size: chunk extensions and trailer fields are read and dropped, the body is bounded
    /// by `limit` (beyond it: a 413), the size lines and trailers by 16 KiB in all (beyond: a 400).
    package struct ChunkedDecoder: Sendable {
        private enum State: Sendable {
            case size(digits: Int), sizeExtension, sizeLineEnd, data, dataCR, dataLF
            case trailerLineStart, trailerLine, finalLineEnd, done
        }

        /// The body decoded so far.
        package private(set) var body: [UInt8] = []
        private var state = State.size(digits: 0)
        private var chunkSize = 0
        private var overhead = 0
        private let limit: Int

        /// A decoder for a body of at most `limit` bytes.
        package init(limit: Int) { self.limit = max(0, limit) }

        /// Whether the last chunk and the trailer section have been read.
        package var isComplete: Bool {
            if case .done = state { return true }
            return false
        }

        /// Decodes `bytes`; returns how many it consumed (all of them, unless the body ended
        /// within), or the refusal the body earns. After a refusal the decoder must not be fed again.
        package mutating func feed(_ bytes: some Collection<UInt8>) -> Result<Int, ParseFailure> {
            var consumed = 0
            var index = bytes.startIndex
            while index != bytes.endIndex {
                if isComplete { break }
                if case .data = state {
                    // Copy as much of the chunk as is here in one go.
                    let available = bytes.distance(from: index, to: bytes.endIndex)
                    let count = min(chunkSize, available)
                    let end = bytes.index(index, offsetBy: count)
                    body += bytes[index..<end]
                    chunkSize -= count
                    consumed += count
                    index = end
                    if chunkSize == 0 { state = .dataCR }
                    continue
                }
                if let failure = step(bytes[index]) { return .failure(failure) }
                consumed += 1
                index = bytes.index(after: index)
            }
            return .success(consumed)
        }

        /// One byte outside chunk data.
        private mutating func step(_ byte: UInt8) -> ParseFailure? {
            overhead += 1
            guard overhead <= LoopbackHTTPServer.maximumHeadBytes else {
                return .refused(status: 400, reason: "chunk framing too large")
            }
            switch state {
            case .size(let digits):
                if let value = Self.hexValue(byte) {
                    // Bounded before it grows: a chunk larger than what the body may still hold is refused.
                    let (scaled, overflow) = chunkSize.multipliedReportingOverflow(by: 16)
                    guard !overflow, scaled <= limit - body.count - value else {
                        return .refused(status: 413, reason: "body too large")
                    }
                    chunkSize = scaled + value
                    state = .size(digits: digits + 1)
                    return nil
                }
                guard digits > 0 else { return .refused(status: 400, reason: "malformed chunk size") }
                switch byte {
                case UInt8(ascii: ";"), space, tab: state = .sizeExtension
                case carriageReturn: state = .sizeLineEnd
                case lineFeed: endSizeLine()
                default: return .refused(status: 400, reason: "malformed chunk size")
                }
            case .sizeExtension:
                switch byte {
                case carriageReturn: state = .sizeLineEnd
                case lineFeed: endSizeLine()
                case tab, 0x20...0x7E, 0x80...0xFF: break
                default: return .refused(status: 400, reason: "control character in a chunk extension")
                }
            case .sizeLineEnd:
                guard byte == lineFeed else { return .refused(status: 400, reason: "bare CR in a chunk size line") }
                endSizeLine()
            case .data:
                break // handled in feed
            case .dataCR:
                switch byte {
                case carriageReturn: state = .dataLF
                case lineFeed: state = .size(digits: 0)
                default: return .refused(status: 400, reason: "chunk data longer than its size")
                }
            case .dataLF:
                guard byte == lineFeed else { return .refused(status: 400, reason: "bare CR after chunk data") }
                state = .size(digits: 0)
            case .trailerLineStart:
                switch byte {
                case carriageReturn: state = .finalLineEnd
                case lineFeed: state = .done
                case 0: return .refused(status: 400, reason: "NUL in a trailer field")
                default: state = .trailerLine
                }
            case .trailerLine:
                switch byte {
                case lineFeed: state = .trailerLineStart
                case 0: return .refused(status: 400, reason: "NUL in a trailer field")
                default: break
                }
            case .finalLineEnd:
                guard byte == lineFeed else { return .refused(status: 400, reason: "bare CR after the last chunk") }
                state = .done
            case .done:
                break
            }
            return nil
        }

        private mutating func endSizeLine() {
            state = chunkSize == 0 ? .trailerLineStart : .data
        }

        private static func hexValue(_ byte: UInt8) -> Int? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(byte - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(byte - UInt8(ascii: "A")) + 10
            default: return nil
            }
        }
    }
}

// MARK: - Sockets

private let lineFeed: UInt8 = 0x0A
private let carriageReturn: UInt8 = 0x0D
private let space: UInt8 = 0x20
private let tab: UInt8 = 0x09

/// The listening socket and what the accept loop, the connections and the server share. The
/// server owns it and the accept loop keeps it alive, so dropping the server stops it (`deinit`).
private final class Listener: Sendable {
    struct State {
        var stopped = false
        var serving = false
        var active = 0
        var answered = 0
    }

    let descriptor: Int32
    let port: UInt16
    let maxBodyBytes: Int
    /// Seconds a connection has to send its whole request.
    let deadline: Double
    let state = ThreadLocked(State())

    init(port requested: UInt16, maxBodyBytes: Int, deadline: Double) throws {
        self.maxBodyBytes = maxBodyBytes
        self.deadline = deadline
        // Close-on-exec: a program the tests start (the moose CLI, curl) must not inherit it.
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_INET, Int32(SOCK_STREAM), 0)
        if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        #endif
        guard fd >= 0 else {
            throw HTTPRequestError(HTTPRequestError.transport, "cannot create a socket: \(lastError())")
        }
        var yes: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = requested.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            let reason = lastError()
            _ = closeDescriptor(fd)
            throw HTTPRequestError(HTTPRequestError.transport, "cannot listen on 127.0.0.1:\(requested): \(reason)")
        }
        // Non-blocking: `accept` runs under the state's lock, and must never wait there.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        descriptor = fd
        port = UInt16(bigEndian: actual.sin_port)
    }

    var baseURL: URL {
        // A port number and an IP literal: always a valid URL.
        URL(string: "http://127.0.0.1:\(port)") ?? URL(fileURLWithPath: "/")
    }

    /// Closes the listening socket, under the lock the accept loop takes around `accept`: the loop
    /// never accepts on a closed descriptor (or on another file that reused its number).
    func stop() {
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            _ = shutdown(descriptor, Int32(SHUT_RDWR))
            _ = closeDescriptor(descriptor)
        }
    }

    private enum Accepted {
        case stopped, nothing, refused(Int32), client(Int32)
    }

    /// Accepts until `stop()`, handing each connection to a thread of its own.
    func acceptLoop(_ transport: any HTTPTransport) {
        while true {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&poller, 1, 100)
            let accepted = state.withLock { state -> Accepted in
                guard !state.stopped else { return .stopped }
                let client = accept(descriptor, nil, nil)
                guard client >= 0 else { return .nothing }
                guard state.active < LoopbackHTTPServer.maximumConnections else { return .refused(client) }
                state.active += 1
                return .client(client)
            }
            switch accepted {
            case .stopped:
                return
            case .nothing:
                continue
            case .refused(let client):
                _ = closeDescriptor(client)
            case .client(let client):
                _ = fcntl(client, F_SETFD, FD_CLOEXEC) // (accept4 is not in Swift's Glibc)
                // A thread of its own per connection (at most maximumConnections): each is served even
                // while others wait on slow clients. Not Dispatch's pool: on a crowded machine it did not
                // grow past two blocked connections, and a third waited for their deadline (CI).
                if !startThread({ self.serve(client, transport) }) {
                    DispatchQueue(label: "moose.loopback-http.connection").async { self.serve(client, transport) }
                }
            }
        }
    }

    /// What reading a request came to.
    private enum Reading {
        /// Nothing to answer (the client sent nothing, or left midway).
        case closed
        /// A refusal to write.
        case refused(Int, String)
        /// A request for the transport, and whether it is a HEAD.
        case request(APIRequest, isHEAD: Bool)
    }

    private func serve(_ client: Int32, _ transport: any HTTPTransport) {
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        #if canImport(Darwin)
        var yes: Int32 = 1
        _ = setsockopt(client, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
        #endif
        switch readRequest(client, until: .now + .seconds(deadline)) {
        case .closed:
            finish(client)
        case .refused(let status, let reason):
            answer(client, LoopbackHTTPServer.refusal(status, reason), toHEAD: false)
            finish(client)
        case .request(let request, let isHEAD):
            // The transport runs on this connection's own thread (see ConnectionExecutor), and so
            // do the writing and the lingering close after it: nothing here waits on the cooperative pool.
            Task.detached(executorPreference: ConnectionExecutor()) {
                do {
                    let response = try await transport.send(request)
                    self.answer(client, response, toHEAD: isHEAD)
                } catch {
                    // The transport's way of dropping the connection: no answer at all.
                }
                self.finish(client)
            }
        }
    }

    /// Reads one request, head and body, within `deadline`.
    private func readRequest(_ client: Int32, until deadline: ContinuousClock.Instant) -> Reading {
        var buffer: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: 65_536)
        var searched = 0
        // The head: read until its blank line (or the bound), then parse it once.
        while LoopbackHTTPServer.headEnd(in: buffer, from: searched) == nil,
            buffer.count < LoopbackHTTPServer.maximumHeadBytes
        {
            searched = buffer.count
            switch receive(client, into: &buffer, scratch: &scratch, atMost: scratch.count, until: deadline) {
            case .data: continue
            case .end: return buffer.isEmpty ? .closed : .refused(400, "incomplete request head")
            case .timedOut: return buffer.isEmpty ? .closed : .refused(408, "the request took too long")
            }
        }
        let head: LoopbackHTTPServer.RequestHead
        switch LoopbackHTTPServer.parseRequestHead(buffer) {
        case .success(let parsed): head = parsed
        case .failure(.incomplete): return .refused(400, "incomplete request head")
        case .failure(.refused(let status, let reason)): return .refused(status, reason)
        }
        var rest = Array(buffer[head.length...])

        // The body.
        var body: [UInt8]?
        switch head.framing {
        case .none:
            body = nil
        case .length(let length):
            guard length <= maxBodyBytes else { return .refused(413, "body larger than \(maxBodyBytes) bytes") }
            if head.expectsContinue, rest.count < length, !sendContinue(client, until: deadline) { return .closed }
            while rest.count < length {
                let wanted = min(scratch.count, length - rest.count)
                switch receive(client, into: &rest, scratch: &scratch, atMost: wanted, until: deadline) {
                case .data: continue
                case .end: return .closed
                case .timedOut: return .refused(408, "the request took too long")
                }
            }
            body = Array(rest.prefix(length))
        case .chunked:
            var decoder = LoopbackHTTPServer.ChunkedDecoder(limit: maxBodyBytes)
            if case .failure(.refused(let status, let reason)) = decoder.feed(rest) { return .refused(status, reason) }
            if head.expectsContinue, !decoder.isComplete, !sendContinue(client, until: deadline) { return .closed }
            while !decoder.isComplete {
                var more: [UInt8] = []
                switch receive(client, into: &more, scratch: &scratch, atMost: scratch.count, until: deadline) {
                case .data: break
                case .end: return .closed
                case .timedOut: return .refused(408, "the request took too long")
                }
                if case .failure(.refused(let status, let reason)) = decoder.feed(more) {
                    return .refused(status, reason)
                }
            }
            body = decoder.body
        }
        guard let request = LoopbackHTTPServer.makeRequest(head, body: body, port: port) else {
            return .refused(400, "a request that cannot be represented (method or target)")
        }
        return .request(request, isHEAD: head.method == "HEAD")
    }

    private func sendContinue(_ client: Int32, until deadline: ContinuousClock.Instant) -> Bool {
        sendAll(client, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8), until: deadline)
    }

    /// Writes `response` (counted as answered once it starts).
    private func answer(_ client: Int32, _ response: APIResponse, toHEAD: Bool) {
        state.withLock { $0.answered += 1 }
        _ = sendAll(
            client, LoopbackHTTPServer.responseBytes(response, toHEAD: toHEAD),
            until: .now + .seconds(LoopbackHTTPServer.writeDeadline))
    }

    /// Ends a connection: no more writing, then what the client still sends is read and dropped
    /// (for at most a second) before the socket closes — closing with unread bytes would reset the
    /// connection and could destroy the answer before the client reads it.
    private func finish(_ client: Int32) {
        _ = shutdown(client, Int32(SHUT_WR))
        var drained: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: 16_384)
        let deadline = ContinuousClock.now + .seconds(1)
        var total = 0
        while total < 1 << 20 {
            drained.removeAll(keepingCapacity: true)
            guard
                case .data = receive(client, into: &drained, scratch: &scratch, atMost: scratch.count, until: deadline)
            else { break }
            total += drained.count
        }
        _ = closeDescriptor(client)
        state.withLock { $0.active -= 1 }
    }

    private enum Received {
        case data, end, timedOut
    }

    /// Appends what `client` sends next (at most `atMost` bytes) to `buffer`, waiting until `deadline`.
    private func receive(
        _ client: Int32, into buffer: inout [UInt8], scratch: inout [UInt8], atMost: Int,
        until deadline: ContinuousClock.Instant
    ) -> Received {
        while true {
            let remaining = deadline - .now
            guard remaining > .zero else { return .timedOut }
            var poller = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, milliseconds(remaining))
            if ready < 0, errno == EINTR { continue }
            if ready < 0 { return .end }
            if ready == 0 { continue }
            let wanted = max(1, min(atMost, scratch.count))
            let count = scratch.withUnsafeMutableBytes { recv(client, $0.baseAddress, wanted, 0) }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
            if count <= 0 { return .end }
            buffer += scratch[0..<count]
            return .data
        }
    }

    /// Writes all of `bytes` unless the client goes away or `deadline` passes; `true` when all went.
    private func sendAll(_ client: Int32, _ bytes: [UInt8], until deadline: ContinuousClock.Instant) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let remaining = deadline - .now
            guard remaining > .zero else { return false }
            var poller = pollfd(fd: client, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&poller, 1, milliseconds(remaining))
            if ready < 0, errno == EINTR { continue }
            if ready < 0 { return false }
            if ready == 0 { continue }
            let sent = bytes.withUnsafeBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return send(client, base + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }
}

/// Runs one request's task (the transport's `send`, then the answer) on a Dispatch thread of its own,
/// a private serial queue, instead of the cooperative pool. On Linux that pool is Dispatch's global
/// queue, only as wide as the machine has cores, and a client in the same process can fill it with
/// blocking work (CurlTransport runs libcurl there): the server would then not answer the very
/// request that client waits for until it timed out.
private final class ConnectionExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "moose.loopback-http.transport")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// Runs `body` on a new detached POSIX thread; false (nothing runs) when none can be made.
private func startThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Work: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let work = Unmanaged.passRetained(Work(body)).toOpaque()
    var attributes = pthread_attr_t()
    _ = pthread_attr_init(&attributes)
    defer { _ = pthread_attr_destroy(&attributes) }
    _ = pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    #if canImport(Darwin)
    var thread: pthread_t? = nil
    let created = pthread_create(
        &thread, &attributes,
        { raw in
            Unmanaged<Work>.fromOpaque(raw).takeRetainedValue().body()
            return nil
        }, work)
    #else
    var thread = pthread_t()
    let created = pthread_create(
        &thread, &attributes,
        { raw in
            guard let raw else { return nil }
            Unmanaged<Work>.fromOpaque(raw).takeRetainedValue().body()
            return nil
        }, work)
    #endif
    guard created == 0 else {
        Unmanaged<Work>.fromOpaque(work).release()
        return false
    }
    return true
}

/// A poll timeout for `remaining`, at most one second (so no conversion can overflow), at least 1 ms.
private func milliseconds(_ remaining: Duration) -> Int32 {
    let bounded = min(remaining, .seconds(1))
    let (seconds, attoseconds) = bounded.components
    return Int32(max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
}

private func lastError() -> String { String(cString: strerror(errno)) }

private func closeDescriptor(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #elseif canImport(Musl)
    return Musl.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}
