import AsyncHTTPClient
import Foundation
import HTTPTypes
import MooseAsyncHTTPClient
import MooseHTTP
import MooseOAuth
import MooseOpenAPI
import NIOCore
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime

/// The adapters against their anchors, on the same local server (tools/testserver), in one run,
/// contenders interleaved in rounds: (1) a request through MooseAsyncHTTPClient + APIClient with the
/// auth middleware vs a bare AsyncHTTPClient request; (2) a request through swift-openapi's
/// AsyncHTTPClient transport with and without Moose's AccessTokenMiddleware (valid token: the hot path).
enum AdapterBench {
    struct Echo: Endpoint {
        let baseURL: URL
        var path: String { "/echo" }
        var requiresAuthentication: Bool { true }
    }

    static func run(root: URL) async throws {
        let (server, base) = try HTTPBench.startServer(root: root)
        defer { kill(server.processIdentifier, SIGKILL) }
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        let httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)

        // A coordinator holding a valid token (the hot path every request takes).
        let tokens = TokenSet(
            accessToken: String(repeating: "a", count: 40), expiresAt: Date().addingTimeInterval(3600))
        let session = OAuthSession(issuer: "https://x", clientID: "c", tokens: tokens)
        let storage = InMemorySessionStorage()
        _ = try await storage.replace(session, key: "bench")
        let coordinator = benchCoordinator(key: "bench", storage: storage, current: session) { $0 }
        let header = try await coordinator.accessToken().checkedAuthorizationHeader()

        // 1. MooseAsyncHTTPClient + APIClient + AuthMiddleware vs bare AsyncHTTPClient.
        let url = base.appendingPathComponent("echo")
        let client = APIClient(
            transport: HTTPClientTransport(client: httpClient), middlewares: [AuthMiddleware(coordinator: coordinator)])
        let endpoint = Echo(baseURL: base)
        let bare: (Int) async throws -> Void = { n in
            for _ in 0..<n {
                var request = HTTPClientRequest(url: url.absoluteString)
                request.headers.add(name: "Authorization", value: header)
                let response = try await httpClient.execute(request, timeout: .seconds(20))
                blackHole(try await response.body.collect(upTo: 16 << 20))
            }
        }
        let moose: (Int) async throws -> Void = { n in for _ in 0..<n { blackHole(try await client.send(endpoint)) } }
        let transportOnly = HTTPClientTransport(client: httpClient)
        let direct: (Int) async throws -> Void = { n in
            for _ in 0..<n {
                var request = APIRequest(url: url)
                request.headerFields[.authorization] = header
                blackHole(try await transportOnly.send(request))
            }
        }
        let auth = AuthMiddleware(coordinator: coordinator)
        let context = HTTPMiddlewareContext(isRetryable: true, requiresAuthentication: true)
        let authorized: (Int) async throws -> Void = { n in
            for _ in 0..<n {
                blackHole(
                    try await auth.intercept(APIRequest(url: url), context: context) {
                        try await transportOnly.send($0)
                    })
            }
        }
        let transportStats = try await compare(
            ["bare", "transport", "auth", "moose"], rounds: 101, batch: 20, [bare, direct, authorized, moose])
        let b = transportStats["bare"]!.median, t = transportStats["transport"]!.median,
            a = transportStats["auth"]!.median
        let m = transportStats["moose"]!.median
        print(
            "\n## AsyncHTTPClient: a request through Moose vs a bare request (GET /echo on 127.0.0.1, µs per request, median of 101 rounds of 20)\n"
        )
        func cell(_ value: Double) -> String {
            "\(String(format: "%.0f", value / 1000)) (\(String(format: "%.2fx", value / b)))"
        }
        print(
            "| bare AsyncHTTPClient (`execute` + `collect`, same Authorization header) | `HTTPClientTransport.send` | `AuthMiddleware` → `HTTPClientTransport` | target | the whole `APIClient` (retry, logging, enforced timeout, validation) + `AuthMiddleware` |"
        )
        print("|---|---|---|---|---|")
        print("| \(String(format: "%.0f", b / 1000)) | \(cell(t)) | **\(cell(a))** | ≤ 1.10x | \(cell(m)) |")

        // 2. The OpenAPI middleware's added cost: the same runtime transport, with and without it.
        let transport = AsyncHTTPClientTransport(configuration: .init(client: httpClient))
        let middleware = AccessTokenMiddleware(coordinator: coordinator)
        let request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/echo")
        let without: (Int) async throws -> Void = { n in
            for _ in 0..<n {
                var plain = request
                plain.headerFields[.authorization] = header // the token a client without Moose would attach itself
                let (_, body) = try await transport.send(plain, body: nil, baseURL: base, operationID: "echo")
                if let body { blackHole(try await ArraySlice(collecting: body, upTo: 16 << 20)) }
            }
        }
        let with: (Int) async throws -> Void = { n in
            for _ in 0..<n {
                let (_, body) = try await middleware.intercept(request, body: nil, baseURL: base, operationID: "echo") {
                    request, body, url in
                    try await transport.send(request, body: body, baseURL: url, operationID: "echo")
                }
                if let body { blackHole(try await ArraySlice(collecting: body, upTo: 16 << 20)) }
            }
        }
        let openAPIStats = try await compare(["without", "with"], rounds: 101, batch: 20, [without, with])
        let w0 = openAPIStats["without"]!.median, w1 = openAPIStats["with"]!.median

        // The middleware alone, in-process: a transport that answers at once.
        let ok = HTTPResponse(status: .ok)
        let stubWithout: (Int) async throws -> Void = { n in
            for _ in 0..<n {
                var plain = request
                plain.headerFields[.authorization] = header
                blackHole(plain)
                blackHole(ok)
            }
        }
        let stubWith: (Int) async throws -> Void = { n in
            for _ in 0..<n {
                blackHole(
                    try await middleware.intercept(request, body: nil, baseURL: base, operationID: "echo") { _, _, _ in
                        (ok, nil)
                    })
            }
        }
        let stubStats = try await compare(["without", "with"], rounds: 25, batch: 100_000, [stubWithout, stubWith])
        print(
            "\n## swift-openapi: the middleware's added cost (GET /echo through swift-openapi-async-http-client, valid token, µs per request, median of 101 rounds of 20)\n"
        )
        print(
            "| runtime transport, Authorization set by hand | the same through `AccessTokenMiddleware` | ratio | target | the middleware alone, in-process (ns: set the header by hand → middleware) |"
        )
        print("|---|---|---|---|---|")
        print(
            "| \(String(format: "%.0f", w0 / 1000)) | \(String(format: "%.0f", w1 / 1000)) | \(String(format: "%.2fx", w1 / w0)) | ≤ 1.05x | \(String(format: "%.0f", stubStats["without"]!.median)) → \(String(format: "%.0f", stubStats["with"]!.median)) |"
        )
        try await httpClient.shutdown().get()
    }
}
