import Foundation
import HTTPTypes
@testable import MooseHTTP
import Testing

/// `APIRequest(url:)` splits a plain URL itself (`PlainURL`) instead of with `HTTPRequest(url:)`'s
/// `URLComponents`, and `url` returns the URL it was made with while the head still names it: both
/// must give exactly what swift-http-types gives, for every URL.
struct APIRequestURLTests {
    /// Characters URLs are made of here: every kind the split treats apart, and some it refuses.
    static let pieces = [
        "a", "Z", "0", "9", "-", ".", "_", "~", "!", "$", "&", "'", "(", ")", "*", "+", ",", ";", "=", ":", "@",
        "/", "?", "%2F", "%41", "%e9", "%", "%G1", "#", "[", "]", " ", "é", "\\", "|", "^", "`", "{", "}", "\"", "<"
    ]
    static let hosts = [
        "127.0.0.1", "localhost", "api.example.com", "a-b.example", "API.Example.com", "[::1]", "user:pw@host",
        "user@host", "xn--bcher-kva.example", "h_st", ""
    ]
    static let ports = ["", ":8080", ":1", ":65535", ":", ":99999", ":08"]

    /// The head swift-http-types makes of `url`.
    static func reference(_ url: URL) -> HTTPRequest { HTTPRequest(method: .get, url: url) }

    @Test func thePlainSplitIsHTTPRequestsOnGeneratedURLs() throws {
        var generator = SystemRandomNumberGenerator()
        var checked = 0
        for round in 0..<10_000 {
            let scheme = ["http", "https", "HTTP", "ftp"][round % 13 == 0 ? (round / 13) % 4 : round % 2]
            let host = Self.hosts[Int.random(in: 0..<Self.hosts.count, using: &generator)]
            let port = Self.ports[Int.random(in: 0..<Self.ports.count, using: &generator)]
            var path = round % 17 == 0 ? "" : "/"
            for _ in 0..<Int.random(in: 0..<12, using: &generator) {
                path += Self.pieces[Int.random(in: 0..<Self.pieces.count, using: &generator)]
            }
            let text = "\(scheme)://\(host)\(port)\(path)"
            guard let url = URL(string: text), url.scheme != nil else { continue }
            // swift-http-types refuses (traps on) URLs without a scheme it can range; these have one.
            guard let split = PlainURL(url) else { continue }
            checked += 1
            let head = Self.reference(url)
            #expect(split.scheme == head.scheme, "scheme of \(text)")
            #expect(split.authority == head.authority, "authority of \(text)")
            #expect(split.path == head.path, "path of \(text)")
            #expect(split.url.absoluteString == head.url?.absoluteString, "the URL of \(text)")
            #expect(split.url == head.url, "the URL of \(text)")
        }
        #expect(checked > 500, "only \(checked) generated URLs were plain")
    }

    @Test func commonURLsArePlainAndOthersAreLeftToHTTPRequest() throws {
        for text in [
            "http://127.0.0.1:8080/echo", "https://api.example.com/v1/users?tag=a&tag=b",
            "https://idp.example/token?redirect_uri=http://127.0.0.1:1/cb&x=%2F"
        ] {
            #expect(PlainURL(try #require(URL(string: text))) != nil, "\(text) is not plain")
        }
        for text in [
            "http://127.0.0.1:8080", "http://host?x=1", "https://user:pw@host/x", "https://HOST/x", "http://[::1]:80/x",
            "https://host/x#fragment", "HTTPS://host/x", "https://host:/x", "file:///tmp/x"
        ] {
            let url = try #require(URL(string: text))
            #expect(PlainURL(url) == nil, "\(text) is plain")
        }
        let relative = try #require(URL(string: "echo", relativeTo: URL(string: "http://127.0.0.1:1/")))
        #expect(PlainURL(relative) == nil, "a URL with a base is plain")
    }

    /// Whatever the URL, `APIRequest` has the head and URL swift-http-types gives it, and its URL
    /// follows every change of the head.
    @Test func theRequestsURLFollowsItsHead() throws {
        for text in [
            "http://127.0.0.1:8080/echo", "https://api.example.com/v1/users?tag=a&tag=b", "http://host?x=1",
            "https://user:pw@host/x", "https://host/x#fragment", "http://127.0.0.1:8080"
        ] {
            let url = try #require(URL(string: text))
            var request = APIRequest(url: url)
            let head = Self.reference(url)
            #expect(request.head.scheme == head.scheme && request.head.authority == head.authority, "\(text)")
            #expect(request.head.path == head.path, "\(text)")
            #expect(request.url == head.url, "\(text)")
            #expect(request.url?.absoluteString == head.url?.absoluteString, "\(text)")

            request.head.path = "/other?q=1"
            #expect(request.url?.absoluteString == request.head.url?.absoluteString, "path changed: \(text)")
            request.head.path = head.path
            #expect(request.url?.absoluteString == head.url?.absoluteString, "path back: \(text)")
            request.head.authority = "example.org:9"
            #expect(request.url?.absoluteString == request.head.url?.absoluteString, "authority changed: \(text)")
            request.head.authority = head.authority
            request.head.scheme = "https"
            #expect(request.url?.absoluteString == request.head.url?.absoluteString, "scheme changed: \(text)")
            request.head.scheme = head.scheme
            request.method = .connect
            #expect(request.url == nil, "CONNECT has no URL: \(text)")
            request.method = .get
            let other = try #require(URL(string: "https://other.example/p"))
            request.url = other
            #expect(request.url?.absoluteString == "https://other.example/p")
            request.head = head
            #expect(request.url?.absoluteString == head.url?.absoluteString, "head replaced: \(text)")
        }
    }
}
