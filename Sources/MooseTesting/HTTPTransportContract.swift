#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
import HTTPTypes
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What every `HTTPTransport` must do, as executable checks: run them against Moose's transports
/// (URLSession, libcurl, AsyncHTTPClient) and an app's own, from any test framework. Each check
/// throws an `HTTPTransportContract.Violation` naming the rule it found broken.
///
/// The checks talk to a real server on this machine at `base`, which must serve the routes of
/// Moose's test server (`tools/testserver/http_test_server.py`, Python standard library only:
/// `/echo`, `/with-headers`, `/redirect`, `/slow`, `/bytes`).
///
/// ```swift
/// @Test func myTransportKeepsTheContract() async throws {
///     try await HTTPTransportContract.verify(MyTransport(), base: testServerURL)
///     try await HTTPTransportContract.verifyFileTransfers(MyTransport(), base: testServerURL)
/// }
/// ```
public enum HTTPTransportContract {
    /// A broken rule.
    public struct Violation: Error, CustomStringConvertible {
        /// Which rule, and what was seen.
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Every check of plain requests, in order (about 2 s against a local server).
    public static func verify(_ transport: any HTTPTransport, base: URL) async throws {
        try await responseHeadersArrive(transport, base: base)
        try await requestHeadersArriveAsHTTP1Lines(transport, base: base)
        try await bodiesArriveByteForByte(transport, base: base)
        try await bodyFilesAreSent(transport, base: base)
        try await redirectsAreNotFollowed(transport, base: base)
        try await timeoutsAreReported(transport, base: base)
        try await cancellationEndsTheRequest(transport, base: base)
    }

    /// Every check of downloads and uploads with progress.
    public static func verifyFileTransfers(_ transport: any FileTransferTransport, base: URL) async throws {
        try await downloadsStreamToDiskInBoundedMemory(transport, base: base)
        try await cancelledDownloadsStop(transport, base: base)
        try await uploadsStreamFromAFileWithProgress(transport, base: base)
    }

    // MARK: - Plain requests

    /// Response headers reach the caller: a `WWW-Authenticate` challenge, `Retry-After`, `Date`.
    public static func responseHeadersArrive(_ transport: any HTTPTransport, base: URL) async throws {
        var components = URLComponents(url: base.appendingPathComponent("with-headers"), resolvingAgainstBaseURL: false)
        components?.queryItems = [
            URLQueryItem(name: "h", value: #"WWW-Authenticate:Bearer error="invalid_token""#),
            URLQueryItem(name: "h", value: "Retry-After:7")
        ]
        guard let url = components?.url else { throw Violation("cannot build the /with-headers URL") }
        let response = try await transport.send(APIRequest(url: url))
        try check(response.status.code == 200, "GET /with-headers answered \(response.status)")
        try check(
            response.headerFields[.wwwAuthenticate] == #"Bearer error="invalid_token""#,
            "WWW-Authenticate arrived as \(response.headerFields[.wwwAuthenticate] ?? "nothing")")
        try check(
            response.headerFields[.retryAfter] == "7",
            "Retry-After arrived as \(response.headerFields[.retryAfter] ?? "nothing")")
        try check(response.headerFields[.date].flatMap(HTTPDate.parse) != nil, "no parsable Date header")
    }

    /// Request headers arrive as HTTP/1.1 lines: a `Cookie` set as one string (which `HTTPFields`
    /// keeps as crumbs) as one `; `-joined header, repeated fields joined with `, `.
    public static func requestHeadersArriveAsHTTP1Lines(_ transport: any HTTPTransport, base: URL) async throws {
        var request = APIRequest(url: base.appendingPathComponent("echo"))
        request.headerFields[.cookie] = "a=1; b=2"
        request.headerFields[.accept] = "application/json"
        request.headerFields.append(HTTPField(name: .accept, value: "text/plain"))
        request.headerFields[.authorization] = "Bearer contract-token"
        let echo = try await echo(transport.send(request))
        try check(echo.headers["cookie"] == "a=1; b=2", "Cookie arrived as \(echo.headers["cookie"] ?? "nothing")")
        try check(
            echo.headers["accept"] == "application/json, text/plain",
            "Accept arrived as \(echo.headers["accept"] ?? "nothing")")
        try check(echo.headers["authorization"] == "Bearer contract-token", "Authorization did not arrive as set")
    }

    /// A binary body arrives byte for byte, with its method.
    public static func bodiesArriveByteForByte(_ transport: any HTTPTransport, base: URL) async throws {
        let body = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        var request = APIRequest(method: .put, url: base.appendingPathComponent("echo/body"), body: body)
        request.headerFields[.contentType] = "application/octet-stream"
        let echo = try await echo(transport.send(request))
        try check(
            echo.method == "PUT" && echo.body_size == body.count,
            "PUT /echo saw \(echo.method) with \(echo.body_size) bytes of \(body.count)")
        try check(Data(base64Encoded: echo.body) == body, "the body arrived changed")
    }

    /// `APIRequest.bodyFile` is sent as the body.
    public static func bodyFilesAreSent(_ transport: any HTTPTransport, base: URL) async throws {
        let file = temporaryFile("contract-body")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(repeating: 0x2A, count: 3_000_000).write(to: file)
        var request = APIRequest(method: .post, url: base.appendingPathComponent("echo/file"))
        request.bodyFile = file
        request.headerFields[.contentType] = "application/octet-stream"
        let echo = try await echo(transport.send(request))
        try check(echo.body_size == 3_000_000, "the body file arrived with \(echo.body_size) of 3000000 bytes")
    }

    /// A 3xx reaches the caller as it is: token traffic never follows a `Location`.
    public static func redirectsAreNotFollowed(_ transport: any HTTPTransport, base: URL) async throws {
        for status in [302, 307] {
            var components = URLComponents(url: base.appendingPathComponent("redirect"), resolvingAgainstBaseURL: false)
            components?.queryItems = [
                URLQueryItem(name: "status", value: String(status)),
                URLQueryItem(name: "to", value: base.appendingPathComponent("echo/redirected").absoluteString)
            ]
            guard let url = components?.url else { throw Violation("cannot build the /redirect URL") }
            var request = APIRequest(method: .post, url: url, body: Data("client_secret=s".utf8))
            request.headerFields[.authorization] = "Bearer contract-token"
            let response = try await transport.send(request)
            try check(
                response.status.code == status, "a \(status) redirect was followed (the caller saw \(response.status))")
        }
    }

    /// A request that outlives its `timeout` fails with `HTTPRequestError.timedOut`, long before the
    /// server's 60 s answer (the bound is loose: on a loaded 2-core machine, blocking work elsewhere in
    /// a test process has delayed timers by up to 20 s).
    public static func timeoutsAreReported(_ transport: any HTTPTransport, base: URL) async throws {
        let started = ContinuousClock.now
        var request = APIRequest(
            url: base.appendingPathComponent("slow").appending(queryItems: [URLQueryItem(name: "seconds", value: "60")])
        )
        request.timeout = 0.5
        do {
            _ = try await transport.send(request)
            throw Violation("a 0.5 s request to a 60 s endpoint succeeded")
        } catch let error as HTTPRequestError {
            try check(error.code == HTTPRequestError.timedOut, "a timeout was reported as \(error.code)")
        }
        try check(ContinuousClock.now - started < .seconds(40), "the timeout took \(ContinuousClock.now - started)")
    }

    /// Cancelling the task ends the request with `CancellationError`.
    public static func cancellationEndsTheRequest(_ transport: any HTTPTransport, base: URL) async throws {
        let url = base.appendingPathComponent("slow").appending(queryItems: [URLQueryItem(name: "seconds", value: "60")]
        )
        let task = Task { try await transport.send(APIRequest(url: url, timeout: 90)) }
        try await Task.sleep(nanoseconds: 200_000_000)
        let started = ContinuousClock.now
        task.cancel()
        do {
            _ = try await task.value
            throw Violation("a cancelled request completed")
        } catch is CancellationError {
        } catch let violation as Violation {
            throw violation
        } catch {
            throw Violation("cancellation was reported as \(error)")
        }
        try check(ContinuousClock.now - started < .seconds(40), "cancellation took \(ContinuousClock.now - started)")
    }

    // MARK: - Files

    /// A large download goes to disk (mode 0600, the exact size, the server's bytes) with monotonic
    /// progress up to the total, while the process's resident memory grows by less than half the body.
    ///
    /// The memory figure is the whole process's resident set: other work running at the same time
    /// counts too (in Moose's own parallel test run, up to 82 MiB was seen during one download), hence
    /// the large default size. Pass
    /// `checksMemory: false` under AddressSanitizer, whose quarantine keeps freed memory resident.
    public static func downloadsStreamToDiskInBoundedMemory(
        _ transport: any FileTransferTransport, base: URL,
        size: Int = 256 << 20, checksMemory: Bool = true
    ) async throws {
        let destination = temporaryFile("contract-download")
        defer { try? FileManager.default.removeItem(at: destination) }
        let url = base.appendingPathComponent("bytes").appending(queryItems: [
            URLQueryItem(name: "n", value: String(size))
        ])
        releaseFreeMemory()
        let exactPeak = resetPeakResidentBytes()
        let baseline = residentBytes()
        var peak = baseline
        let transfer = try transport.download(APIRequest(url: url, timeout: 60), to: destination)
        var steps: [TransferProgress] = []
        for await step in transfer.progress {
            steps.append(step)
            peak = max(peak, residentBytes())
        }
        let response = try await transfer.response
        // The kernel's own high-water mark since the reset catches a peak between two progress reports.
        peak = max(peak, residentBytes(), exactPeak ? peakResidentBytes() : 0)
        try check(response.status.code == 200, "the download answered \(response.status)")
        let attributes = try FileManager.default.attributesOfItem(atPath: destination.path)
        try check((attributes[.size] as? Int) == size, "the file has \(attributes[.size] ?? "no") bytes of \(size)")
        try check((attributes[.posixPermissions] as? Int) == 0o600, "the file's mode is not 0600")
        try check(steps.last?.completed == Int64(size), "progress ended at \(steps.last?.completed ?? -1) of \(size)")
        try check(steps.count >= 2, "progress was reported only once")
        try check(zip(steps, steps.dropFirst()).allSatisfy { $0.completed <= $1.completed }, "progress went backwards")
        // The server sends bytes(range(256)) repeated: byte i is i % 256.
        let file = open(destination.path, O_RDONLY)
        try check(file >= 0, "cannot open the downloaded file")
        defer { close(file) }
        for offset in stride(from: 0, to: size, by: max(1, size / 64)) + [size - 1] {
            var byte: UInt8 = 0
            let read = pread(file, &byte, 1, off_t(offset))
            try check(
                read == 1 && byte == UInt8(offset % 256),
                "byte \(offset) is \(read == 1 ? String(byte) : "missing"), not \(offset % 256)")
        }
        let growth = peak - baseline
        try check(
            !checksMemory || growth < size / 2,
            "resident memory grew by \(growth >> 20) MiB during a \(size >> 20) MiB download")
    }

    /// Cancelling a download midway ends it with `CancellationError` before the whole body arrived.
    public static func cancelledDownloadsStop(_ transport: any FileTransferTransport, base: URL) async throws {
        let destination = temporaryFile("contract-cancelled")
        defer { try? FileManager.default.removeItem(at: destination) }
        // 763 chunks of 64 KiB, 50 ms apart: ~38 s if the cancellation never takes effect. The margin is
        // for the consumer, not the transport: under ThreadSanitizer on 2 busy cores the loop below
        // once got its first progress step only after a 10 ms-paced body (~8 s) had wholly arrived.
        let size = 50_000_000
        let url = base.appendingPathComponent("bytes").appending(queryItems: [
            URLQueryItem(name: "n", value: String(size)),
            URLQueryItem(name: "pause", value: "0.05")
        ])
        let transfer = try transport.download(APIRequest(url: url, timeout: 60), to: destination)
        var received: Int64 = 0
        for await step in transfer.progress {
            received = step.completed
            if received > 0 { transfer.cancel() }
        }
        do {
            _ = try await transfer.response
            throw Violation("a cancelled download completed")
        } catch is CancellationError {
        } catch let violation as Violation {
            throw violation
        } catch {
            throw Violation("a cancelled download failed with \(error), not CancellationError")
        }
        try check(received < Int64(size), "the whole body arrived before the cancellation took effect")
    }

    /// An upload streams a file as the body, with progress up to its size.
    public static func uploadsStreamFromAFileWithProgress(_ transport: any FileTransferTransport, base: URL)
        async throws
    {
        let file = temporaryFile("contract-upload")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(repeating: 42, count: 3_000_000).write(to: file)
        var request = APIRequest(method: .put, url: base.appendingPathComponent("echo/upload"))
        request.headerFields[.contentType] = "application/octet-stream"
        let transfer = try transport.upload(request, fromFile: file)
        var last: TransferProgress? = nil
        for await step in transfer.progress { last = step }
        let echo = try echo(try await transfer.response)
        try check(
            echo.body_size == 3_000_000 && echo.method == "PUT",
            "the upload arrived as \(echo.method) with \(echo.body_size) bytes")
        try check(last?.completed == 3_000_000, "upload progress ended at \(last?.completed ?? -1)")
    }

    // MARK: - Helpers

    /// What /echo saw.
    struct Echo: Decodable {
        let method: String
        let headers: [String: String]
        let body: String
        let body_size: Int
    }

    static func echo(_ response: APIResponse) throws -> Echo {
        guard response.status.code == 200 else { throw Violation("/echo answered \(response.status)") }
        do { return try JSONDecoder().decode(Echo.self, from: response.body) } catch {
            throw Violation("/echo's answer is not its JSON: \(error)")
        }
    }

    static func check(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw Violation(message()) }
    }

    static func temporaryFile(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-\(name)-\(UInt64.random(in: 0...UInt64.max))")
    }

    /// Gives freed heap pages back to the system (glibc's `malloc_trim(0)`, looked up at run time), so
    /// that memory a transport allocates shows up as growth instead of reusing pages that earlier work
    /// left resident (measured: without it, a transport holding a 64 MiB body in memory went unnoticed
    /// after the rest of the test suite had run).
    static func releaseFreeMemory() {
        #if os(Linux)
        typealias Trim = @convention(c) (Int) -> Int32
        if let symbol = dlsym(nil, "malloc_trim") { _ = unsafeBitCast(symbol, to: Trim.self)(0) }
        #endif
    }

    /// Resets the kernel's peak-RSS mark (Linux ≥ 4.0: "5" into /proc/self/clear_refs); `false` where
    /// that is not possible (then only the samples taken at progress reports count).
    static func resetPeakResidentBytes() -> Bool {
        #if os(Linux)
        let file = open("/proc/self/clear_refs", O_WRONLY)
        guard file >= 0 else { return false }
        defer { close(file) }
        return write(file, "5", 1) == 1
        #else
        return false
        #endif
    }

    /// The kernel's peak resident set size since the last reset (`VmHWM` in /proc/self/status), or 0.
    static func peakResidentBytes() -> Int {
        #if os(Linux)
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return 0 }
        return kilobytes * 1024
        #else
        return 0
        #endif
    }

    /// The process's resident set size (Linux: /proc/self/statm; elsewhere 0, so the memory bound holds trivially).
    static func residentBytes() -> Int {
        #if os(Linux)
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
        #else
        return 0
        #endif
    }
}
