import Dispatch
import Foundation
import HTTPTypes
import MooseHTTP
import MooseTestSupport
import MooseURLSession
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// MooseTesting's LoopbackHTTPServer on real sockets: what clients send reaches the served transport
/// as sent (CurlTransport, and a raw socket for what no HTTP library sends), what it answers comes
/// back, and malformed or oversized requests are refused before it sees them.
struct LoopbackHTTPServerTests {
    /// A server answering with `answer`, and the transport that records what reached it.
    static func serving(
        maxBodyBytes: Int = 1 << 20,
        _ answer: @escaping @Sendable (APIRequest) async throws -> APIResponse = { _ in
            APIResponse(status: .ok, body: Data("fine".utf8))
        }
    ) throws -> (LoopbackHTTPServer, ScriptedTransport) {
        let transport = ScriptedTransport(answer)
        // A deadline no crowded machine reaches: these tests are not about it (CI saw 408s at 10 s).
        let server = try LoopbackHTTPServer(maxBodyBytes: maxBodyBytes, connectionDeadline: 600)
        server.serve(transport)
        return (server, transport)
    }

    @Test func aGETWithAQueryReachesTheTransportWithTheExactURLAndHeaders() async throws {
        let (server, transport) = try Self.serving { _ in
            var fields = HTTPFields()
            fields[.cacheControl] = "no-store"
            fields.append(HTTPField(name: .setCookie, value: "a=1"))
            fields.append(HTTPField(name: .setCookie, value: "b=2"))
            return .json(#"{"ok":true}"#, headerFields: fields)
        }
        defer { server.stop() }
        let url = try #require(
            URL(string: "\(server.baseURL.absoluteString)/authorize?client_id=app&scope=a%20b&x=%2F"))
        var request = APIRequest(url: url)
        request.headerFields[HTTPField.Name("X-Moose-Test")!] = "value with  spaces"
        request.headerFields[.accept] = "application/json"
        let response = try await CurlTransport().send(request)

        #expect(response.status == .ok)
        #expect(String(decoding: response.body, as: UTF8.self) == #"{"ok":true}"#)
        #expect(response.headerFields[.contentType] == "application/json")
        #expect(response.headerFields[.cacheControl] == "no-store")
        #expect(response.headerFields[values: .setCookie] == ["a=1", "b=2"])
        let seen = try #require(transport.requests.first)
        #expect(transport.requests.count == 1)
        #expect(seen.method == .get)
        #expect(seen.url?.absoluteString == url.absoluteString)
        #expect(seen.head.path == "/authorize?client_id=app&scope=a%20b&x=%2F")
        #expect(seen.headerFields[HTTPField.Name("X-Moose-Test")!] == "value with  spaces")
        #expect(seen.headerFields[.accept] == "application/json")
        #expect(seen.headerFields[HTTPField.Name("Host")!] == "127.0.0.1:\(server.port)")
        #expect(seen.body == nil)
        #expect(server.requestCount == 1)
    }

    @Test func aPOSTFormBodyArrivesIntact() async throws {
        let (server, transport) = try Self.serving { request in
            APIResponse(status: .created, body: request.body ?? Data())
        }
        defer { server.stop() }
        // Every byte value, and more than a socket read: the body must arrive byte for byte.
        let form = "grant_type=authorization_code&code=abc%2B%2F%3D&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcb"
        let body = Data(form.utf8) + Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        var request = APIRequest(method: .post, url: server.baseURL.appendingPathComponent("token"), body: body)
        request.headerFields[.contentType] = "application/x-www-form-urlencoded"
        let response = try await CurlTransport().send(request)

        #expect(response.status == .created)
        #expect(response.body == body)
        let seen = try #require(transport.requests.first)
        #expect(seen.method == .post)
        #expect(seen.url?.path == "/token")
        #expect(seen.body == body)
        #expect(seen.headerFields[.contentType] == "application/x-www-form-urlencoded")
        #expect(seen.headerFields[.contentLength] == String(body.count))
    }

    @Test(arguments: [
        RawCase("obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n"),
        RawCase("bare CR", "GET / HTTP/1.1\r\nHost: x\r\nX-Bare: a\rb\r\n\r\n"),
        RawCase("NUL", "GET / HTTP/1.1\r\nHost: x\r\nX-Nul: a\u{0}b\r\n\r\n"),
        RawCase("space in a name", "GET / HTTP/1.1\r\nHost: x\r\nBad Name: a\r\n\r\n"),
        RawCase("parenthesis in a name", "GET / HTTP/1.1\r\nHost: x\r\nBad(Name): a\r\n\r\n"),
        RawCase("space before the colon", "GET / HTTP/1.1\r\nHost: x\r\nX-Name : a\r\n\r\n"),
        RawCase("no colon", "GET / HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n"),
        RawCase("absolute-form", "GET http://127.0.0.1/ HTTP/1.1\r\nHost: x\r\n\r\n"),
        RawCase("asterisk-form", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"),
        RawCase("fragment", "GET /a#frag HTTP/1.1\r\nHost: x\r\n\r\n"),
        RawCase("two spaces", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n"),
        RawCase("trailing space", "GET / HTTP/1.1 \r\nHost: x\r\n\r\n"),
        RawCase("HTTP/0.9", "GET /\r\nHost: x\r\n\r\n"),
        RawCase("not HTTP", "GET / HTTQ/1.1\r\nHost: x\r\n\r\n"),
        RawCase("non-ASCII method", "G\u{E9}T / HTTP/1.1\r\nHost: x\r\n\r\n"),
        RawCase("no Host", "GET / HTTP/1.1\r\n\r\n"),
        RawCase("two Hosts", "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"),
        RawCase(
            "two Content-Lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"),
        RawCase("a Content-Length list", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\nabcd"),
        RawCase("negative Content-Length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -3\r\n\r\nabc"),
        RawCase("hex Content-Length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x3\r\n\r\nabc"),
        RawCase(
            "Content-Length and chunked",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        ),
        RawCase("CONNECT", "CONNECT /x HTTP/1.1\r\nHost: x\r\n\r\n"),
        RawCase("empty line first", "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
    ])
    func malformedHeadsGet400WithoutReachingTheTransport(_ head: RawCase) async throws {
        let (server, transport) = try Self.serving()
        defer { server.stop() }
        let answer = try await RawConnection(port: server.port).exchange(Array(head.text.utf8))
        #expect(statusCode(answer) == 400, "\(String(decoding: answer, as: UTF8.self))")
        #expect(transport.requests.isEmpty)
    }

    @Test(arguments: [
        RawCase("HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", status: 505),
        RawCase("gzip", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", status: 501),
        RawCase("another expectation", "GET / HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\n\r\n", status: 417),
        RawCase(
            "101 fields", "GET / HTTP/1.1\r\nHost: x\r\n" + String(repeating: "X-Many: 1\r\n", count: 101) + "\r\n",
            status: 431),
        RawCase(
            "a 17 KB head", "GET /" + String(repeating: "a", count: 17_000) + " HTTP/1.1\r\nHost: x\r\n\r\n",
            status: 431),
        RawCase("no blank line", "GET / HTTP/1.1\r\nHost: x\r\n", status: 400)
    ])
    func otherRefusals(_ head: RawCase) async throws {
        let (server, transport) = try Self.serving()
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)
        connection.send(Array(head.text.utf8))
        connection.endWriting()
        let answer = await connection.readToEnd()
        #expect(statusCode(answer) == head.status, "\(String(decoding: answer.prefix(200), as: UTF8.self))")
        #expect(transport.requests.isEmpty)
    }

    @Test func anOversizedBodyGets413BeforeItIsRead() async throws {
        let (server, transport) = try Self.serving(maxBodyBytes: 1024)
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)
        // The head alone: the 413 comes without waiting for the 1025 bytes announced.
        connection.send(Array("POST /token HTTP/1.1\r\nHost: x\r\nContent-Length: 1025\r\n\r\n".utf8))
        let answer = await connection.readToEnd()
        #expect(statusCode(answer) == 413)
        #expect(transport.requests.isEmpty)

        // An absurd length (past Int) is refused the same way, never converted.
        let huge = try await RawConnection(port: server.port).exchange(
            Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999999\r\n\r\n".utf8))
        #expect(statusCode(huge) == 413)

        // With curl, a body one byte too large; and one that fits.
        var request = APIRequest(
            method: .post, url: server.baseURL.appendingPathComponent("x"), body: Data(repeating: 0x61, count: 1025))
        #expect(try await CurlTransport().send(request).status.code == 413)
        request.body = Data(repeating: 0x61, count: 1024)
        #expect(try await CurlTransport().send(request).status.code == 200)
        #expect(transport.requests.count == 1)
    }

    @Test func expect100ContinueGetsAnInterimAnswerBeforeTheBody() async throws {
        let (server, transport) = try Self.serving { request in
            APIResponse(status: .ok, body: request.body ?? Data())
        }
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)
        connection.send(
            Array("POST /token HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n".utf8))
        let interim = await connection.read(until: Array("\r\n\r\n".utf8))
        #expect(String(decoding: interim, as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
        #expect(transport.requests.isEmpty, "nothing reaches the transport before the body")
        connection.send(Array("hello world".utf8))
        let answer = await connection.readToEnd()
        #expect(statusCode(answer) == 200)
        #expect(String(decoding: answer, as: UTF8.self).hasSuffix("\r\n\r\nhello world"))
        #expect(transport.requests.first?.body == Data("hello world".utf8))
    }

    @Test func aChunkedBodyIsDecoded() async throws {
        let (server, transport) = try Self.serving { request in
            APIResponse(status: .ok, body: request.body ?? Data())
        }
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)
        connection.send(Array("POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello".utf8))
        connection.send(Array("\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n".utf8))
        let answer = await connection.readToEnd()
        #expect(statusCode(answer) == 200)
        let seen = try #require(transport.requests.first)
        #expect(seen.body == Data("hello world".utf8))
        #expect(seen.headerFields[.transferEncoding] == nil)
        #expect(seen.headerFields[.contentLength] == "11")
    }

    @Test func aTransportThatThrowsClosesTheConnectionWithoutAnAnswer() async throws {
        let (server, transport) = try Self.serving { request in
            throw HTTPRequestError.transportFailure("dropped", request)
        }
        defer { server.stop() }
        let answer = try await RawConnection(port: server.port).exchange(
            Array("GET /x HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(answer.isEmpty)
        #expect(transport.requests.count == 1)
        #expect(server.requestCount == 0)
        await #expect(throws: HTTPRequestError.self) {
            _ = try await CurlTransport().send(APIRequest(url: server.baseURL.appendingPathComponent("y")))
        }
    }

    @Test func theURLIsTheServersWhateverHostSays() async throws {
        let (server, transport) = try Self.serving()
        defer { server.stop() }
        let answer = try await RawConnection(port: server.port).exchange(
            Array("GET /userinfo?a=1 HTTP/1.1\r\nHost: evil.example:8443\r\n\r\n".utf8))
        #expect(statusCode(answer) == 200)
        let seen = try #require(transport.requests.first)
        #expect(seen.url?.absoluteString == "http://127.0.0.1:\(server.port)/userinfo?a=1")
        #expect(seen.head.authority == "127.0.0.1:\(server.port)")
        #expect(seen.headerFields[HTTPField.Name("Host")!] == "evil.example:8443")
        // HTTP/1.0 may leave Host out.
        let old = try await RawConnection(port: server.port).exchange(Array("GET /old HTTP/1.0\r\n\r\n".utf8))
        #expect(statusCode(old) == 200)
        #expect(transport.requests.last?.url?.absoluteString == "http://127.0.0.1:\(server.port)/old")
    }

    @Test func theResponseIsFramedByTheServer() async throws {
        let (server, _) = try Self.serving { request in
            var fields = HTTPFields()
            fields[.contentLength] = "999"
            fields[.connection] = "keep-alive"
            fields[.transferEncoding] = "chunked"
            fields[HTTPField.Name("X-Kept")!] = "yes"
            let status: HTTPResponse.Status = request.head.path == "/empty" ? .noContent : .ok
            return APIResponse(status: status, headerFields: fields, body: Data("four".utf8))
        }
        defer { server.stop() }
        let text = try await String(
            decoding: RawConnection(port: server.port).exchange(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)),
            as: UTF8.self)
        #expect(
            text == "HTTP/1.1 200 OK\r\nX-Kept: yes\r\nContent-Length: 4\r\nConnection: close\r\n\r\nfour", "\(text)")
        let head = try await String(
            decoding: RawConnection(port: server.port).exchange(Array("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)),
            as: UTF8.self)
        #expect(head == "HTTP/1.1 200 OK\r\nX-Kept: yes\r\nContent-Length: 4\r\nConnection: close\r\n\r\n")
        let empty = try await String(
            decoding: RawConnection(port: server.port).exchange(Array("GET /empty HTTP/1.1\r\nHost: x\r\n\r\n".utf8)),
            as: UTF8.self)
        #expect(empty == "HTTP/1.1 204 No Content\r\nX-Kept: yes\r\nConnection: close\r\n\r\n")
    }

    @Test func stopMakesNewConnectionsFail() async throws {
        let (server, _) = try Self.serving()
        let answer = try await RawConnection(port: server.port).exchange(
            Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(statusCode(answer) == 200)
        server.stop()
        server.stop() // idempotent
        #expect(throws: RawConnection.Failure.self) { _ = try RawConnection(port: server.port) }
        await #expect(throws: HTTPRequestError.self) {
            _ = try await CurlTransport().send(APIRequest(url: server.baseURL))
        }
        server.serve(ScriptedTransport { _ in APIResponse(status: .ok) }) // after stop: nothing
        #expect(throws: RawConnection.Failure.self) { _ = try RawConnection(port: server.port) }
        #expect(server.requestCount == 1)
    }

    @Test func droppingTheServerStopsIt() async throws {
        var server: LoopbackHTTPServer? = try LoopbackHTTPServer()
        let port = try #require(server?.port)
        server?.serve(ScriptedTransport { _ in APIResponse(status: .ok) })
        _ = try await RawConnection(port: port).exchange(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        server = nil
        #expect(throws: RawConnection.Failure.self) { _ = try RawConnection(port: port) }
    }

    @Test func twentyConcurrentRequestsAreAllAnswered() async throws {
        let inFlight = Mutex((now: 0, most: 0))
        let (server, transport) = try Self.serving { request in
            inFlight.withLock {
                $0.now += 1
                $0.most = max($0.most, $0.now)
            }
            defer { inFlight.withLock { $0.now -= 1 } }
            try await Task.sleep(for: .milliseconds(200)) // long enough for the others to arrive
            return APIResponse(status: .ok, body: Data((request.url?.query ?? "").utf8))
        }
        defer { server.stop() }
        let base = server.baseURL
        // URLSession: its requests wait without holding a thread (20 libcurl easy handles would hold 20).
        let client = URLSessionTransport()
        let answers = try await withThrowingTaskGroup(of: (Int, Int, String).self) { group in
            for index in 0..<20 {
                group.addTask {
                    let url = try #require(URL(string: "\(base.absoluteString)/n?i=\(index)"))
                    let response = try await client.send(APIRequest(url: url))
                    return (index, response.status.code, String(decoding: response.body, as: UTF8.self))
                }
            }
            var answers: [Int: String] = [:]
            for try await (index, status, body) in group where status == 200 { answers[index] = body }
            return answers
        }
        #expect(answers.count == 20)
        #expect(answers.allSatisfy { $0.value == "i=\($0.key)" })
        #expect(transport.requests.count == 20)
        #expect(server.requestCount == 20)
        #expect(inFlight.withLock { $0.most } > 1, "requests are answered concurrently")
    }

    @Test func aSilentClientDoesNotHoldOthersBack() async throws {
        let (server, _) = try Self.serving()
        defer { server.stop() }
        let silent = try RawConnection(port: server.port)
        let partial = try RawConnection(port: server.port)
        partial.send(Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc".utf8))
        let answer = try await RawConnection(port: server.port).exchange(
            Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(statusCode(answer) == 200)
        // Answered while the other two still wait, unanswered (their deadline is 600 s): a server that
        // served one connection at a time could not have answered it yet. No stopwatch.
        for waiting in [silent, partial] {
            var probe = pollfd(fd: waiting.descriptor, events: Int16(POLLIN), revents: 0)
            #expect(poll(&probe, 1, 0) == 0, "a connection still sending its request got an answer or was closed")
        }
        silent.close()
        partial.close()
    }

    /// What the server is for: clients in other processes. curl with `Expect: 100-continue`, and
    /// Python's own HTTP client (what requests and Authlib stand on), a form POST then a GET.
    @Test func clientsInOtherProcessesAreAnswered() async throws {
        let (server, transport) = try Self.serving { request in
            var fields = HTTPFields()
            fields[HTTPField.Name("X-Method")!] = request.method.rawValue
            return APIResponse(
                status: .ok, headerFields: fields, body: request.body ?? Data("got \(request.head.path ?? "")".utf8))
        }
        defer { server.stop() }
        let form = "grant_type=client_credentials&scope=a+b&pad=" + String(repeating: "x", count: 3000)
        let curl = await runProcess(
            "/usr/bin/curl",
            [
                "-sS", "--max-time", "10", "-H", "Expect: 100-continue", "-H",
                "Content-Type: application/x-www-form-urlencoded", "--data-binary", form,
                "\(server.baseURL.absoluteString)/token"
            ])
        #expect(curl.status == 0)
        #expect(curl.output == form)

        let script = """
            import sys, urllib.request
            base = sys.argv[1]
            answer = urllib.request.urlopen(urllib.request.Request(base + "/token", data=b"code=abc&state=%2F", \
                headers={"Content-Type": "application/x-www-form-urlencoded"}), timeout=10)
            print(answer.status, answer.headers["X-Method"], answer.read().decode())
            answer = urllib.request.urlopen(base + "/userinfo?x=1", timeout=10)
            print(answer.status, answer.headers["X-Method"], answer.read().decode())
            """
        let python = await runProcess("/usr/bin/python3", ["-c", script, server.baseURL.absoluteString])
        #expect(python.status == 0)
        #expect(python.output == "200 POST code=abc&state=%2F\n200 GET got /userinfo?x=1\n")
        #expect(transport.requests.map(\.method) == [.post, .post, .get])
        #expect(transport.requests.last?.url?.absoluteString == "\(server.baseURL.absoluteString)/userinfo?x=1")
    }

    @Test func theInitThrowsWhenThePortIsTaken() throws {
        let server = try LoopbackHTTPServer()
        defer { server.stop() }
        #expect(throws: HTTPRequestError.self) { _ = try LoopbackHTTPServer(port: server.port) }
    }
}

/// The parser alone: what a well-formed head becomes, and which status each malformed one earns.
struct LoopbackHTTPRequestHeadTests {
    @Test func aHeadParsesIntoItsParts() throws {
        let bytes =
            Array(
                "POST /token?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type:  application/x-www-form-urlencoded \r\n"
                    .utf8)
            + Array("Content-Length: 007\r\nExpect: 100-Continue\r\nX-Obs: caf\u{E9}\r\n\r\nbody...".utf8)
        let head = try LoopbackHTTPServer.parseRequestHead(bytes).get()
        #expect(head.method == "POST")
        #expect(head.target == "/token?x=1")
        #expect(head.minorVersion == 1)
        #expect(head.fields.map(\.name) == ["Host", "Content-Type", "Content-Length", "Expect", "X-Obs"])
        #expect(head.values("content-type") == [Array("application/x-www-form-urlencoded".utf8)])
        #expect(head.framing == .length(7))
        #expect(head.expectsContinue)
        #expect(Array(bytes[head.length...]) == Array("body...".utf8))
        let request = try #require(LoopbackHTTPServer.makeRequest(head, body: Array("body...".utf8), port: 4321))
        #expect(request.url?.absoluteString == "http://127.0.0.1:4321/token?x=1")
        #expect(request.headerFields[HTTPField.Name("X-Obs")!] == "caf\u{E9}")
    }

    @Test func bareLineFeedsAreAccepted() throws {
        let head = try LoopbackHTTPServer.parseRequestHead(Array("GET / HTTP/1.0\nA: b\n\n".utf8)).get()
        #expect(head.fields == [.init(name: "A", value: Array("b".utf8))])
        #expect(head.framing == .none)
        #expect(head.length == 21)
    }

    @Test func anUnfinishedHeadIsIncompleteUntilItsBound() {
        #expect(
            LoopbackHTTPServer.parseRequestHead(Array("GET / HTTP/1.1\r\nHost: x\r\n".utf8)) == .failure(.incomplete))
        #expect(LoopbackHTTPServer.parseRequestHead([]) == .failure(.incomplete))
        let long = [UInt8](repeating: 0x61, count: LoopbackHTTPServer.maximumHeadBytes)
        #expect(
            LoopbackHTTPServer.parseRequestHead(long) == .failure(.refused(status: 431, reason: "head too large")))
    }

    @Test func chunkedBodiesDecodeInAnyPieces() throws {
        let wire = Array("4\r\nWiki\r\n5;a=b\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: 1\r\n\r\nNEXT".utf8)
        for split in 0...wire.count {
            var decoder = LoopbackHTTPServer.ChunkedDecoder(limit: 100)
            let first = try decoder.feed(wire[..<split]).get()
            let second = try decoder.feed(wire[split...]).get()
            #expect(decoder.isComplete)
            #expect(first + second == wire.count - 4, "the bytes after the body are left alone")
            #expect(String(decoding: decoder.body, as: UTF8.self) == "Wikipedia in\r\n\r\nchunks.")
        }
        var small = LoopbackHTTPServer.ChunkedDecoder(limit: 8)
        #expect(small.feed(Array("9\r\n".utf8)) == .failure(.refused(status: 413, reason: "body too large")))
        var huge = LoopbackHTTPServer.ChunkedDecoder(limit: .max)
        if case .failure(.refused(let status, _)) = huge.feed(Array("FFFFFFFFFFFFFFFFFFFFFF\r\n".utf8)) {
            #expect(status == 413)
        } else {
            Issue.record("a chunk size past Int is refused")
        }
        var bad = LoopbackHTTPServer.ChunkedDecoder(limit: 100)
        if case .failure(.refused(let status, _)) = bad.feed(Array("3\r\nabcd\r\n".utf8)) {
            #expect(status == 400)
        } else {
            Issue.record("chunk data longer than its size is refused")
        }
    }
}

/// A client on a plain socket, for what HTTP libraries never send (malformed heads, `Expect` by hand).
final class RawConnection: Sendable {
    struct Failure: Error { let message: String }
    let descriptor: Int32
    private let closed = Mutex(false)

    /// Connects to 127.0.0.1:`port`; reads wait at most `timeout` seconds.
    init(port: UInt16, timeout: Int = 10) throws {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, Int32(SOCK_STREAM), 0)
        #endif
        guard fd >= 0 else { throw Failure(message: "socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            _ = closeSocket(fd)
            throw Failure(message: "connect: \(String(cString: strerror(errno)))")
        }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        #if canImport(Darwin)
        var yes: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
        #endif
        descriptor = fd
    }

    deinit { close() }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return sendBytes(descriptor, base + offset, buffer.count - offset)
            }
            if sent <= 0 { return }
            offset += sent
        }
    }

    /// No more bytes from this side (the server sees the end of the request).
    func endWriting() { _ = shutdown(descriptor, Int32(SHUT_WR)) }

    /// Reads until the server closes (or the read timeout), on a thread of its own: a blocking read on
    /// the cooperative pool (two threads on a two-core machine) would starve the server's tasks.
    func readToEnd() async -> [UInt8] { await offPool { self.blockingReadToEnd() } }

    /// Reads one byte at a time until `terminator` (so nothing past it is consumed).
    func read(until terminator: [UInt8]) async -> [UInt8] { await offPool { self.blockingRead(until: terminator) } }

    /// Sends `request` and reads the whole answer.
    func exchange(_ request: [UInt8]) async -> [UInt8] {
        send(request)
        return await readToEnd()
    }

    private func blockingReadToEnd() -> [UInt8] {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return data }
            data += buffer[0..<count]
        }
    }

    private func blockingRead(until terminator: [UInt8]) -> [UInt8] {
        var data: [UInt8] = []
        var byte: UInt8 = 0
        while !data.reversed().starts(with: terminator.reversed()) {
            guard recv(descriptor, &byte, 1, 0) == 1 else { return data }
            data.append(byte)
        }
        return data
    }

    /// Closes the socket (once, however often called).
    func close() {
        let first = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        if first { _ = closeSocket(descriptor) }
    }
}

/// Runs `executable` to its end (off the cooperative pool) and returns its status and standard output.
private func runProcess(_ executable: String, _ arguments: [String]) async -> (status: Int32, output: String) {
    await offPool {
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        do { try process.run() } catch { return (-1, "cannot start \(executable): \(error)") }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

/// Runs blocking socket work on a Dispatch thread, off the cooperative pool.
private func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue(label: "raw-connection").async { continuation.resume(returning: work()) }
    }
}

/// A raw request for a parameterized test, named by what is wrong with it.
struct RawCase: Sendable, CustomTestStringConvertible {
    let name: String
    let text: String
    let status: Int
    init(_ name: String, _ text: String, status: Int = 400) {
        self.name = name
        self.text = text
        self.status = status
    }
    var testDescription: String { name }
}

private func closeSocket(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #elseif canImport(Musl)
    return Musl.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}

private func sendBytes(_ fd: Int32, _ base: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Darwin)
    return send(fd, base, count, 0) // SO_NOSIGPIPE is set
    #else
    return send(fd, base, count, Int32(MSG_NOSIGNAL))
    #endif
}

/// The status code of an HTTP/1.1 answer's status line.
private func statusCode(_ answer: [UInt8]) -> Int? {
    guard answer.starts(with: "HTTP/1.1 ".utf8), answer.count >= 12 else { return nil }
    return Int(String(decoding: answer[9..<12], as: UTF8.self))
}
