#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Receives the authorization redirect on 127.0.0.1 (RFC 8252 §7.3): a random free port, one
/// callback, a small page telling the user to go back to the terminal, and a timeout.
///
/// ```swift
/// let receiver = try LoopbackReceiver()
/// let redirectURI = receiver.redirectURI          // http://127.0.0.1:53117/callback
/// … send the user to the authorization URL …
/// let callback = try await receiver.waitForCallback(timeout: 300)
/// ```
public final class LoopbackReceiver: @unchecked Sendable {
    // The socket is only touched by `waitForCallback` (one caller) and `close`.
    private let socketDescriptor: Int32
    /// The port the receiver listens on.
    public let port: UInt16
    /// The path the redirect must use.
    public let path: String
    private let closed = LockedFlag()

    /// Listens on 127.0.0.1 at `port` (0: a random free port).
    public init(port: UInt16 = 0, path: String = "/callback") throws {
        self.path = path
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw OAuthError(OAuthError.invalidConfiguration, "cannot create a socket for the redirect") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            _ = Glibc_close(fd)
            throw OAuthError(OAuthError.invalidConfiguration, "cannot listen on 127.0.0.1:\(port) for the redirect")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        socketDescriptor = fd
        self.port = UInt16(bigEndian: actual.sin_port)
    }

    deinit { close() }

    /// `http://127.0.0.1:<port><path>` — the loopback IP literal, not `localhost` (RFC 8252 §8.3).
    public var redirectURI: URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// Stops listening.
    public func close() {
        if closed.set() { _ = shutdown(socketDescriptor, Int32(SHUT_RDWR)); _ = Glibc_close(socketDescriptor) }
    }

    /// Waits for the redirect to `path` and returns its full URL. Other requests (a favicon) get a
    /// 404 and are ignored. Throws `OAuthError.timedOut`, or `CancellationError` when cancelled.
    public func waitForCallback(timeout: TimeInterval = 300) async throws -> URL {
        let deadline = Date().addingTimeInterval(timeout)
        let cancelled = LockedFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<URL, any Error>) in
                DispatchQueue.global().async {
                    continuation.resume(with: Result { try self.acceptLoop(until: deadline, cancelled: cancelled) })
                }
            }
        } onCancel: {
            _ = cancelled.set()
        }
    }

    private func acceptLoop(until deadline: Date, cancelled: LockedFlag) throws -> URL {
        while true {
            if cancelled.isSet { throw CancellationError() }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else {
                throw OAuthError(OAuthError.timedOut, "no authorization redirect arrived on 127.0.0.1:\(port) in time")
            }
            var poller = pollfd(fd: socketDescriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(remaining, 0.25) * 1000))
            if ready <= 0 { continue }
            let client = accept(socketDescriptor, nil, nil)
            guard client >= 0 else { continue }
            defer { _ = Glibc_close(client) }
            guard let target = readRequestTarget(client) else { continue }
            let pathPart = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
            guard pathPart == path, let url = URL(string: "http://127.0.0.1:\(port)\(target)") else {
                respond(client, status: "404 Not Found", body: "Not found.")
                continue
            }
            let failed = target.contains("error=")
            respond(client, status: "200 OK", body: failed
                ? "Sign-in did not complete. You can close this window and return to the terminal."
                : "Signed in. You can close this window and return to the terminal.")
            return url
        }
    }

    /// Reads the request head (up to 16 KiB, 5 s) and returns the request target of a GET.
    private func readRequestTarget(_ client: Int32) -> String? {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while data.count < 16_384 {
            let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            data += buffer[0..<count]
            if data.count >= 4, data.suffix(4) == [13, 10, 13, 10] { break }
            if String(decoding: data, as: UTF8.self).contains("\r\n\r\n") { break }
        }
        let head = String(decoding: data, as: UTF8.self)
        let parts = head.split(separator: "\r\n").first?.split(separator: " ") ?? []
        guard parts.count >= 2, parts[0] == "GET" else { return nil }
        return String(parts[1])
    }

    private func respond(_ client: Int32, status: String, body: String) {
        let html = "<!doctype html><html><head><meta charset=\"utf-8\"><title>moose</title></head>"
            + "<body style=\"font-family:sans-serif\"><p>\(body)</p></body></html>"
        let response = "HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(html.utf8.count)\r\n"
            + "Cache-Control: no-store\r\nConnection: close\r\n\r\n" + html
        var bytes = Array(response.utf8)
        _ = bytes.withUnsafeMutableBytes { send(client, $0.baseAddress, $0.count, 0) }
    }
}

private func Glibc_close(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}

/// A flag set once, thread-safe.
final class LockedFlag: @unchecked Sendable {
    private var value = false
    private let lock = NSLockLite()
    /// Sets the flag; `true` if this call set it.
    func set() -> Bool { lock.withLock { defer { value = true }; return !value } }
    var isSet: Bool { lock.withLock { value } }
}

/// A pthread mutex (FoundationEssentials has no NSLock).
final class NSLockLite: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
