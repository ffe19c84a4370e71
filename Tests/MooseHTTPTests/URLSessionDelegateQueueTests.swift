import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import MooseHTTP
import MooseTestSupport
@testable import MooseURLSession
import Synchronization
import Testing

/// `URLSessionTransport`'s own session on Linux hands its completion handlers to a serial dispatch
/// queue of its own (`DispatchDelegateQueue`) instead of an `OperationQueue`. What a delegate queue
/// must not do, and these tests would catch: run a block on URLSession's work queue while the
/// awaiting task's cancellation handler waits for that queue (every URLSession of the process
/// deadlocks — `cancellationsAsAnswersArriveEndEachRequestOnce` hung so with a queue that ran its
/// blocks inline), resume a continuation twice (a trap), reorder or lose a completion, or hold up
/// other requests. Each test ends by checking that URLSession still answers.
// Generous: the limit is there to end a hang, and the whole suite's parallel load on two cores
// slows these sequential races thirtyfold (300 deadline rounds: 2 s alone, 59 s in CI's main phase).
@Suite(.timeLimit(.minutes(6)))
struct URLSessionDelegateQueueTests {
    static let base = TestServer.base

    /// A GET on a session that is not the transport's: answered, so URLSession's shared queue is free.
    static func sharedQueueStillAnswers() async throws {
        let other = APIClient(transport: URLSessionTransport(), retryPolicy: .none)
        let response = try await other.send(
            APIRequest(url: base.appendingPathComponent("echo/after"), timeout: 10),
            context: HTTPMiddlewareContext(isRetryable: false, requiresAuthentication: false))
        #expect(response.status == .ok, "URLSession's queue no longer answers: \(response.status)")
    }

    /// Blocks run in the order they were added, one at a time, never on the thread that adds them.
    @Test func theQueueRunsBlocksInOrderOneAtATimeElsewhere() async {
        #if canImport(FoundationNetworking)
        let queue = DispatchDelegateQueue()
        let seen = Mutex<(order: [Int], running: Int, overlapped: Bool, onCaller: Bool)>(([], 0, false, false))
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let caller = pthread_self()
            for index in 0..<200 {
                queue.addOperation {
                    seen.withLock {
                        $0.running += 1
                        $0.overlapped = $0.overlapped || $0.running > 1
                        $0.onCaller = $0.onCaller || pthread_equal(pthread_self(), caller) != 0
                    }
                    usleep(50)
                    let finished = seen.withLock {
                        $0.running -= 1
                        $0.order.append(index)
                        return $0.order.count == 200
                    }
                    if finished { done.resume() }
                }
            }
        }
        let result = seen.withLock { $0 }
        #expect(result.order == Array(0..<200))
        #expect(!result.overlapped, "two blocks ran at once")
        #expect(!result.onCaller, "a block ran on the thread that added it")
        #endif
    }

    /// Requests cancelled around the moment their answer arrives (the race that made
    /// `data(for:)` resume its continuation twice): each ends once, with its answer or
    /// `CancellationError`, and nothing traps or hangs.
    @Test func cancellationsAsAnswersArriveEndEachRequestOnce() async throws {
        let transport = URLSessionTransport()
        let url = Self.base.appendingPathComponent("echo/race")
        // How long an answer takes here, to cancel around it.
        let started = ContinuousClock.now
        for _ in 0..<20 { _ = try await transport.send(APIRequest(url: url)) }
        let typical = (ContinuousClock.now - started) / 20
        var answered = 0, cancelled = 0
        for round in 0..<120 {
            let task = Task { try await transport.send(APIRequest(url: url, timeout: 20)) }
            // From at once to twice the typical answer time.
            let wait = typical * (Double(round % 40) / 20)
            try await Task.sleep(for: wait)
            task.cancel()
            do {
                let response = try await task.value
                #expect(response.status == .ok)
                answered += 1
            } catch is CancellationError {
                cancelled += 1
            }
        }
        #expect(answered + cancelled == 120)
        try await Self.sharedQueueStillAnswers()
    }

    /// The same race through `APIClient`'s deadline (the exchange ended by `DeadlineWatch` on its
    /// own thread while the answer is delivered on URLSession's): each request is answered or timed
    /// out, once.
    @Test func deadlinesAsAnswersArriveEndEachRequestOnce() async throws {
        let client = APIClient(transport: URLSessionTransport(), retryPolicy: .none)
        var answered = 0, timedOut = 0
        for round in 0..<120 {
            // 1 ms (the watch's least) to ~1.5 ms: around a loopback answer.
            let endpoint = TestEndpoint(path: "/echo/deadline", timeout: 0.001 + Double(round % 6) * 0.0001)
            do {
                _ = try await client.send(endpoint)
                answered += 1
            } catch let error as HTTPRequestError where error.code == HTTPRequestError.timedOut {
                timedOut += 1
            }
        }
        #expect(answered + timedOut == 120)
        try await Self.sharedQueueStillAnswers()
    }

    /// A hundred requests at once through one transport (six connections): every one gets its own answer.
    @Test func manyConcurrentRequestsEachGetTheirOwnAnswer() async throws {
        let transport = URLSessionTransport()
        let mismatches = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<100 {
                group.addTask {
                    let url = Self.base.appendingPathComponent("echo/many")
                        .appending(queryItems: [URLQueryItem(name: "i", value: String(index))])
                    let response = try await transport.send(APIRequest(url: url, timeout: 60))
                    let echo = try JSONDecoder().decode(Echo.self, from: response.body)
                    return echo.query == "i=\(index)"
                }
            }
            var mismatches = 0
            for try await matched in group where !matched { mismatches += 1 }
            return mismatches
        }
        #expect(mismatches == 0, "\(mismatches) requests got another's answer")
        try await Self.sharedQueueStillAnswers()
    }

    /// Timeouts (URLSession tasks cancelled from the watch thread) among answers delivered at the
    /// same time: the slow ones time out, the others are answered, none waits for another.
    @Test func timeoutsAmongAnswersEndOnTime() async throws {
        let client = APIClient(transport: URLSessionTransport(), retryPolicy: .none)
        let started = ContinuousClock.now
        let outcomes = try await withThrowingTaskGroup(of: (slow: Bool, answered: Bool).self) { group in
            for index in 0..<60 {
                let slow = index % 3 == 0
                group.addTask {
                    let endpoint =
                        slow
                        ? TestEndpoint(path: "/slow", query: [QueryItem("seconds", "3")], timeout: 0.3)
                        : TestEndpoint(path: "/echo/among", timeout: 30)
                    do {
                        _ = try await client.send(endpoint)
                        return (slow, true)
                    } catch let error as HTTPRequestError where error.code == HTTPRequestError.timedOut {
                        return (slow, false)
                    }
                }
            }
            var all: [(slow: Bool, answered: Bool)] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.count == 60)
        #expect(outcomes.allSatisfy { $0.slow != $0.answered }, "\(outcomes.filter { $0.slow == $0.answered })")
        // Far less than the slow answers' 3 s each, one after another (loose: a loaded machine).
        #expect(ContinuousClock.now - started < .seconds(30))
        try await Self.sharedQueueStillAnswers()
    }

    /// The delegate calls other than completions that this session gets: a redirect (refused by
    /// `NoRedirects`: the caller sees the 302) and a Basic challenge (a token endpoint refusing a
    /// client, RFC 6749 §5.2), which swift-corelibs-foundation 6.3.1's default handling never completes
    /// without a stored credential: `NoRedirects` cancels it and the caller gets the 401 with its
    /// `WWW-Authenticate`, at once — not a timeout at the deadline (what it got before). URLSession still
    /// answers after either.
    @Test func redirectsAndBasicChallengesDoNotHoldURLSessionsQueue() async throws {
        let transport = URLSessionTransport()
        var components = try #require(
            URLComponents(url: Self.base.appendingPathComponent("redirect"), resolvingAgainstBaseURL: false))
        components.queryItems = [
            URLQueryItem(name: "to", value: Self.base.appendingPathComponent("echo").absoluteString)
        ]
        let redirect = try await transport.send(APIRequest(url: try #require(components.url), timeout: 10))
        #expect(redirect.status.code == 302)

        let server = try LoopbackHTTPServer(connectionDeadline: 600)
        defer { server.stop() }
        server.serve(
            ScriptedTransport { _ in
                var fields = HTTPFields()
                fields[.wwwAuthenticate] = #"Basic realm="moose""#
                return APIResponse(status: .unauthorized, headerFields: fields, body: Data("no".utf8))
            })
        let client = APIClient(transport: transport, retryPolicy: .none)
        for _ in 0..<3 {
            let response = try await client.send(
                APIRequest(url: server.baseURL.appendingPathComponent("challenge"), timeout: 20),
                context: HTTPMiddlewareContext(isRetryable: false, requiresAuthentication: false))
            #expect(response.status == .unauthorized)
            #expect(response.headerFields[.wwwAuthenticate] == #"Basic realm="moose""#)
        }
        try await Self.sharedQueueStillAnswers()
    }
}

/// `URLSessionTransport.urlRequest(for:)` starts from the `User-Agent` fields it made once: the
/// URLRequest's fields must be what setting each header with `setValue` (as before) gives.
struct URLRequestHeaderTests {
    /// The URLRequest as `urlRequest(for:)` made it before: one `setValue` per header.
    static func reference(_ request: APIRequest, _ configuration: URLSessionTransport.Configuration) throws
        -> URLRequest
    {
        var urlRequest = URLRequest(url: try #require(request.url))
        urlRequest.setValue(configuration.userAgent, forHTTPHeaderField: "User-Agent")
        for field in configuration.defaultHeaders where !request.headerFields.contains(field.name) {
            urlRequest.setValue(field.value, forHTTPHeaderField: field.name.rawName)
        }
        for line in request.headerFields.http1Lines { urlRequest.setValue(line.value, forHTTPHeaderField: line.name) }
        return urlRequest
    }

    @Test(arguments: ["Moose/0.1", "my-app/1.0 (Linux; x86_64) Moose/0.1", "", "tab\there", "é-agent", "bad\u{7F}agent"]
    )
    func theHeadersAreWhatSetValueMakes(_ userAgent: String) throws {
        var defaults = HTTPFields()
        defaults[.accept] = "application/json"
        defaults[HTTPField.Name("x-default")!] = "d"
        let configuration = URLSessionTransport.Configuration(defaultHeaders: defaults, userAgent: userAgent)
        let transport = URLSessionTransport(configuration: configuration)
        let url = try #require(URL(string: "http://127.0.0.1:9/echo?x=1"))
        var requests = [APIRequest(url: url)]
        var withHeaders = APIRequest(url: url)
        withHeaders.headerFields[.userAgent] = "their-agent"
        withHeaders.headerFields[.accept] = "text/plain"
        withHeaders.headerFields[HTTPField.Name("X-Mixed-CASE")!] = "v"
        withHeaders.headerFields.append(HTTPField(name: .cookie, value: "a=1"))
        withHeaders.headerFields.append(HTTPField(name: .cookie, value: "b=2"))
        requests.append(withHeaders)
        var post = APIRequest(method: .post, url: url, body: Data("x".utf8))
        post.headerFields[.contentType] = "application/x-www-form-urlencoded"
        requests.append(post)
        for request in requests {
            let made = try transport.urlRequest(for: request)
            let expected = try Self.reference(request, configuration)
            #expect(made.allHTTPHeaderFields == expected.allHTTPHeaderFields, "\(userAgent): \(request.headerFields)")
            #expect(made.url == expected.url)
            #expect(made.httpMethod == (request.method == .get ? "GET" : request.method.rawValue))
            #expect(made.timeoutInterval == request.timeout + 1)
        }
    }
}
