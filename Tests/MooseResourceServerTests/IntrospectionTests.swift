import Foundation
import HTTPTypes
import MooseHTTP
import MooseJWT
@testable import MooseResourceServer
import MooseURLSession
import Testing

/// Opaque tokens through RFC 7662 introspection: the cache, one request per new token, and the
/// django-oauth-toolkit test IdP's real endpoint.
@Suite struct IntrospectionTests {
    /// A stand-in endpoint: answers after a pause, counts requests, remembers the last body.
    final class Endpoint: HTTPTransport, @unchecked Sendable {
        private let lock = NSLock()
        private var requests: [APIRequest] = []
        let answer: @Sendable (String) -> String
        init(answer: @escaping @Sendable (String) -> String) { self.answer = answer }
        var count: Int { lock.withLock { requests.count } }
        var last: APIRequest? { lock.withLock { requests.last } }

        func send(_ request: APIRequest) async throws -> APIResponse {
            lock.withLock { requests.append(request) }
            try await Task.sleep(for: .milliseconds(50))
            let form = RequestBuilder.decodeForm(String(decoding: request.body ?? Data(), as: UTF8.self))
            let token = form.first { $0.0 == "token" }?.1 ?? ""
            return APIResponse(
                status: .ok, headerFields: [.contentType: "application/json"], body: Data(answer(token).utf8))
        }
    }

    static let exp = Int64(Harness.now.timeIntervalSince1970) + 600

    func server(_ introspector: TokenIntrospector) throws -> MooseResourceServer.ResourceServer {
        MooseResourceServer.ResourceServer(
            configuration: try Harness().configuration(), keys: StaticAccessTokenKeys([]),
            introspector: introspector)
    }

    @Test func concurrentRequestsWithOneNewTokenMakeOneCallAndTheAnswerIsCached() async throws {
        let endpoint = Endpoint { token in
            token == "good"
                ? #"{"active":true,"client_id":"app","scope":"api.read","exp":\#(Self.exp),"sub":"alice"}"#
                : #"{"active":false}"#
        }
        let introspector = TokenIntrospector(
            endpoint: URL(string: "https://id.example.com/introspect")!, clientID: "rs", clientSecret: "s e",
            transport: endpoint, clock: { Harness.now })
        let server = try server(introspector)
        let subjects = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    try await server.verify(
                        authorizationHeader: "Bearer good", dpopHeader: nil, method: "GET", url: Harness.url
                    ).subject
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(subjects == Array(repeating: "alice", count: 8))
        let requests = await introspector.requestCount
        #expect(endpoint.count == 1 && requests == 1)
        // Client authentication: HTTP Basic with the form-encoded secret ("s e" → "s+e").
        #expect(endpoint.last?.headerFields[.authorization] == "Basic " + Data("rs:s+e".utf8).base64EncodedString())
        _ = try await server.verify(
            authorizationHeader: "Bearer good", dpopHeader: nil, method: "GET", url: Harness.url)
        #expect(endpoint.count == 1)

        let inactive = try #require(
            try await refusal {
                try await server.verify(
                    authorizationHeader: "Bearer bad", dpopHeader: nil, method: "GET", url: Harness.url)
            })
        #expect(inactive.code == ResourceServerRefusal.invalidToken)
        _ = try await refusal {
            try await server.verify(authorizationHeader: "Bearer bad", dpopHeader: nil, method: "GET", url: Harness.url)
        }
        #expect(endpoint.count == 2, "the inactive answer is cached briefly")
    }

    @Test(arguments: [
        #"{"active":true,"client_id":"app","iss":"https://evil.example.com"}"#,
        #"{"active":true,"client_id":"app","aud":"https://other.example.com"}"#,
        #"{"active":true,"client_id":"app","exp":1000}"#,
        #"{"active":true}"#,
        #"{"active":false,"client_id":"app","sub":"alice"}"#
    ])
    func introspectedTokensAreCheckedLikeJWTs(_ answer: String) async throws {
        let endpoint = Endpoint { _ in answer }
        let introspector = TokenIntrospector(
            endpoint: URL(string: "https://id.example.com/introspect")!, clientID: "rs", clientSecret: "s",
            authentication: .post, transport: endpoint, clock: { Harness.now })
        let refused = try #require(
            try await refusal {
                try await server(introspector).verify(
                    authorizationHeader: "Bearer opaque", dpopHeader: nil, method: "GET", url: Harness.url)
            })
        #expect(refused.code == ResourceServerRefusal.invalidToken)
        #expect(endpoint.last?.headerFields[.authorization] == nil)
    }

    @Test(arguments: [(200, "[]"), (200, #"{"active":"true"}"#), (500, #"{"active":true}"#), (200, "not json")])
    func unusableAnswersAreUnavailableNeverActive(_ status: Int, _ body: String) async throws {
        let error = #expect(throws: IntrospectionError.self) {
            try IntrospectionAnswer.parse(status: status, body: Array(body.utf8))
        }
        #expect(error?.status == (status == 200 ? nil : status))
    }

    /// An endpoint that answers `status` (or fails, for nil) to every introspection.
    struct Failing: HTTPTransport {
        let status: Int?
        func send(_ request: APIRequest) async throws -> APIResponse {
            guard let status else { throw HTTPRequestError(HTTPRequestError.transport, "connection refused") }
            return APIResponse(
                status: HTTPResponse.Status(code: status), headerFields: [.contentType: "application/json"],
                body: Data(#"{"error":"invalid_client"}"#.utf8))
        }
    }

    /// A token that cannot be checked now is refused as unavailable; the refusal says the endpoint's
    /// status when that was the fault, so a caller can tell the issuer refusing the resource server's
    /// own client (4xx: fix the client) from an outage (5xx, or no answer: try again).
    @Test(arguments: [401, 400, 503, nil] as [Int?])
    func anIntrospectionEndpointsStatusComesWithTheRefusal(_ status: Int?) async throws {
        let introspector = TokenIntrospector(
            endpoint: URL(string: "https://id.example.com/introspect")!, clientID: "rs", clientSecret: "s",
            transport: Failing(status: status), clock: { Harness.now })
        let refused = try #require(
            try await refusal {
                try await server(introspector).verify(
                    authorizationHeader: "Bearer opaque", dpopHeader: nil, method: "GET", url: Harness.url)
            })
        #expect(refused.code == ResourceServerRefusal.temporarilyUnavailable && refused.status == 503)
        #expect(refused.introspectionStatus == status)
    }

    @Test func theTestIdPsOpaqueTokensAreIntrospected() async throws {
        guard let issuer = ProcessInfo.processInfo.environment["MOOSE_IDP_ISSUER"] else {
            Issue.record("MOOSE_IDP_ISSUER is not set (. /tmp/testenv.sh or tools/test)")
            return
        }
        let transport = URLSessionTransport()
        let metadata = try JSONValue(
            parsing: Array(
                try await transport.send(
                    APIRequest(url: URL(string: issuer + "/.well-known/oauth-authorization-server")!)
                ).body))
        let tokenURL = try #require(metadata["token_endpoint"]?.stringValue.flatMap(URL.init(string:)))
        let introspectionURL = try #require(metadata["introspection_endpoint"]?.stringValue.flatMap(URL.init(string:)))
        var request = APIRequest(
            method: .post, url: tokenURL, body: Data("grant_type=client_credentials&scope=read".utf8))
        request.headerFields[.contentType] = "application/x-www-form-urlencoded"
        request.headerFields[.authorization] =
            "Basic " + Data("moose-service:moose-service-secret".utf8).base64EncodedString()
        let response = try await transport.send(request)
        let token = try #require(try JSONValue(parsing: Array(response.body))["access_token"]?.stringValue)

        let introspector = TokenIntrospector(
            endpoint: introspectionURL, clientID: "moose-resource-server",
            clientSecret: "moose-resource-server-secret", transport: transport)
        var configuration = try Harness().configuration()
        configuration.issuer = issuer
        configuration.clock = { Date() }
        let server = MooseResourceServer.ResourceServer(
            configuration: configuration, keys: StaticAccessTokenKeys([]), introspector: introspector)
        let principal = try await server.verify(
            authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET", url: Harness.url,
            requiredScopes: ["read"])
        #expect(principal.clientID == "moose-service" && principal.scopes == ["read"] && principal.expiresAt != nil)
        let unknown = try await refusal {
            try await server.verify(
                authorizationHeader: "Bearer not-a-token-\(UUID().uuidString)", dpopHeader: nil, method: "GET",
                url: Harness.url)
        }
        #expect(unknown?.code == ResourceServerRefusal.invalidToken)
        #expect(await introspector.requestCount == 2)
    }
}
