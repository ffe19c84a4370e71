#if ExampleService
// A Hummingbird 2 service that calls a protected API through an OpenAPI-generated client, with a
// client-credentials token from Moose shared by every request handler. tools/test builds it and runs
// it under load (Tests/MooseOpenAPITests/ExampleServiceTests.swift).
//
//   MOOSE_IDP_ISSUER=http://127.0.0.1:8765 MOOSE_API_URL=http://127.0.0.1:PORT swift run moose-example-service
//   → READY http://127.0.0.1:8080          curl http://127.0.0.1:8080/whoami
//
// Environment: MOOSE_IDP_ISSUER, MOOSE_API_URL (tools/resource/api_server.py), MOOSE_SERVICE_CLIENT
// (id:secret, default moose-service:moose-service-secret), MOOSE_SERVICE_PORT (default 8080; 0 picks
// one), MOOSE_MIN_VALIDITY (seconds a token must still be valid, default 30). Stops on SIGTERM/SIGINT,
// or when standard input closes (as the tests run it).
import AsyncHTTPClient
import Foundation
import Hummingbird
import MooseAsyncHTTPClient
import MooseExampleAPI
import MooseOAuth
import MooseOpenAPI
import OpenAPIAsyncHTTPClient

let environment = ProcessInfo.processInfo.environment
let issuer = environment["MOOSE_IDP_ISSUER"] ?? "http://127.0.0.1:8765"
guard let apiURL = URL(string: environment["MOOSE_API_URL"] ?? "http://127.0.0.1:8080") else {
    fatalError("MOOSE_API_URL is not a URL")
}
let credentials = (environment["MOOSE_SERVICE_CLIENT"] ?? "moose-service:moose-service-secret").split(
    separator: ":", maxSplits: 1)
let (clientID, clientSecret) = (
    String(credentials.first ?? "moose-service"), String(credentials.dropFirst().first ?? "")
)
let port = Int(environment["MOOSE_SERVICE_PORT"] ?? "8080") ?? 8080
let minimumValidity = TimeInterval(environment["MOOSE_MIN_VALIDITY"] ?? "30") ?? 30

// MARK: README: Using Moose with AsyncHTTPClient
// One HTTPClient for the whole service: the identity provider's traffic and the API's share its pool.
var httpConfiguration = HTTPClient.Configuration()
httpConfiguration.redirectConfiguration = .disallow // token traffic never follows a redirect
let httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)

var refresh = RefreshCoordinator.Configuration()
refresh.minimumValidity = minimumValidity // refresh when less than this is left
let moose = TokenManager(
    issuer: issuer, clientID: clientID, authentication: .clientSecretBasic(clientSecret),
    storage: InMemorySessionStorage(), transport: HTTPClientTransport(client: httpClient),
    scopes: ["read"], configuration: refresh)
try await moose.login(with: .clientCredentials)
// MARK: README end

// MARK: README: Using Moose with swift-openapi
// The generated client; Moose's middleware puts a valid token on every call and, on a 401, refreshes
// once (however many handlers saw it) and sends the call once more.
let api = Client(
    serverURL: apiURL,
    transport: AsyncHTTPClientTransport(configuration: .init(client: httpClient)),
    middlewares: [AccessTokenMiddleware(coordinator: moose.coordinator)])

let router = Router()
router.get("/whoami") { [api] _, _ -> WhoAmI in
    let me = try await api.getMe().ok.body.json // GET /v1/me with the service's token
    return WhoAmI(clientID: me.clientId, tokenFingerprint: me.tokenFingerprint)
}
// MARK: README end

/// What /whoami answers: who the API says the token belongs to (a fingerprint, never the token).
struct WhoAmI: ResponseCodable {
    let clientID: String
    let tokenFingerprint: String
}

let app = Application(
    router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
    onServerRunning: { [port] channel in
        FileHandle.standardOutput.write(Data("READY http://127.0.0.1:\(channel.localAddress?.port ?? port)\n".utf8))
    })

// Tests stop the service by closing its standard input.
if environment["MOOSE_STOP_ON_EOF"] == "1" {
    Thread.detachNewThread {
        var byte: UInt8 = 0
        while read(0, &byte, 1) > 0 {}
        exit(0)
    }
}
try await app.runService()
try await httpClient.shutdown().get()
#endif
