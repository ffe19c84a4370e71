#if MooseAsyncHTTPClient
import AsyncHTTPClient
import Foundation
import MooseAsyncHTTPClient
import MooseHTTP
import MooseTestSupport
import Testing

/// tools/testserver/http_test_server.py on 127.0.0.1 (exits with this process).
enum TestServer {
    static let base: URL = URL(string: "http://127.0.0.1:\(LocalServer.start("tools/testserver/http_test_server.py"))")!
}

/// The app's clients: one that never follows redirects (what the transport's docs ask for), and
/// AsyncHTTPClient's shared singleton, which follows them.
enum Clients {
    static let disallowingRedirects: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()
    static let transport = HTTPClientTransport(client: disallowingRedirects)
}

/// The same contract URLSession and libcurl keep (MooseHTTPTests.TransportContractTests), against
/// the AsyncHTTPClient transport.
struct HTTPClientTransportContractTests {
    let transport = Clients.transport
    let base = TestServer.base

    @Test func responseHeadersArrive() async throws {
        try await HTTPTransportContract.responseHeadersArrive(transport, base: base)
    }
    @Test func requestHeadersArriveAsHTTP1Lines() async throws {
        try await HTTPTransportContract.requestHeadersArriveAsHTTP1Lines(transport, base: base)
    }
    @Test func bodiesArriveByteForByte() async throws {
        try await HTTPTransportContract.bodiesArriveByteForByte(transport, base: base)
    }
    @Test func bodyFilesAreSent() async throws {
        try await HTTPTransportContract.bodyFilesAreSent(transport, base: base)
    }
    @Test func redirectsAreNotFollowed() async throws {
        try await HTTPTransportContract.redirectsAreNotFollowed(transport, base: base)
    }
    @Test func timeoutsAreReported() async throws {
        try await HTTPTransportContract.timeoutsAreReported(transport, base: base)
    }
    @Test func cancellationEndsTheRequest() async throws {
        try await HTTPTransportContract.cancellationEndsTheRequest(transport, base: base)
    }
    @Test func downloadsStreamToDiskInBoundedMemory() async throws {
        let (transport, base) = (transport, base)
        try await MemoryMeasurement.shared.exclusively {
            try await HTTPTransportContract.downloadsStreamToDiskInBoundedMemory(transport, base: base)
        }
    }
    @Test func cancelledDownloadsStop() async throws {
        try await HTTPTransportContract.cancelledDownloadsStop(transport, base: base)
    }
    @Test func uploadsStreamFromAFileWithProgress() async throws {
        try await HTTPTransportContract.uploadsStreamFromAFileWithProgress(transport, base: base)
    }
}

struct HTTPClientTransportTests {
    /// With a client that follows redirects (AsyncHTTPClient's shared one), a body is never re-sent
    /// to the target — it goes as a one-shot stream, and AsyncHTTPClient hands back the 3xx instead —
    /// and a body-less request that was redirected is refused rather than answered from elsewhere.
    @Test func aClientThatFollowsRedirectsStillNeverDeliversARedirectedAnswer() async throws {
        let transport = HTTPClientTransport(client: .shared)
        let target = TestServer.base.appendingPathComponent("echo/redirected").absoluteString
        let post = TestServer.base.appendingPathComponent("redirect")
            .appending(queryItems: [URLQueryItem(name: "status", value: "307"), URLQueryItem(name: "to", value: target)]
            )
        let response = try await transport.send(
            APIRequest(method: .post, url: post, body: Data("client_secret=s".utf8)))
        #expect(response.status.code == 307, "the form body followed the Location")

        let get = TestServer.base.appendingPathComponent("redirect").appending(queryItems: [
            URLQueryItem(name: "to", value: target)
        ])
        do {
            let answer = try await transport.send(APIRequest(url: get))
            Issue.record("a redirected answer was delivered: \(answer.status)")
        } catch let error as HTTPRequestError {
            #expect(error.code == HTTPRequestError.transport && error.message.contains("redirect"))
        }
    }

    /// A body over the limit is refused by its Content-Length, before it is read.
    @Test func responsesAreBounded() async throws {
        let transport = HTTPClientTransport(client: Clients.disallowingRedirects, maximumResponseSize: 1 << 20)
        let url = TestServer.base.appendingPathComponent("bytes").appending(queryItems: [
            URLQueryItem(name: "n", value: "2000000")
        ])
        do {
            _ = try await transport.send(APIRequest(url: url))
            Issue.record("a 2 MB body passed a 1 MiB limit")
        } catch let error as HTTPRequestError {
            #expect(error.code == HTTPRequestError.responseTooLarge)
        }
        let small = TestServer.base.appendingPathComponent("bytes").appending(queryItems: [
            URLQueryItem(name: "n", value: "1000")
        ])
        #expect(try await transport.send(APIRequest(url: small)).body.count == 1000)
    }

    /// Only http and https: a `unix:` or `http+unix:` URL (AsyncHTTPClient would open a local socket) is refused before any I/O.
    @Test func onlyHTTPAndHTTPS() async throws {
        for url in ["http+unix://%2Ftmp%2Fsock/x", "unix:///tmp/sock", "ftp://127.0.0.1/x"] {
            await #expect(throws: HTTPRequestError.self, "\(url)") {
                _ = try await Clients.transport.send(APIRequest(url: try #require(URL(string: url))))
            }
        }
    }

    /// APIClient over the transport: the chain (retry, logging, enforced timeouts) works unchanged.
    @Test func apiClientOverAsyncHTTPClient() async throws {
        struct Flaky: Endpoint {
            let key: String
            var baseURL: URL { TestServer.base }
            var path: String { "/flaky/\(key)" }
            var query: [QueryItem] { [QueryItem("fail", "1")] }
        }
        let client = APIClient(transport: Clients.transport, retryPolicy: RetryPolicy(backoff: .constant(0.01)))
        let answer = try await client.json(from: Flaky(key: UUID().uuidString))
        #expect(answer["attempt"]?.number == 2)
    }
}
#endif
