public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import MooseHTTP
public import HTTPTypes
#if canImport(Security)
import Security
import CryptoKit
#endif

/// The default `HTTPTransport`: URLSession (FoundationNetworking on Linux).
///
/// Kept in its own module so that programs that must start fast (the `moose` CLI) do not link
/// FoundationNetworking and libcurl's dependencies; they use `CurlTransport` instead.
///
/// ```swift
/// let client = APIClient(transport: URLSessionTransport(configuration: .init(userAgent: "my-app/1.0")))
/// ```
public final class URLSessionTransport: FileTransferTransport, Sendable {
    /// Settings for the session.
    public struct Configuration: Sendable {
        /// Time allowed between bytes of a request (default 20 s).
        public var requestTimeout: TimeInterval
        /// Time allowed for a whole exchange (default 40 s).
        public var resourceTimeout: TimeInterval
        /// Concurrent connections per host.
        public var maximumConnectionsPerHost: Int
        /// Headers added to every request (the request's own win).
        public var defaultHeaders: HTTPFields
        /// `User-Agent`.
        public var userAgent: String

        /// A configuration.
        public init(
            requestTimeout: TimeInterval = 20, resourceTimeout: TimeInterval = 40, maximumConnectionsPerHost: Int = 6,
            defaultHeaders: HTTPFields = [:], userAgent: String = "Moose/0.1"
        ) {
            self.requestTimeout = requestTimeout
            self.resourceTimeout = resourceTimeout
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.defaultHeaders = defaultHeaders
            self.userAgent = userAgent
        }
    }

    // URLSession is thread-safe; the class holds only immutable references. Plain requests and
    // transfers use separate sessions: the transfer delegate's data callbacks must not see the
    // async API's tasks.
    private let session: URLSession
    private let transferSession: URLSession
    private let delegate: SessionDelegate
    /// Sessions this transport made (and invalidates when it goes); never the app's own.
    private let ownedSessions: [URLSession]
    /// Set when plain requests go through the app's session: the per-task delegate that refuses redirects.
    private let taskDelegate: NoRedirects?
    /// The public-key pins this transport's own sessions check (none with `init(session:)`).
    private let pinning: PinChecker?
    /// The configuration in use.
    public let configuration: Configuration
    /// A new URLRequest's header fields once `configuration.userAgent` is set as `User-Agent`, exactly
    /// as `URLRequest.setValue(_:forHTTPHeaderField:)` leaves them (`Self.fields(userAgent:)`).
    private let userAgentFields: [String: String]?

    /// A transport with its own session. Redirects are not followed: the caller sees the 3xx.
    public convenience init(configuration: Configuration = Configuration()) {
        self.init(configuration: configuration, pinning: nil)
    }

    /// A transport with its own session whose TLS connections to each pinned host must present one
    /// of its pinned keys, checked after the system's own evaluation of the server's trust; a key that
    /// is not pinned fails the request with `HTTPRequestError.tls` (never retried).
    ///
    /// - **Apple platforms:** the session delegate evaluates the server's trust
    ///   (`SecTrustEvaluateWithError`), then hashes the leaf certificate's SubjectPublicKeyInfo.
    /// - **Linux:** swift-corelibs-foundation asks no delegate about server trust and offers no
    ///   pinning option, so a pinned `URLSessionTransport` cannot be made there: use `CurlTransport`.
    ///
    /// - Throws: `HTTPRequestError.pinning` on Linux when `pins` is not empty (never a silently
    ///   unpinned transport).
    public convenience init(configuration: Configuration = Configuration(), pins: PublicKeyPins)
        throws(HTTPRequestError)
    {
        guard !pins.isEmpty else {
            self.init(configuration: configuration, pinning: nil)
            return
        }
        #if canImport(Security)
        self.init(configuration: configuration, pinning: PinChecker(pins))
        #else
        throw HTTPRequestError(
            HTTPRequestError.pinning,
            "URLSession on Linux (swift-corelibs-foundation) cannot check public-key pins (it asks no delegate about "
                + "server trust); pinned hosts \(pins.hosts.joined(separator: ", ")): use CurlTransport(pins:)")
        #endif
    }

    private init(configuration: Configuration, pinning: PinChecker?) {
        self.configuration = configuration
        userAgentFields = Self.fields(userAgent: configuration.userAgent)
        self.pinning = pinning
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = configuration.requestTimeout
        sessionConfiguration.timeoutIntervalForResource = configuration.resourceTimeout
        sessionConfiguration.httpMaximumConnectionsPerHost = configuration.maximumConnectionsPerHost
        sessionConfiguration.httpCookieStorage = nil
        sessionConfiguration.urlCache = nil
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        delegate = SessionDelegate(pinning: pinning)
        transferSession = URLSession(configuration: sessionConfiguration, delegate: delegate, delegateQueue: nil)
        #if canImport(FoundationNetworking)
        // Plain requests' completion handlers on a serial dispatch queue rather than an
        // OperationQueue's (`DispatchDelegateQueue`: the same order, less work per request).
        session = URLSession(
            configuration: sessionConfiguration, delegate: NoRedirects(pinning: pinning),
            delegateQueue: DispatchDelegateQueue())
        #else
        session = URLSession(
            configuration: sessionConfiguration, delegate: NoRedirects(pinning: pinning), delegateQueue: nil)
        #endif
        ownedSessions = [session, transferSession]
        taskDelegate = nil
    }

    /// A transport on the app's own `URLSession` (its proxy, TLS, cookie, cache and connection
    /// settings). Redirects are still not followed, and the caller sees the 3xx — how that is kept
    /// true differs by platform, because a session's own delegate would otherwise decide:
    ///
    /// - **Apple platforms:** plain requests run on `session` itself with a per-task delegate that
    ///   refuses redirects (`data(for:delegate:)`; a task delegate is asked before the session's).
    ///   Your session delegate still answers authentication challenges (TLS pinning, client certificates).
    /// - **Linux (swift-corelibs-foundation):** per-task delegates are not consulted about redirects
    ///   (measured: a 302 was followed, `Authorization` included, even to another origin). Moose
    ///   makes its own session from `session.configuration` (your proxy, headers, timeouts, cookie
    ///   storage and cache apply) with a delegate that refuses redirects; your session's delegate is
    ///   not asked about these requests.
    /// - **Everywhere:** downloads and uploads with progress run on a session made from
    ///   `session.configuration` with Moose's transfer delegate, and a response whose URL is not the
    ///   request's (a redirect some delegate let through) is refused with `HTTPRequestError.transport`.
    ///
    /// `configuration`'s user agent and default headers are added to each request; its timeouts and
    /// connection limit are not used (the session's own are).
    public init(session: URLSession, configuration: Configuration = Configuration()) {
        self.configuration = configuration
        userAgentFields = Self.fields(userAgent: configuration.userAgent)
        pinning = nil
        delegate = SessionDelegate(pinning: nil)
        transferSession = URLSession(configuration: session.configuration, delegate: delegate, delegateQueue: nil)
        #if canImport(FoundationNetworking)
        self.session = URLSession(configuration: session.configuration, delegate: NoRedirects(), delegateQueue: nil)
        ownedSessions = [self.session, transferSession]
        taskDelegate = nil
        #else
        self.session = session
        ownedSessions = [transferSession]
        taskDelegate = NoRedirects()
        #endif
    }

    deinit {
        for owned in ownedSessions { owned.finishTasksAndInvalidate() }
    }

    /// The header fields `setValue(userAgent, forHTTPHeaderField: "User-Agent")` leaves on a new
    /// URLRequest (the name as URLRequest spells it; none when it refuses the value).
    static func fields(userAgent: String) -> [String: String]? {
        var probe = URLRequest(url: URL(fileURLWithPath: "/"))
        probe.setValue(userAgent, forHTTPHeaderField: "User-Agent")
        return probe.allHTTPHeaderFields
    }

    func urlRequest(for request: APIRequest) throws(HTTPRequestError) -> URLRequest {
        guard let url = request.url else {
            throw HTTPRequestError.transportFailure("the request has no absolute URL", request)
        }
        var urlRequest = URLRequest(url: url)
        // URLRequest's method is GET until set.
        if request.method != .get { urlRequest.httpMethod = request.method.rawValue }
        // A second later than the request's timeout: `APIClient` enforces that one itself, and
        // URLSession's own timer firing at the same instant raced its cancellation into a deadlock
        // in swift-corelibs-foundation (the timeout error delivered on URLSession's queue while
        // the cancelling thread waits for that queue inside the task's status lock).
        urlRequest.timeoutInterval = request.timeout + 1
        #if canImport(FoundationNetworking)
        // What `setValue(userAgent, forHTTPHeaderField: "User-Agent")` makes of a new request, made
        // once: swift-corelibs-foundation's `setValue` capitalizes the name (`String.capitalized`,
        // ~3 µs) and copies the fields on every call.
        urlRequest.allHTTPHeaderFields = userAgentFields
        #else
        urlRequest.setValue(configuration.userAgent, forHTTPHeaderField: "User-Agent")
        #endif
        for field in configuration.defaultHeaders where !request.headerFields.contains(field.name) {
            urlRequest.setValue(field.value, forHTTPHeaderField: field.name.rawName)
        }
        for line in request.headerFields.http1Lines { urlRequest.setValue(line.value, forHTTPHeaderField: line.name) }
        return urlRequest
    }

    public func send(_ request: APIRequest) async throws -> APIResponse {
        try await exchange(request, endedBy: nil)
    }

    /// `send(_:)`, stopped when `end` is ended (the request's URLSession task cancelled).
    func exchange(_ request: APIRequest, endedBy end: ExchangeEnd?) async throws -> APIResponse {
        try Task.checkCancellation()
        let urlRequest = try urlRequest(for: request)
        do {
            let (data, response): (Data, URLResponse)
            if let file = request.bodyFile {
                #if canImport(FoundationNetworking)
                // On Linux through the transfer session, whose delegate ends a 401's Basic or Digest
                // challenge with the 401 (corelibs' default handling never completes the task) and whose
                // cancellation cannot deadlock as corelibs' own `upload(for:fromFile:)` can when cancelled
                // just as its answer arrives.
                return try await uploadAwaited(request, urlRequest: urlRequest, fromFile: file, endedBy: end)
                #else
                (data, response) = try await session.upload(for: urlRequest, fromFile: file, delegate: taskDelegate)
                #endif
            } else if let body = request.body {
                // httpBody + data(for:) rather than upload(for:from:): on Linux an upload task whose
                // response is a refused redirect (a login form's 302) never completes.
                var withBody = urlRequest
                withBody.httpBody = body
                (data, response) = try await OnceDataTask.data(
                    session, for: withBody, delegate: taskDelegate, endedBy: end)
            } else {
                (data, response) = try await OnceDataTask.data(
                    session, for: urlRequest, delegate: taskDelegate, endedBy: end)
            }
            // The URL asked for is the one just put in the URLRequest: not parsed again from the head.
            return try Self.response(response, body: data, for: request, asked: urlRequest.url)
        } catch let error as URLError {
            throw Self.map(error, request, pinning: pinning)
        }
    }

    /// Downloads the response body to `destination`, streamed to disk (never held in memory), with
    /// progress as an `AsyncSequence`. The file gets mode 0600. Cancel the task to stop the transfer.
    ///
    /// ```swift
    /// let transfer = transport.download(request, to: file)
    /// for await step in transfer.progress { print(step.fractionCompleted ?? 0) }
    /// let response = try await transfer.response
    /// ```
    public func download(_ request: APIRequest, to destination: URL) throws(HTTPRequestError) -> Transfer {
        let task = transferSession.downloadTask(with: try urlRequest(for: request))
        return delegate.start(task, request: request, destination: destination)
    }

    /// Uploads a file as the request body (streamed from disk), with progress as an `AsyncSequence`.
    public func upload(_ request: APIRequest, fromFile file: URL) throws(HTTPRequestError) -> Transfer {
        let task = transferSession.uploadTask(with: try urlRequest(for: request), fromFile: file)
        return delegate.start(task, request: request, destination: nil)
    }

    /// `send(_:)` of a request with a body file, as a transfer upload awaited: cancelling the awaiting
    /// task, or ending `end`, cancels the upload.
    private func uploadAwaited(
        _ request: APIRequest, urlRequest: URLRequest, fromFile file: URL, endedBy end: ExchangeEnd?
    ) async throws -> APIResponse {
        let task = transferSession.uploadTask(with: urlRequest, fromFile: file)
        let transfer = delegate.start(task, request: request, destination: nil)
        end?.onEnd { transfer.cancel() }
        return try await withTaskCancellationHandler {
            try await transfer.response
        } onCancel: {
            transfer.cancel()
        }
    }

    /// The response as Moose hands it on. `asked` is the request's URL when the caller has it at hand
    /// (`nil`: the head's, made again).
    static func response(_ response: URLResponse, body: Data, for request: APIRequest, asked: URL? = nil) throws
        -> APIResponse
    {
        guard let http = response as? HTTPURLResponse else {
            throw HTTPRequestError.transportFailure("not an HTTP response", request)
        }
        if let asked = asked ?? request.url, let answered = http.url, !Self.sameResource(asked, answered) {
            throw HTTPRequestError.transportFailure(
                "the response came from another URL (a redirect was followed; Moose refuses redirects for token traffic)",
                request)
        }
        var headers = HTTPFields()
        for (name, value) in http.allHeaderFields {
            if let text = name as? String, let name = HTTPField.Name(text), let value = value as? String {
                headers.append(HTTPField(name: name, value: value))
            }
        }
        guard let status = APIResponse.status(code: http.statusCode) else {
            throw HTTPRequestError.transportFailure("the status line has no valid code (\(http.statusCode))", request)
        }
        return APIResponse(status: status, headerFields: headers, body: body)
    }

    /// Whether two URLs name the same resource as far as a redirect goes: scheme, host, port, path
    /// (empty read as "/") and query.
    static func sameResource(_ a: URL, _ b: URL) -> Bool {
        // The same text is the same resource (the usual answer: URLSession reports the URL it was
        // given); only different texts are taken apart.
        if a.absoluteString.utf8.elementsEqual(b.absoluteString.utf8) { return true }
        func parts(_ url: URL) -> [String] {
            let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
            let path = components?.percentEncodedPath ?? ""
            return [
                components?.scheme?.lowercased() ?? "", components?.host?.lowercased() ?? "",
                components?.port.map(String.init) ?? "", path.isEmpty ? "/" : path,
                components?.percentEncodedQuery ?? ""
            ]
        }
        return parts(a).map { Array($0.utf8) } == parts(b).map { Array($0.utf8) } // bytes, not Unicode equivalence
    }

    static func map(_ error: URLError, _ request: APIRequest, pinning: PinChecker? = nil) -> any Error {
        switch error.code {
        case .cancelled:
            // A pinned host's key refused by the delegate cancels the challenge: a TLS error, not a cancellation.
            if !Task.isCancelled, let pinning, let host = request.url?.host, pinning.refused(host) {
                pinning.pins.mismatch(host: host, request)
            } else {
                CancellationError()
            }
        case .timedOut: HTTPRequestError.timeout("timed out after \(request.timeout) s", request)
        case .secureConnectionFailed, .serverCertificateHasBadDate, .serverCertificateUntrusted,
            .serverCertificateHasUnknownRoot,
            .serverCertificateNotYetValid, .clientCertificateRejected, .clientCertificateRequired:
            HTTPRequestError(
                HTTPRequestError.tls, error.localizedDescription, method: request.method, url: request.redactedURL)
        default: HTTPRequestError.transportFailure(error.localizedDescription, request)
        }
    }
}

#if canImport(FoundationNetworking)
/// On Linux (`OnceDataTask` keeps each request's task at hand to cancel) `APIClient` ends a request
/// whose timeout passed through this, with no child task to cancel.
extension URLSessionTransport: ExchangeEndingTransport {
    package func send(_ request: APIRequest, endedBy end: ExchangeEnd) async throws -> APIResponse {
        try await exchange(request, endedBy: end)
    }
}
#endif

/// Routes URLSession's delegate calls to the transfer they belong to, and refuses redirects so that
/// credentials never follow a `Location` to another origin unasked.
final class SessionDelegate: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, Sendable {
    /// One transfer: what it is for, and what its callbacks learn (behind its own lock).
    final class Pending: Sendable {
        struct State: Sendable {
            var continuation: CheckedContinuation<APIResponse, any Error>?
            var moveError: (any Error)?
            var cancelled = false
            var body = Data()
            /// The 401 whose challenge was cancelled (Linux: `urlSession(_:task:didReceive:…)`).
            var challenged: HTTPURLResponse?
        }
        let request: APIRequest
        let destination: URL?
        let progress: AsyncStream<TransferProgress>.Continuation
        let state = ThreadLocked(State())
        init(request: APIRequest, destination: URL?, progress: AsyncStream<TransferProgress>.Continuation) {
            self.request = request
            self.destination = destination
            self.progress = progress
        }
    }

    private let pending = ThreadLocked<[Int: Pending]>([:])
    /// The pins the transport's sessions check, if any.
    let pinning: PinChecker?

    init(pinning: PinChecker?) {
        self.pinning = pinning
        super.init()
    }

    #if canImport(Security)
    func urlSession(
        _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        let (disposition, credential) = PinChecker.answer(challenge, pinning)
        completionHandler(disposition, credential)
    }
    #endif

    func start(_ task: URLSessionTask, request: APIRequest, destination: URL?) -> Transfer {
        let (stream, continuation) = AsyncStream<TransferProgress>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let entry = Pending(request: request, destination: destination, progress: continuation)
        pending.withLock { $0[task.taskIdentifier] = entry }
        let work = Task<APIResponse, any Error> {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (resume: CheckedContinuation<APIResponse, any Error>) in
                    // Cancelled before it started: the task is never resumed, and URLSession may already
                    // have reported its end (before there was a continuation to resume).
                    let cancelledEarly = entry.state.withLock { state -> Bool in
                        if state.cancelled { return true }
                        state.continuation = resume
                        return false
                    }
                    guard !cancelledEarly else {
                        _ = self.pending.withLock { $0.removeValue(forKey: task.taskIdentifier) }
                        entry.progress.finish()
                        resume.resume(throwing: CancellationError())
                        return
                    }
                    task.resume()
                }
            } onCancel: {
                // Also flagged for the progress callbacks: URLSession may not interrupt a running
                // transfer on `cancel()` alone (seen with swift-corelibs-foundation downloads).
                entry.state.withLock { $0.cancelled = true }
                task.cancel()
            }
        }
        return Transfer(progress: stream, task: work)
    }

    private func entry(_ task: URLSessionTask) -> Pending? { pending.withLock { $0[task.taskIdentifier] } }

    #if canImport(FoundationNetworking)
    /// swift-corelibs-foundation turns a 401 whose `WWW-Authenticate` it knows (Basic, Digest) into a
    /// challenge whose default handling, without a stored credential, never completes the task (see
    /// `NoRedirects`): a protected download or upload would wait forever. A transfer never answers with
    /// a credential (the request carries its own `Authorization`): the challenge is cancelled and the
    /// transfer ends with the 401, its header fields and no body (a download writes no file).
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        guard let entry = entry(task), let response = challenge.failureResponse as? HTTPURLResponse else {
            return completionHandler(.performDefaultHandling, nil)
        }
        entry.state.withLock { $0.challenged = response }
        completionHandler(.cancelAuthenticationChallenge, nil)
    }
    #endif

    func urlSession(
        _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {
        if let entry = entry(downloadTask), entry.state.withLock({ $0.cancelled }) {
            downloadTask.cancel()
            return
        }
        entry(downloadTask)?.progress.yield(
            TransferProgress(
                completed: totalBytesWritten,
                total: totalBytesExpectedToWrite > 0 ? totalBytesExpectedToWrite : nil))
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        entry(task)?.progress.yield(
            TransferProgress(
                completed: totalBytesSent,
                total: totalBytesExpectedToSend > 0 ? totalBytesExpectedToSend : nil))
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let entry = entry(dataTask) else { return }
        entry.state.withLock { $0.body.append(data) }
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        // The file at `location` is deleted when this returns: move it now.
        guard let entry = entry(downloadTask), let destination = entry.destination else { return }
        do {
            try? FileManager.default.removeItem(at: destination)
            try FileManager.default.moveItem(at: location, to: destination)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: destination.path)
        } catch {
            entry.state.withLock { $0.moveError = error }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let entry: Pending? = pending.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        guard let entry else { return }
        let state = entry.state.withLock { state in
            defer { state.continuation = nil }
            return state
        }
        let continuation = state.continuation
        if state.cancelled {
            entry.progress.finish()
            continuation?.resume(throwing: CancellationError())
            return
        }
        if let challenged = state.challenged {
            // The 401 whose challenge this delegate cancelled: the answer, not a cancellation.
            entry.progress.finish()
            continuation?.resume(
                with: Result { try URLSessionTransport.response(challenged, body: Data(), for: entry.request) })
            return
        }
        if let error = error as? URLError {
            entry.progress.finish()
            continuation?.resume(throwing: URLSessionTransport.map(error, entry.request, pinning: pinning))
            return
        }
        if let error {
            entry.progress.finish()
            continuation?.resume(throwing: HTTPRequestError.transportFailure("\(error)", entry.request))
            return
        }
        if let moveError = state.moveError {
            entry.progress.finish()
            continuation?.resume(
                throwing: HTTPRequestError.transportFailure("cannot save the download: \(moveError)", entry.request))
            return
        }
        let result = Result { () throws -> APIResponse in
            guard let response = task.response else {
                throw HTTPRequestError.transportFailure("no response", entry.request)
            }
            return try URLSessionTransport.response(response, body: state.body, for: entry.request)
        }
        if case .success = result, let destination = entry.destination {
            // A final report, so that progress always reaches the file's full size.
            let size = (try? FileManager.default.attributesOfItem(atPath: destination.path)[.size] as? Int64) ?? 0
            let expected = task.response?.expectedContentLength ?? -1
            entry.progress.yield(TransferProgress(completed: size, total: expected > 0 ? expected : size))
        }
        entry.progress.finish()
        continuation?.resume(with: result)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

/// Refuses redirects for plain requests, so that credentials never follow a `Location` unasked.
final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    /// The pins the transport's session checks, if any.
    let pinning: PinChecker?

    init(pinning: PinChecker? = nil) {
        self.pinning = pinning
        super.init()
    }

    #if canImport(Security)
    func urlSession(
        _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        let (disposition, credential) = PinChecker.answer(challenge, pinning)
        completionHandler(disposition, credential)
    }
    #endif

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    #if canImport(FoundationNetworking)
    /// The tasks `OnceDataTask` runs (by identifier), each with the 401 its challenge was cancelled
    /// for, once there is one.
    /// (A pthread mutex, `ThreadLocked`: URLSession's delegate queue and the awaiting task touch it from
    /// two threads, and a `Mutex`'s futex is invisible to ThreadSanitizer, which then reports a race.)
    private let challenged = ThreadLocked<[Int: HTTPURLResponse?]>([:])

    /// swift-corelibs-foundation (6.3.1) turns a 401 whose `WWW-Authenticate` it knows (Basic, Digest)
    /// into a challenge, and its default handling without a stored credential never completes the task:
    /// a token endpoint refusing a client's credentials (RFC 6749 §5.2: 401 with `WWW-Authenticate`)
    /// would only end at the request's deadline, as a timeout. This transport never answers with a
    /// credential (a request carries its own `Authorization`), so for a task `OnceDataTask` runs (whose
    /// completion turns it back into the answer) the challenge is cancelled and the 401 it came from is
    /// kept (`challengedResponse(of:)`), with its header fields; its body is not to be had once the
    /// task is cancelled. Any other task's challenge gets the default handling, as before.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        // swift-corelibs-foundation has no server-trust challenges: only a 401's reach a delegate.
        guard let response = challenge.failureResponse as? HTTPURLResponse,
            challenged.withLock({ tasks in
                guard tasks.keys.contains(task.taskIdentifier) else { return false }
                tasks[task.taskIdentifier] = response
                return true
            })
        else { return completionHandler(.performDefaultHandling, nil) }
        completionHandler(.cancelAuthenticationChallenge, nil)
    }

    /// Notes that `OnceDataTask` runs `task` (before it is resumed).
    func watchChallenges(of task: URLSessionTask) {
        challenged.withLock { $0[task.taskIdentifier] = .some(nil) }
    }

    /// The 401 that `task`'s challenge was cancelled for, if any; `task` is no longer watched.
    func challengedResponse(of task: URLSessionTask) -> HTTPURLResponse? {
        challenged.withLock { $0.removeValue(forKey: task.taskIdentifier) ?? nil }
    }
    #endif
}

/// A transport's pins, and the hosts whose server presented a key that is none of them (so that the
/// cancelled challenge is reported as the TLS error it is).
final class PinChecker: Sendable {
    let pins: PublicKeyPins
    private let refusedHosts = ThreadLocked<Set<String>>([])

    init(_ pins: PublicKeyPins) { self.pins = pins }

    /// Whether a connection to `host` was refused for its key.
    func refused(_ host: String) -> Bool { refusedHosts.withLock { $0.contains(PublicKeyPins.normalised(host)) } }

    #if canImport(Security)
    /// The answer to a server-trust challenge (Apple platforms only; not compiled or tested on Linux):
    /// for a pinned host, the system's evaluation first (`SecTrustEvaluateWithError`,
    /// https://developer.apple.com/documentation/security/sectrustevaluatewitherror(_:_:) — a failure is
    /// left to the default handling, which fails the request as untrusted), then the SHA-256 of the
    /// leaf's SubjectPublicKeyInfo (`SecTrustCopyCertificateChain`, `SecCertificateCopyData`,
    /// https://developer.apple.com/documentation/security/sectrustcopycertificatechain(_:)) against the pins.
    /// Anything else gets the default handling.
    static func answer(_ challenge: URLAuthenticationChallenge, _ checker: PinChecker?) -> (
        URLSession.AuthChallengeDisposition, URLCredential?
    ) {
        let space = challenge.protectionSpace
        guard let checker, space.authenticationMethod == NSURLAuthenticationMethodServerTrust,
            !checker.pins.pins(for: space.host).isEmpty, let trust = space.serverTrust
        else { return (.performDefaultHandling, nil) }
        guard SecTrustEvaluateWithError(trust, nil) else { return (.performDefaultHandling, nil) }
        if let chain = SecTrustCopyCertificateChain(trust) as? [SecCertificate], let leaf = chain.first,
            let key = PublicKeyPins.subjectPublicKeyInfo(certificateDER: Array(SecCertificateCopyData(leaf) as Data)),
            checker.pins.permits(host: space.host, subjectPublicKeyInfoSHA256: Array(SHA256.hash(data: key)))
        {
            return (.useCredential, URLCredential(trust: trust))
        }
        checker.refusedHosts.withLock { _ = $0.insert(PublicKeyPins.normalised(space.host)) }
        return (.cancelAuthenticationChallenge, nil)
    }
    #endif
}

#if canImport(FoundationNetworking)
/// The delegate queue of `URLSessionTransport`'s own plain-request session on Linux: an
/// `OperationQueue` whose blocks run on a serial `DispatchQueue` of its own, in order, one at a time
/// — what the session's default queue (an `OperationQueue` with one operation at a time) does, without
/// a `BlockOperation`, its lock and condition, and `OperationQueue`'s bookkeeping per block.
///
/// swift-corelibs-foundation (6.3.1, `_ProtocolClient` in `URLSessionTask.swift`) hands every data
/// task's completion handler to the delegate queue; on a loopback GET, `OperationQueue.addOperation`
/// alone was ~2% of the whole process's CPU (perf, `moose-bench http-profile moose`).
///
/// Why not run the blocks inline, on the thread URLSession hands them over on, as its own `data(for:)`
/// does (BENCHMARKS.md round 5, measured then at 1.10x against 1.14x)? That thread is URLSession's work
/// queue, which targets the one serial queue every URLSession of the process shares, and resuming a
/// continuation takes the awaiting task's status lock — which the Swift runtime holds while it runs
/// that task's cancellation handlers. A handler that waits for URLSession's queue (ours cancels the
/// request's `URLSessionTask`, and `cancel()` does a `workQueue.sync`; so may any handler an app puts
/// around a call) then waits for the thread that waits for its lock: every URLSession of the process
/// stops. `URLSessionDelegateQueueTests.cancellationsAsAnswersArriveEndEachRequestOnce` hung so within
/// a second with an inline queue (threads seen in gdb: `OnceDataTask.State.finish` → `resume` →
/// `withStatusRecordLock` on URLSession's queue; `swift_task_cancel` → `OnceDataTask.State.cancel` →
/// `URLSessionTask.cancel` → `DispatchQueue.sync`). Blocks on a queue of their own wait for that lock
/// as they did on the `OperationQueue`, without holding URLSession's queue.
final class DispatchDelegateQueue: OperationQueue, @unchecked Sendable {
    // unchecked: `blocks` is a serial DispatchQueue (thread-safe); OperationQueue's state is its own.
    private let blocks = DispatchQueue(label: "moose.urlsession.delegate")

    override init() {
        super.init()
        name = "moose.urlsession.delegate"
        maxConcurrentOperationCount = 1
    }

    /// Runs `block` on this queue's serial dispatch queue, after the blocks added before it.
    override func addOperation(_ block: @Sendable @escaping () -> Void) {
        blocks.async(execute: block)
    }
}
#endif

/// A data task awaited with a continuation resumed exactly once.
///
/// swift-corelibs-foundation's `URLSession.data(for:delegate:)` resumes its continuation a second time
/// when the awaiting task is cancelled just as the request ends (its cancellation handler cancels the
/// URLSession task, whose failure is delivered after the completion already was): the process traps
/// ("SWIFT TASK CONTINUATION MISUSE … tried to resume its continuation more than once"), seen killing
/// Moose's whole test run when an MCP client disconnected, 2026-11-28. Here the first outcome wins and
/// a later one is dropped. Apple's URLSession keeps its own `data(for:delegate:)`.
enum OnceDataTask {
    /// The task, its outcome, and whether the awaiting task was cancelled before the task existed.
    private final class State: Sendable {
        private struct Fields: @unchecked Sendable {
            var task: URLSessionDataTask?
            var continuation: CheckedContinuation<(Data, URLResponse), any Error>?
            var cancelled = false
        }
        private let fields = ThreadLocked(Fields()) // pthread: seen by ThreadSanitizer (see `challenged`)

        /// Keeps `task` to cancel, and cancels it now if the awaiting task already was.
        func start(
            _ task: URLSessionDataTask, continuation: CheckedContinuation<(Data, URLResponse), any Error>,
            challenges: NoRedirects?
        ) {
            let cancelled = fields.withLock { fields in
                fields.task = task
                fields.continuation = continuation
                return fields.cancelled
            }
            challenges?.watchChallenges(of: task)
            task.resume()
            if cancelled { task.cancel() }
        }

        /// Resumes the awaiting task with the first outcome only: a task cancelled for a 401's challenge
        /// (`NoRedirects`), not by its caller, ends with that 401.
        func finish(_ data: Data?, _ response: URLResponse?, _ error: (any Error)?, challenges: NoRedirects?) {
            guard
                let (continuation, task, cancelled) = fields.withLock({ fields in
                    defer { fields.continuation = nil }
                    return fields.continuation.map { ($0, fields.task, fields.cancelled) }
                })
            else { return }
            let challenged = task.flatMap { challenges?.challengedResponse(of: $0) }
            if let challenged, !cancelled, (error as? URLError)?.code == .cancelled {
                continuation.resume(returning: (Data(), challenged))
            } else if let response, error == nil {
                continuation.resume(returning: (data ?? Data(), response))
            } else {
                continuation.resume(throwing: error ?? URLError(.badServerResponse))
            }
        }

        /// The awaiting task was cancelled: cancel the URLSession task (its failure then finishes).
        func cancel() {
            let task = fields.withLock { fields -> URLSessionDataTask? in
                fields.cancelled = true
                return fields.task
            }
            task?.cancel()
        }
    }

    /// The task's data and response; ending `end` (when given) cancels the task as cancelling the
    /// awaiting task does.
    static func data(
        _ session: URLSession, for request: URLRequest, delegate: (any URLSessionTaskDelegate)?,
        endedBy end: ExchangeEnd? = nil
    ) async throws -> (Data, URLResponse) {
        #if canImport(FoundationNetworking)
        let state = State()
        end?.onEnd { state.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let challenges = session.delegate as? NoRedirects
                let task = session.dataTask(with: request) { data, response, error in
                    state.finish(data, response, error, challenges: challenges)
                }
                task.delegate = delegate
                state.start(task, continuation: continuation, challenges: challenges)
            }
        } onCancel: {
            state.cancel()
        }
        #else
        return try await session.data(for: request, delegate: delegate)
        #endif
    }
}
