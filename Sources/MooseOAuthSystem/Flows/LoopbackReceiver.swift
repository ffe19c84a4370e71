#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth
import Dispatch
import MooseCrypto
import MooseHTTP
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Receives the authorization redirect on 127.0.0.1 (RFC 8252 §7.3): a random free port, one
/// callback, a small page telling the user to go back to the terminal, and a deadline.
///
/// Every connection is hostile until its request proves otherwise: connections are served
/// concurrently (at most `maximumConnections` at once), each within its own deadline (10 s, never
/// past the login's), so a slow or idle local client cannot hold the real redirect back. With an
/// `expectedState`, a redirect whose `state` is missing or different (byte for byte) gets an error
/// page and is ignored: the receiver keeps waiting for the right one until its deadline.
///
/// ```swift
/// let receiver = try LoopbackReceiver()
/// let redirectURI = receiver.redirectURI          // http://127.0.0.1:53117/callback
/// … send the user to the authorization URL with state S …
/// let callback = try await receiver.waitForCallback(timeout: 300, expectedState: S)
/// ```
public final class LoopbackReceiver: Sendable {
    // The socket is only touched by `waitForCallback` (one caller) and `close`.
    private let socketDescriptor: Int32
    /// The port the receiver listens on.
    public let port: UInt16
    /// The path the redirect must use.
    public let path: String
    private let closed = ThreadLocked(false)
    /// The connection of the browser that brought the code, while the login finishes.
    private let held = ThreadLocked<Int32?>(nil)
    /// The most connections served at once; more are closed at once.
    public static let maximumConnections = 16
    /// How long one connection may take to send its request head.
    public static let connectionDeadline: TimeInterval = 10
    /// The largest request head read (bytes).
    public static let maximumRequestHead = 16_384

    /// Listens on 127.0.0.1 at `port` (0: a random free port).
    public init(port: UInt16 = 0, path: String = "/callback") throws {
        self.path = path
        // Close-on-exec: a program the app starts while this listens (a browser) must not inherit it.
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        #endif
        guard fd >= 0 else {
            throw OAuthError(OAuthError.invalidConfiguration, "cannot create a socket for the redirect")
        }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let code = errno
            _ = Glibc_close(fd)
            // The reason, and for a port in use the way out (the redirect's port is the caller's choice).
            let reason =
                code == EADDRINUSE
                ? "another program is listening there: stop it, or choose another port"
                : String(cString: strerror(code))
            throw OAuthError(
                OAuthError.invalidConfiguration, "cannot listen on 127.0.0.1:\(port) for the redirect (\(reason))")
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
    public var redirectURI: URL {
        // Built from a port number and a path given by the caller: only a malformed `path` fails.
        URL(string: "http://127.0.0.1:\(port)\(path)") ?? URL(fileURLWithPath: "/")
    }

    /// Stops listening.
    public func close() {
        let first = closed.withLock { closed in
            defer { closed = true }; return !closed
        }
        if first { _ = shutdown(socketDescriptor, Int32(SHUT_RDWR)); _ = Glibc_close(socketDescriptor) }
    }

    /// Waits for the redirect to `path` and returns its full URL. Other paths (a favicon) get a 404;
    /// with `expectedState`, redirects whose `state` differs get an error page; both are ignored.
    /// Throws `OAuthError.timedOut` at the deadline, or `CancellationError` when cancelled.
    ///
    /// With `holdingForOutcome`, the browser that brought a code gets no page yet: the login
    /// answers it with `finish(_:)` once the code exchange is done (so the page tells the truth:
    /// signed in, or the provider's refusal), or it is told "received" after `outcomeWait`.
    public func waitForCallback(
        timeout: TimeInterval = 300, expectedState: String? = nil,
        holdingForOutcome: Bool = false
    ) async throws -> URL {
        let deadline = Date().addingTimeInterval(timeout)
        let cancelled = LockedFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<URL, any Error>) in
                // A blocking accept loop: on its own thread (a private serial queue is served by a
                // thread of its own even while others block), never on the cooperative pool.
                DispatchQueue(label: "moose.loopback.accept").async {
                    continuation.resume(
                        with: Result {
                            try self.acceptLoop(
                                until: deadline, expectedState: expectedState, cancelled: cancelled,
                                holdingForOutcome: holdingForOutcome)
                        })
                }
            }
        } onCancel: {
            _ = cancelled.set()
        }
    }

    /// What one connection's request came to.
    enum Verdict: Equatable {
        /// The redirect the login waits for.
        case accepted(URL)
        /// Answered and ignored.
        case ignored
    }

    /// The blocking accept loop behind `waitForCallback` (internal: tests time it on a thread of
    /// their own, free of the cooperative pool's scheduling).
    func acceptLoop(
        until deadline: Date, expectedState: String?, cancelled: LockedFlag, holdingForOutcome: Bool = false
    ) throws -> URL {
        let outcome = CallbackOutcome()
        while true {
            if let url = outcome.url { return url }
            if cancelled.isSet { throw CancellationError() }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else {
                throw OAuthError(
                    OAuthError.timedOut,
                    "no authorization redirect arrived on 127.0.0.1:\(port) in time (if the browser showed the "
                        + "provider's error page instead, it may not accept the redirect URI "
                        + "http://127.0.0.1:\(port)\(path): register it, or use the port it has registered)")
            }
            var poller = pollfd(fd: socketDescriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(remaining, 0.1) * 1000))
            if ready <= 0 { continue }
            let client = accept(socketDescriptor, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC) // (accept4 is not in Swift's Glibc)
            guard outcome.beginConnection(limit: Self.maximumConnections) else {
                _ = Glibc_close(client)
                continue
            }
            let connectionDeadline = min(deadline, Date().addingTimeInterval(Self.connectionDeadline))
            // One private serial queue per connection: each gets a thread even while the others
            // block (a shared concurrent queue runs only as many as there are cores), and none
            // outlives its own deadline. The accept loop never waits for them.
            DispatchQueue(label: "moose.loopback.connection").async {
                defer { outcome.endConnection() }
                let head = Self.readRequestHead(client, until: connectionDeadline)
                let (verdict, answered) = self.answer(
                    client, head: head, expectedState: expectedState, alreadyDone: outcome.url != nil,
                    holding: holdingForOutcome)
                // The browser that brought the code waits for the login's outcome (`finish`).
                if answered || !self.hold(client) { _ = Glibc_close(client) }
                if case .accepted(let url) = verdict { outcome.deliver(url) }
            }
        }
    }

    /// How long a browser that brought a code waits for `finish(_:)` before it is told "received".
    public static let outcomeWait: TimeInterval = 20

    /// Keeps `client` for `finish(_:)`; `false` (the caller answers and closes it) when one is held already.
    private func hold(_ client: Int32) -> Bool {
        let taken = held.withLock { held -> Bool in
            guard held == nil else { return false }
            held = client
            return true
        }
        guard taken else {
            respond(client, status: "409 Conflict", page: LoopbackPage.alreadyDone)
            return false
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.outcomeWait) { [self] in
            answerHeld(LoopbackPage.received)
        }
        return true
    }

    /// Answers the browser that brought the code with what became of the login: signed in
    /// (`failure == nil`), or why not — the provider's refusal of the code exchange (`invalid_client`,
    /// `invalid_grant`…), an ID token that did not validate. Once; later calls do nothing.
    public func finish(_ failure: OAuthError?) {
        answerHeld(failure.map(LoopbackPage.exchangeFailed) ?? LoopbackPage.signedIn)
    }

    private func answerHeld(_ page: LoopbackPage) {
        guard
            let client = held.withLock({ held -> Int32? in
                defer { held = nil }; return held
            })
        else { return }
        respond(client, status: "200 OK", page: page)
        _ = Glibc_close(client)
    }

    /// Decides and answers one request; `answered` is false for a code redirect held for its
    /// outcome (`holding`), which the caller keeps open for `finish(_:)`.
    private func answer(
        _ client: Int32, head: [UInt8], expectedState: String?, alreadyDone: Bool,
        holding: Bool
    ) -> (verdict: Verdict, answered: Bool) {
        guard let target = Self.requestTarget(fromHead: head) else {
            respond(client, status: "400 Bad Request", page: LoopbackPage.badRequest)
            return (.ignored, true)
        }
        let pathPart =
            target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init)
            ?? target
        guard pathPart == path, let url = URL(string: "http://127.0.0.1:\(port)\(target)") else {
            respond(client, status: "404 Not Found", page: LoopbackPage.notFound)
            return (.ignored, true)
        }
        let items = RequestBuilder.decodeForm(
            URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery ?? "")
        func value(_ name: String) -> String? { items.first { $0.0 == name }?.1 }
        if let expectedState {
            guard let state = value("state"), ConstantTime.equals(Array(state.utf8), Array(expectedState.utf8)) else {
                respond(client, status: "400 Bad Request", page: LoopbackPage.stateMismatch)
                return (.ignored, true)
            }
        }
        if alreadyDone {
            respond(client, status: "409 Conflict", page: LoopbackPage.alreadyDone)
            return (.ignored, true)
        }
        if let error = value("error") {
            respond(
                client, status: "200 OK",
                page: LoopbackPage.providerError(error, description: value("error_description")))
            return (.accepted(url), true)
        }
        if holding { return (.accepted(url), false) }
        respond(client, status: "200 OK", page: LoopbackPage.received)
        return (.accepted(url), true)
    }

    /// The request target of a `GET` request head (`/callback?code=…`), or `nil` when the head is
    /// not a well-formed `GET <origin-form> HTTP/1.x` line. Total over any bytes.
    package static func requestTarget(fromHead bytes: [UInt8]) -> String? {
        let lineEnd = bytes.firstIndex(of: 0x0A) ?? bytes.endIndex
        var line = bytes[bytes.startIndex..<lineEnd]
        if line.last == 0x0D { line = line.dropLast() }
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].elementsEqual("GET".utf8), parts[2].starts(with: "HTTP/1.".utf8),
            let first = parts[1].first, first == UInt8(ascii: "/"),
            parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        return String(decoding: parts[1], as: UTF8.self)
    }

    /// Reads a request head (up to `maximumRequestHead` bytes) until the blank line, the peer's
    /// end, or `deadline` — one overall deadline, however slowly the bytes trickle in.
    static func readRequestHead(_ client: Int32, until deadline: Date) -> [UInt8] {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while data.count < maximumRequestHead {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { break }
            var poller = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(max(1, min(remaining, 1) * 1000)))
            if ready < 0, errno == EINTR { continue }
            if ready < 0 { break }
            if ready == 0 { continue }
            let count = buffer.withUnsafeMutableBytes {
                recv(client, $0.baseAddress, min($0.count, maximumRequestHead - data.count), Int32(MSG_DONTWAIT))
            }
            if count < 0, errno == EAGAIN || errno == EINTR { continue }
            if count <= 0 { break }
            data += buffer[0..<count]
            if data.count >= 4, data.suffix(4).elementsEqual([13, 10, 13, 10]) { break }
            if let first = data.firstIndex(of: 0x0A), data[(first + 1)...].contains(0x0A), containsBlankLine(data) {
                break
            }
        }
        return data
    }

    private static func containsBlankLine(_ data: [UInt8]) -> Bool {
        var previous: UInt8 = 0, beforePrevious: UInt8 = 0
        for byte in data {
            if byte == 0x0A, previous == 0x0A || (previous == 0x0D && beforePrevious == 0x0A) { return true }
            beforePrevious = previous
            previous = byte
        }
        return false
    }

    private func respond(_ client: Int32, status: String, page: LoopbackPage) {
        let html = page.html
        let response =
            "HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(html.utf8.count)\r\n"
            + "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
            + "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\nReferrer-Policy: no-referrer\r\n"
            + "Connection: close\r\n\r\n" + html
        var bytes = Array(response.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeMutableBytes {
                send(client, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent <= 0 { return }
            offset += sent
        }
    }
}

/// The first accepted callback, and how many connections are being served.
final class CallbackOutcome: Sendable {
    private let state = ThreadLocked<(accepted: URL?, active: Int)>((nil, 0))

    var url: URL? { state.withLock { $0.accepted } }

    func deliver(_ url: URL) { state.withLock { if $0.accepted == nil { $0.accepted = url } } }

    func beginConnection(limit: Int) -> Bool {
        state.withLock {
            guard $0.active < limit else { return false }
            $0.active += 1
            return true
        }
    }

    func endConnection() { state.withLock { $0.active -= 1 } }
}

private func Glibc_close(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}

/// A flag set once, shared by a waiter and whoever cancels it.
final class LockedFlag: Sendable {
    private let value = ThreadLocked(false)
    /// Sets the flag; `true` if this call set it.
    func set() -> Bool {
        value.withLock { value in
            defer { value = true }; return !value
        }
    }
    var isSet: Bool { value.withLock { $0 } }
}
