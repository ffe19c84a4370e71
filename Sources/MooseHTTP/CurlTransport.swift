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
package import HTTPTypes

/// An `HTTPTransport` over libcurl, loaded with `dlopen` on the first request.
///
/// Programs that only sometimes talk to the network (the `moose` CLI) use it so that start-up does
/// not pay for libcurl and the libraries behind it; programs that always do can use URLSession.
/// Redirects are not followed (the caller decides), only `http` and `https` are allowed, and the
/// response body is capped.
///
/// ```swift
/// let transport = CurlTransport()
/// let response = try await transport.send(APIRequest(url: URL(string: "https://id.example.com/jwks")!))
/// ```
public struct CurlTransport: HTTPTransport {
    /// The largest response body accepted.
    public var maximumResponseSize: Int
    /// The time allowed to establish a connection.
    public var connectTimeout: TimeInterval
    /// A PEM file of the certificate authorities to trust instead of the system's (a provider behind a
    /// private CA). `nil` trusts the file the environment names, `$SSL_CERT_FILE` else
    /// `$CURL_CA_BUNDLE` (the variables OpenSSL's tools, curl, Python and Go read), and the system's
    /// store when neither is set. A certificate no trusted CA signed fails the request with
    /// `HTTPRequestError.tls`.
    public var caFile: String?
    /// The server keys each pinned host must present (`CURLOPT_PINNEDPUBLICKEY`), checked after the
    /// certificate's normal verification; a request to a pinned host whose server presents another key
    /// fails with `HTTPRequestError.tls` ("… is not one of the pinned keys …"). Empty: nothing pinned.
    public var pins: PublicKeyPins

    /// A transport.
    ///
    /// - Parameters:
    ///   - maximumResponseSize: the largest response body accepted, in bytes.
    ///   - connectTimeout: the time allowed to establish a connection.
    ///   - caFile: a PEM file of the CAs to trust instead of the system's (`nil`: the environment's
    ///     `$SSL_CERT_FILE` or `$CURL_CA_BUNDLE`, else the system's).
    ///   - pins: public-key pins for the hosts that have them (see `PublicKeyPins`).
    public init(
        maximumResponseSize: Int = 16 << 20, connectTimeout: TimeInterval = 10, caFile: String? = nil,
        pins: PublicKeyPins = PublicKeyPins()
    ) {
        self.maximumResponseSize = maximumResponseSize
        self.connectTimeout = connectTimeout
        self.caFile = caFile
        self.pins = pins
    }

    /// The CA file the environment names for a transport given none: `SSL_CERT_FILE`, else
    /// `CURL_CA_BUNDLE` (an empty value is no value); `nil` when neither is set. Read per request, so a
    /// long-running process follows a change of its environment as a new `curl` would.
    package static func environmentCAFile(
        _ variable: (String) -> String? = { name in getenv(name).map { String(cString: $0) } }
    ) -> String? {
        ["SSL_CERT_FILE", "CURL_CA_BUNDLE"].lazy.compactMap(variable).first { !$0.isEmpty }
    }

    /// `true` when libcurl can be loaded on this machine.
    public static var isAvailable: Bool { moose_curl_load(nil, 0) == 1 }

    public func send(_ request: APIRequest) async throws -> APIResponse {
        try Task.checkCancellation()
        let flag = CancelFlag()
        let maximumResponseSize = self.maximumResponseSize, connectTimeout = self.connectTimeout, caFile = self.caFile,
            pins = self.pins
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<APIResponse, any Error>) in
                // libcurl's easy API blocks: run it on a Dispatch thread, never on the cooperative pool.
                DispatchQueue.global().async {
                    continuation.resume(
                        with: Result {
                            try CurlTransport.perform(
                                request, maximumResponseSize: maximumResponseSize,
                                connectTimeout: connectTimeout, caFile: caFile, pins: pins, cancel: flag)
                        })
                }
            }
        } onCancel: {
            flag.cancel()
        }
    }

    /// Sends `request` synchronously, blocking the calling thread (for command-line tools).
    public func sendBlocking(_ request: APIRequest) throws -> APIResponse {
        try CurlTransport.perform(
            request, maximumResponseSize: maximumResponseSize, connectTimeout: connectTimeout,
            caFile: caFile, pins: pins, cancel: CancelFlag())
    }

    /// libcurl's codes for a failed TLS handshake or certificate check (curl/curl.h): retrying does not
    /// help, trusting the right CA (or fixing the server's certificate) does.
    static let tlsCodes: Set<Int32> = [35, 51, 53, 54, 58, 59, 60, 64, 66, 77, 80, 82, 83, 90, 91, 98]

    /// What OpenSSL says (in libcurl's error buffer) when the server's answer to the handshake is no
    /// TLS record at all — a plain-http server.
    static let notTLSMessages = ["wrong version number", "packet length too long"]

    static func perform(
        _ request: APIRequest, maximumResponseSize: Int, connectTimeout: TimeInterval,
        caFile: String?, pins: PublicKeyPins, cancel: CancelFlag
    ) throws -> APIResponse {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw HTTPRequestError(
                HTTPRequestError.invalidRequest, "only http and https URLs are supported: \(request.redactedURL)")
        }
        // No CA file given: the environment's, as `caFile` says (here, for `send` and `sendBlocking` alike).
        let caFile = caFile ?? environmentCAFile()
        var request = request
        if let file = request.bodyFile {
            // libcurl's easy API here takes the body in memory: fine for the CLI's small requests.
            guard let data = FileManager.default.contents(atPath: file.path) else {
                throw HTTPRequestError(HTTPRequestError.invalidRequest, "cannot read the body file \(file.path)")
            }
            request.body = data
        }
        // Pinned only over TLS: plain http (loopback only, for token traffic) has no key to pin.
        let pinned = scheme == "https" ? url.host.flatMap { pins.curlPinnedPublicKey(for: $0) } : nil
        let headerLines = request.headerFields.http1Lines.map { "\($0.name): \($0.value)" }
        var response = moose_curl_response()
        defer { moose_curl_response_free(&response) }
        let code: Int32 = withCStrings(headerLines) { headerPointers in
            url.absoluteString.withCString { url in
                request.method.rawValue.withCString { method in
                    let perform = { (body: UnsafePointer<UInt8>?, count: Int) -> Int32 in
                        withOptionalCString(caFile) { caFile in
                            withOptionalCString(pinned) { pinned in
                                moose_curl_perform(
                                    method, url, headerPointers, headerLines.count, body, count,
                                    Int(request.timeout * 1000), Int(connectTimeout * 1000),
                                    maximumResponseSize, cancel.pointer, caFile, pinned, &response)
                            }
                        }
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
            throw failure(
                code: code, message: message, truncated: response.truncated != 0, url: url, pinned: pinned != nil,
                pins: pins, request)
        }
        let body = response.body.map { Data(bytes: $0, count: response.body_length) } ?? Data()
        let headerBytes =
            response.headers.map { pointer in
                pointer.withMemoryRebound(to: UInt8.self, capacity: response.headers_length) {
                    Array(UnsafeBufferPointer(start: $0, count: response.headers_length))
                }
            } ?? []
        guard let status = APIResponse.status(code: Int(response.status)) else {
            throw HTTPRequestError(
                HTTPRequestError.transport,
                "\(request.redactedURL): the status line has no valid code (\(response.status))")
        }
        return APIResponse(status: status, headerFields: parseHeaders(headerBytes), body: body)
    }

    /// The error for libcurl's failure `code` (with its error buffer's `message`): a body over the limit,
    /// a timeout, a pinning mismatch, a name that did not resolve, plain http where TLS was expected, a
    /// TLS failure, or any other transport failure. The URL is the error's own `url`, shown by its
    /// description: not repeated in the message.
    static func failure(
        code: Int32, message: String, truncated: Bool, url: URL, pinned: Bool, pins: PublicKeyPins,
        _ request: APIRequest
    ) -> HTTPRequestError {
        if truncated {
            return HTTPRequestError(
                HTTPRequestError.responseTooLarge, message, method: request.method, url: request.redactedURL)
        }
        // CURLE_OPERATION_TIMEDOUT = 28
        if code == 28 { return HTTPRequestError.timeout(message, request) }
        if let host = url.host, pinned {
            // CURLE_SSL_PINNEDPUBKEYNOTMATCH = 90; CURLE_NOT_BUILT_IN = 4 (no pinning in this libcurl).
            if code == 90 { return pins.mismatch(host: host, request) }
            if code == 4 {
                return HTTPRequestError(
                    HTTPRequestError.pinning, "\(message); nothing was sent to the pinned host \(host)",
                    method: request.method, url: request.redactedURL)
            }
        }
        // CURLE_COULDNT_RESOLVE_HOST = 6: not an outage of the provider, a name that did not resolve.
        if code == 6 {
            return HTTPRequestError(
                HTTPRequestError.nameNotResolved, "the name \(url.host ?? "") did not resolve",
                method: request.method, url: request.redactedURL)
        }
        // CURLE_SSL_CONNECT_ERROR = 35 with OpenSSL's "wrong version number" (or "packet length too
        // long"): the server's first bytes were no TLS record — plain http on that port.
        if code == 35, Self.notTLSMessages.contains(where: { message.contains($0) }) {
            let port = url.port.map { ":\($0)" } ?? ""
            return HTTPRequestError(
                HTTPRequestError.notTLS, "the server at \(url.host ?? "")\(port) did not speak TLS (\(message))",
                method: request.method, url: request.redactedURL)
        }
        if tlsCodes.contains(code) {
            return HTTPRequestError(HTTPRequestError.tls, message, method: request.method, url: request.redactedURL)
        }
        return HTTPRequestError.transportFailure(message, request)
    }

    /// The most header fields kept from one response; the rest are dropped.
    package static let maximumHeaderFields = 256

    /// Parses raw response header block(s) as libcurl hands them over, on bytes: lines end in CRLF
    /// (or a bare LF), and with several blocks (a `100 Continue`, a proxy's answer) the last one wins.
    /// Total over any input: obsolete line folding, lines without a colon, names that are not RFC 9110
    /// tokens and values with control characters (other than tab) are dropped, never trusted.
    package static func parseHeaders(_ bytes: [UInt8]) -> HTTPFields {
        var headers = HTTPFields()
        var count = 0
        var start = 0
        while start < bytes.count {
            var end = start
            while end < bytes.count, bytes[end] != 0x0A { end += 1 }
            var lineEnd = end
            if lineEnd > start, bytes[lineEnd - 1] == 0x0D { lineEnd -= 1 }
            let line = bytes[start..<lineEnd]
            start = end + 1
            if line.starts(with: Array("HTTP/".utf8)) {
                headers = HTTPFields()
                count = 0
                continue
            }
            guard let first = line.first, first != 0x20, first != 0x09, let colon = line.firstIndex(of: 0x3A) else {
                continue
            }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { continue }
            var valueStart = colon + 1, valueEnd = line.endIndex
            while valueStart < valueEnd, line[valueStart] == 0x20 || line[valueStart] == 0x09 { valueStart += 1 }
            while valueEnd > valueStart, line[valueEnd - 1] == 0x20 || line[valueEnd - 1] == 0x09 { valueEnd -= 1 }
            let value = line[valueStart..<valueEnd]
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }), count < maximumHeaderFields else {
                continue
            }
            guard let fieldName = HTTPField.Name(String(decoding: name, as: UTF8.self)) else { continue }
            headers.append(HTTPField(name: fieldName, value: value))
            count += 1
        }
        return headers
    }
}

/// RFC 9110 `tchar`.
func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
    case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: true
    default: false
    }
}

/// A valid byte nobody writes (the terminating NUL of an empty static string, in read-only memory):
/// curl wants a non-null pointer even for an empty body.
private var emptyBody: UnsafePointer<UInt8> { ("" as StaticString).utf8Start }

/// A flag the transfer polls; set from the cancellation handler on another thread.
// unchecked: C polls the flag through a pointer; every access is a C11 atomic (moose_cancel_flag_*)
final class CancelFlag: @unchecked Sendable {
    // An Int32 written once (0 → 1) and polled by C, both through C11 atomics (moose_cancel_flag_*).
    let pointer: UnsafeMutablePointer<Int32>

    init() {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: 0)
    }

    deinit { pointer.deallocate() }

    func cancel() { moose_cancel_flag_set(pointer) }
    var isCancelled: Bool { moose_cancel_flag_get(pointer) != 0 }
}

/// Calls `body` with a C array of C strings.
func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    var storage: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    defer { for pointer in storage { free(pointer) } }
    return storage.withUnsafeMutableBufferPointer { buffer in
        guard let base = buffer.baseAddress else { return body(nil) }
        return base.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) { body($0) }
    }
}

/// Calls `body` with `string` as a C string, or with `nil`.
func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
