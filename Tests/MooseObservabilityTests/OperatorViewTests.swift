#if MooseObservability
import CoreMetrics
import Foundation
import InMemoryTracing
import MetricsTestKit
import MooseHTTP
import MooseObservability
import MooseOAuth
import MooseTestSupport
import MooseURLSession
import Testing
import Tracing

/// Issue 33 §4, "What an operator sees": what a dashboard and a trace show of real traffic at the two
/// test providers (django-oauth-toolkit, Glewlwyd), read with swift-metrics' and
/// swift-distributed-tracing's own test backends.
@Suite(.serialized)
struct OperatorViewTests {
    static func attribute(_ span: FinishedInMemorySpan, _ name: String) -> SpanAttribute? {
        span.attributes[name]?.toSpanAttribute()
    }

    static func path(_ span: FinishedInMemorySpan) -> String {
        if case .string(let path)? = attribute(span, "url.path") { return path }
        return ""
    }

    /// Every metric name and every dimension value in one case style (snake_case), durations in seconds.
    static func expectSnakeCase(_ metrics: TestMetrics, sourceLocation: SourceLocation = #_sourceLocation) {
        func isSnake(_ text: String) -> Bool {
            !text.isEmpty && text.allSatisfy { ($0.isASCII && $0.isLowercase) || $0.isNumber || $0 == "_" }
        }
        for counter in metrics.counters {
            #expect(
                isSnake(counter.label) && counter.dimensions.allSatisfy { isSnake($0.0) && isSnake($0.1) },
                "\(counter.label) \(counter.dimensions)", sourceLocation: sourceLocation)
        }
        for timer in metrics.timers {
            #expect(
                timer.label.hasSuffix("_seconds") && timer.dimensions.allSatisfy { isSnake($0.0) && isSnake($0.1) },
                "\(timer.label) \(timer.dimensions)", sourceLocation: sourceLocation)
        }
    }

    /// A refused grant's span names the OAuth error the provider sent; a 404's names its status; both
    /// are errors. Nothing else of the answer (its description, a token) becomes an attribute.
    @Test func aFailedSpanSaysWhatFailed() async throws {
        let metrics = TestMetrics()
        let tracer = InMemoryTracer()
        let transport = ObservedTransport(URLSessionTransport(), metrics: metrics, tracer: tracer)
        let metadata = try await Discovery(transport: transport).metadata(for: TestIdentityProvider.issuer)

        // A refresh token the provider never issued: 400 {"error": "invalid_grant"}.
        let cli = OAuthClient(metadata: metadata, clientID: "moose-cli", transport: transport)
        await #expect(throws: OAuthError.self) {
            _ = try await cli.refresh(TokenSet(accessToken: "a", refreshToken: "never-issued-refresh"))
        }
        // A wrong secret: 401 {"error": "invalid_client"}.
        let wrong = OAuthClient(
            metadata: metadata, clientID: "moose-service", authentication: .clientSecretBasic("not-the-secret"),
            transport: transport)
        await #expect(throws: OAuthError.self) {
            _ = try await ClientCredentialsFlow(client: wrong).authorize(AuthorizationParameters(scopes: []))
        }
        // UserInfo with a token it does not know: 401, `invalid_token` (RFC 6750 §3).
        await #expect(throws: OAuthError.self) {
            _ = try await cli.userInfo(accessToken: "never-issued-access", expectedSubject: nil)
        }
        // A path the provider does not serve: 404, an HTML page.
        let missing = try #require(URL(string: TestIdentityProvider.issuer + "/moose-no-such-endpoint/"))
        #expect(try await transport.send(APIRequest(url: missing)).status.code == 404)

        let spans = tracer.finishedSpans
        func failed(_ path: String) throws -> FinishedInMemorySpan {
            try #require(
                spans.last { Self.path($0).hasSuffix(path) && $0.status?.code == .error },
                "\(spans.map { Self.path($0) })")
        }
        let token = try #require(metadata.tokenEndpoint).path
        let refused = spans.filter { Self.path($0) == token && $0.status?.code == .error }
        #expect(
            refused.compactMap { Self.attribute($0, "error.type") } == [
                .string("invalid_grant"), .string("invalid_client")
            ],
            "\(refused.map(\.attributes))")
        #expect(Self.attribute(try failed("/userinfo"), "error.type") == .string("invalid_token"))
        let notFound = try failed("/moose-no-such-endpoint")
        #expect(
            Self.attribute(notFound, "error.type") == .string("404")
                && Self.attribute(notFound, "http.response.status_code") == .int64(404))
        // The promise of docs/adapters.md: every failed span has error.type.
        for span in spans where span.status?.code == .error {
            #expect(Self.attribute(span, "error.type") != nil, "\(span.operationName) \(span.attributes)")
            #expect(
                !"\(span.attributes)".contains("expired, revoked") && !"\(span.attributes)".contains("never-issued"),
                "\(span.attributes)")
        }
        #expect(
            try metrics.expectCounter(
                "moose_token_requests_total", [("grant", "refresh_token"), ("outcome", "refused")]
            ).lastValue == 1)
        // UserInfo, the 404
        #expect(try metrics.expectCounter("moose_provider_requests_total", [("outcome", "refused")]).totalValue == 2)
        Self.expectSnakeCase(metrics)
    }

    /// An answer's `error` counts only when it is a registered OAuth error code: a provider's own
    /// text never becomes an attribute. A challenge's `error` counts when the body has none.
    @Test func errorTypeIsARegisteredCodeOrTheStatus() async throws {
        struct Answering: HTTPTransport {
            let response: APIResponse
            func send(_ request: APIRequest) async throws -> APIResponse { response }
        }
        let cases: [(APIResponse, String)] = [
            (
                APIResponse(status: 400, body: Data(#"{"error":"invalid_scope","error_description":"no"}"#.utf8)),
                "invalid_scope"
            ),
            (APIResponse(status: 400, body: Data(#"{"error":"Token abc123 is dead"}"#.utf8)), "400"),
            (APIResponse(status: 400, body: Data(#"{"error":42}"#.utf8)), "400"),
            (APIResponse(status: 403, body: Data()), "403"),
            (APIResponse(status: 503, body: Data("down".utf8)), "503"),
            (
                APIResponse(
                    status: 401, headerFields: [.wwwAuthenticate: #"DPoP algs="ES256", error="use_dpop_nonce""#]),
                "use_dpop_nonce"
            ),
            (APIResponse(status: 401, headerFields: [.wwwAuthenticate: #"Bearer error="secret-text""#]), "401")
        ]
        for (response, expected) in cases {
            let tracer = InMemoryTracer()
            let transport = ObservedTransport(Answering(response: response), metrics: TestMetrics(), tracer: tracer)
            _ = try await transport.send(APIRequest(url: try #require(URL(string: "https://id.example.com/userinfo"))))
            let span = try #require(tracer.finishedSpans.first)
            #expect(
                Self.attribute(span, "error.type") == .string(expected) && span.status?.code == .error,
                "\(span.attributes)")
        }
    }

    /// Discovery at an issuer with a path (Glewlwyd's `/api/oidc`) probes two well-known locations
    /// that answer 404 before the document: `not_found`, not `refused`, and no failed span — an alert
    /// on refused requests stays quiet at every service start.
    @Test func discoveryProbesThatFindNothingAreNotRefusals() async throws {
        guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
        let metrics = TestMetrics()
        let tracer = InMemoryTracer()
        let transport = ObservedTransport(URLSessionTransport(), metrics: metrics, tracer: tracer)
        let metadata = try await Discovery(transport: transport).metadata(for: issuer)
        #expect(metadata.issuer == issuer)

        #expect(try metrics.expectCounter("moose_provider_requests_total", [("outcome", "not_found")]).totalValue == 2)
        #expect(try metrics.expectCounter("moose_provider_requests_total", [("outcome", "ok")]).totalValue == 1)
        #expect(metrics.counters(label: "moose_provider_requests_total", dimensions: [("outcome", "refused")]).isEmpty)
        let probes = tracer.finishedSpans.filter { Self.attribute($0, "http.response.status_code") == .int64(404) }
        #expect(
            probes.count == 2
                && probes.allSatisfy { Self.path($0).hasPrefix("/.well-known/") && $0.status?.code == nil },
            "\(probes.map(\.attributes))")
        #expect(probes.allSatisfy { Self.attribute($0, "error.type") == nil })
        Self.expectSnakeCase(metrics)
    }

    /// A client-credentials login has no user: UserInfo is not asked (Glewlwyd answered it 404 at every
    /// service login) — not even when the tokens carry `openid`; and tokens with neither an ID token nor
    /// `openid` are not taken there whatever their grant.
    @Test func aServiceLoginDoesNotAskUserInfo() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let tracer = InMemoryTracer()
            let transport = ObservedTransport(URLSessionTransport(), metrics: TestMetrics(), tracer: tracer)
            // The login a service makes.
            let service = TokenManager(
                issuer: issuer, clientID: "moose-service", authentication: .clientSecretBasic("moose-service-secret"),
                storage: InMemorySessionStorage(), transport: transport, scopes: ["api.read"])
            _ = try await service.login(with: .clientCredentials)
            let metadata = try await Discovery(transport: transport).metadata(for: issuer)
            // A client-credentials grant whose tokens say `openid` (as a provider granting it by default
            // would; Moose does not ask for it there): the grant decides.
            let confidential = OAuthClient(
                metadata: metadata, clientID: "moose-confidential",
                authentication: .clientSecretBasic("moose-confidential-secret"), transport: transport)
            var granted = try await ClientCredentialsFlow(client: confidential).authorize(
                AuthorizationParameters(scopes: ["profile"]))
            granted.scopes.append("openid")
            _ = try await SessionEngine(key: "openid", storage: InMemorySessionStorage())
                .completeLogin(granted, client: confidential, grant: .clientCredentials)
            // Tokens without an ID token or `openid`, their grant not said: no user to ask about either.
            let client = OAuthClient(
                metadata: metadata, clientID: "moose-service",
                authentication: .clientSecretBasic("moose-service-secret"),
                transport: transport)
            let tokens = try await ClientCredentialsFlow(client: client).authorize(
                AuthorizationParameters(scopes: ["api.read"]))
            _ = try await SessionEngine(key: "bare", storage: InMemorySessionStorage()).completeLogin(
                tokens, client: client)

            let userinfo = try #require(metadata.userinfoEndpoint).path
            let paths = tracer.finishedSpans.map { Self.path($0) }
            #expect(paths.filter { $0.hasSuffix("/token") }.count == 3, "\(paths)")
            #expect(!paths.contains(userinfo), "\(paths)")
        }
    }

    /// The coordinator's outcomes in the one case style: `OAuthError` codes in snake_case, as
    /// `needs_login` always was.
    @Test func refreshOutcomesAreSnakeCase() async throws {
        let metrics = TestMetrics()
        for (code, label) in [
            (OAuthError.invalidClient, "invalid_client"), (OAuthError.invalidIDToken, "invalid_id_token"),
            (OAuthError.issuerMismatchInResponse, "authorization_response_issuer_mismatch")
        ] {
            let storage = InMemorySessionStorage()
            let expired = TokenSet(accessToken: "old", refreshToken: "r1", expiresAt: Date().addingTimeInterval(-5))
            _ = try await storage.replace(
                OAuthSession(issuer: "https://id.example.com", clientID: "c", tokens: expired), key: "k")
            let coordinator = RefreshCoordinator(key: "k", storage: storage) { _ in throw OAuthError(code, "refused") }
            let task = CoordinatorMetrics.record(coordinator, metrics: metrics)
            defer { task.cancel() }
            try await Task.sleep(nanoseconds: 50_000_000) // the listener is registered
            await #expect(throws: OAuthError.self) { _ = try await coordinator.accessToken() }
            for _ in 0..<200
            where metrics.counters(label: "moose_refreshes_total", dimensions: [("outcome", label)]).isEmpty {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            #expect(
                try metrics.expectCounter("moose_refreshes_total", [("outcome", label)]).totalValue == 1,
                "\(metrics.counters.map(\.dimensions))")
        }
        Self.expectSnakeCase(metrics)
    }

    /// Every grant label the transport gives is in the documented list (docs/adapters.md,
    /// "Observability"), `password` and `other` included; the request goes to the real provider.
    @Test func grantLabelsAreTheDocumentedOnes() async throws {
        let metrics = TestMetrics()
        let transport = ObservedTransport(URLSessionTransport(), metrics: metrics, tracer: InMemoryTracer())
        let metadata = try await Discovery(transport: transport).metadata(for: TestIdentityProvider.issuer)
        let endpoint = try #require(metadata.tokenEndpoint)
        for grant in ["password", "urn:example:a-grant-of-its-own"] {
            let request = APIRequest(
                method: .post, url: endpoint, headerFields: [.contentType: "application/x-www-form-urlencoded"],
                body: Data("grant_type=\(grant)&client_id=moose-cli&username=alice".utf8))
            #expect(try await transport.send(request).status.code >= 400)
        }
        let labels = Set(
            metrics.counters(label: "moose_token_requests_total").compactMap {
                $0.dimensions.first { $0.0 == "grant" }?.1
            })
        #expect(labels == ["password", "other"])
        let docs = try String(contentsOfFile: LocalServer.repositoryRoot + "/docs/adapters.md", encoding: .utf8)
        let row = try #require(docs.split(separator: "\n").first { $0.contains("`moose_token_requests_total`") })
        let documented = [
            "authorization_code", "refresh_token", "client_credentials", "password", "device_code", "token_exchange",
            "jwt_bearer",
            "other"
        ]
        for label in documented {
            #expect(row.contains("`\(label)`"), "docs/adapters.md does not list grant \(label)")
        }
        Self.expectSnakeCase(metrics)
    }
}
#endif
