// swift-tools-version:6.0
import PackageDescription

/// Settings every Moose target gets: Swift 6 language mode (strict concurrency) and
/// upcoming features that keep the module boundaries honest.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "Moose",
    // Linux, and macOS with OpenSSL 3 from Homebrew (`brew install openssl@3 sqlite`). No Apple SDK ships
    // libcrypto, so iOS, tvOS, watchOS and visionOS are not declared: see README, "Platforms".
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Moose", targets: ["Moose"]),
        .library(name: "MooseCrypto", targets: ["MooseCrypto"]),
        .library(name: "MooseJWT", targets: ["MooseJWT"]),
        .library(name: "MooseHTTP", targets: ["MooseHTTP"]),
        .library(name: "MooseSecretStore", targets: ["MooseSecretStore"]),
        .library(name: "MooseURLSession", targets: ["MooseURLSession"]),
        .library(name: "MooseOAuth", targets: ["MooseOAuth"]),
        .library(name: "MooseTesting", targets: ["MooseTesting"]),
        .executable(name: "moose", targets: ["moose"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        .target(name: "MooseCrypto", dependencies: ["CLibCrypto"]),
        .target(name: "MooseJWT", dependencies: ["MooseCrypto"]),
        // libcurl, loaded with dlopen on first use (no build-time dependency on libcurl's headers).
        .target(name: "CMooseCurl", linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]),
        .target(name: "MooseHTTP", dependencies: ["CMooseCurl", .product(name: "Logging", package: "swift-log"),
                                                .product(name: "HTTPTypes", package: "swift-http-types")]),
        .target(name: "MooseSecretStore", dependencies: ["CSQLite", "MooseCrypto"]),
        // URLSession (FoundationNetworking) in its own module: the CLI never links it.
        .target(name: "MooseURLSession", dependencies: ["MooseHTTP"]),
        .target(name: "MooseOAuth", dependencies: ["MooseHTTP", "MooseJWT", "MooseCrypto", "MooseSecretStore",
                                                 .product(name: "Logging", package: "swift-log")]),
        .target(name: "MooseTesting", dependencies: ["MooseHTTP", "MooseOAuth"]),
        // Repo-only helpers for Moose's own tests (fixtures, the test IdP, a scripted browser): not a product.
        .target(name: "MooseTestSupport", dependencies: ["MooseTesting", "MooseHTTP", "MooseJWT"], path: "Tests/Support"),
        .target(name: "Moose", dependencies: ["MooseCrypto", "MooseJWT", "MooseHTTP", "MooseURLSession", "MooseSecretStore", "MooseOAuth"]),
        .executableTarget(
            name: "moose",
            dependencies: [
                "MooseJWT",
                "MooseCrypto",
                "MooseHTTP",
                "MooseSecretStore",
                "MooseOAuth",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // A child process for the store's multi-process tests.
        .executableTarget(name: "moose-store-worker", dependencies: ["MooseSecretStore", "MooseOAuth", "MooseHTTP"]),
        .testTarget(name: "MooseSecretStoreTests", dependencies: ["MooseSecretStore", "MooseTestSupport", "moose-store-worker"]),
        .testTarget(name: "MooseHTTPTests", dependencies: ["MooseHTTP", "MooseURLSession", "MooseTestSupport"]),
        .testTarget(name: "MooseOAuthTests", dependencies: ["MooseOAuth", "MooseURLSession", "MooseTestSupport"]),
        .testTarget(name: "MooseCryptoTests", dependencies: ["MooseCrypto", "MooseTestSupport"]),
        .testTarget(name: "MooseJWTTests", dependencies: ["MooseJWT", "MooseCrypto", "MooseTestSupport"]),
        .testTarget(name: "MooseCLITests", dependencies: ["moose", "moose-store-worker", "MooseTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

// Adapters: each its own product, the only one that depends on the library it adapts; the sanitizer
// builds of tools/test leave them out (MOOSE_CORE_ONLY=1) so they never compile those libraries.
if Context.environment["MOOSE_CORE_ONLY"] != "1" {
    // Combine where it exists, OpenCombine elsewhere (OpenCombineShim picks).
    package.dependencies.append(.package(url: "https://github.com/OpenCombine/OpenCombine", from: "0.14.0"))
    package.products.append(.library(name: "MooseCombine", targets: ["MooseCombine"]))
    // The MCP Swift SDK's HTTPClientAuthorizer on Moose.
    package.dependencies.append(.package(url: "https://github.com/modelcontextprotocol/swift-sdk", from: "0.12.1"))
    package.products.append(.library(name: "MooseMCP", targets: ["MooseMCP"]))
    package.targets += [
        .target(name: "MooseCombine", dependencies: ["MooseOAuth", "MooseHTTP", .product(name: "OpenCombineShim", package: "OpenCombine")]),
        .testTarget(name: "MooseCombineTests", dependencies: ["MooseCombine", "MooseOAuth", "MooseURLSession", "MooseTestSupport",
                                                              .product(name: "OpenCombineShim", package: "OpenCombine")]),
        .target(name: "MooseMCP", dependencies: ["MooseOAuth", "MooseHTTP", "MooseURLSession",
                                                 .product(name: "MCP", package: "swift-sdk")]),
        // A child process for the two-process MCP test (not a product).
        .executableTarget(name: "moose-mcp-worker", dependencies: ["MooseMCP", "MooseOAuth", "MooseSecretStore", "MooseHTTP",
                                                                   .product(name: "MCP", package: "swift-sdk")],
                          path: "Tests/MCPWorker"),
        .testTarget(name: "MooseMCPTests", dependencies: ["MooseMCP", "MooseOAuth", "MooseURLSession", "MooseTestSupport",
                                                          "moose-mcp-worker", "moose", .product(name: "MCP", package: "swift-sdk")]),
    ]
    // PostgreSQL (MoosePostgres: sessions and leases on postgres-nio). `moose-pg` and the store worker
    // compile their PostgreSQL support with `#if MOOSE_POSTGRES` (not `canImport`, true for any module in the build folder).
    package.dependencies.append(.package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"))
    package.targets.append(.target(name: "MoosePostgres", dependencies: [
        "MooseOAuth", "MooseSecretStore", "MooseCrypto",
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
    ]))
    package.products.append(.library(name: "MoosePostgres", targets: ["MoosePostgres"]))
    package.targets.append(.testTarget(name: "MoosePostgresTests", dependencies: [
        "MoosePostgres", "MooseOAuth", "MooseURLSession", "MooseTestSupport", "moose-store-worker", "moose", "moose-pg",
        .product(name: "PostgresNIO", package: "postgres-nio"),
    ]))
    // `moose` itself stays lean (linking SwiftNIO made `moose token` start 1.33x slower: BENCHMARKS.md); given a
    // postgres:// store it execs `moose-pg`, the same command-line sources (symbolic links in
    // Sources/moose-pg) built with MOOSE_POSTGRES and MoosePostgres.
    package.targets.append(.executableTarget(
        name: "moose-pg",
        dependencies: ["MooseJWT", "MooseCrypto", "MooseHTTP", "MooseSecretStore", "MooseOAuth", "MoosePostgres",
                       .product(name: "ArgumentParser", package: "swift-argument-parser")],
        swiftSettings: [.define("MOOSE_POSTGRES")]))
    package.products.append(.executable(name: "moose-pg", targets: ["moose-pg"]))
    for target in package.targets where target.name == "moose-store-worker" {
        target.dependencies.append("MoosePostgres")
        target.swiftSettings = (target.swiftSettings ?? []) + [.define("MOOSE_POSTGRES")]
    }
    // swift-openapi middleware, AsyncHTTPClient transport, the example service (Hummingbird).
    package.dependencies += [
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // The example service (tools/example-service) and the adapters' tests only.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", from: "1.5.0"),
    ]
    package.products += [
        .library(name: "MooseOpenAPI", targets: ["MooseOpenAPI"]),
        .library(name: "MooseAsyncHTTPClient", targets: ["MooseAsyncHTTPClient"]),
    ]
    package.targets += [
        // A swift-openapi-runtime ClientMiddleware: the coordinator's token on every request, one refresh on a 401.
        .target(name: "MooseOpenAPI", dependencies: [
            "MooseOAuth", "MooseHTTP",
            .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
        ]),
        // An HTTPTransport on the app's AsyncHTTPClient HTTPClient (server apps).
        .target(name: "MooseAsyncHTTPClient", dependencies: [
            "MooseHTTP",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOFoundationCompat", package: "swift-nio"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
        ]),
        // The client swift-openapi-generator made from tools/resource/openapi.yaml (see tools/example-service/regenerate).
        .target(name: "MooseExampleAPI", dependencies: [
            .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
        ], path: "tools/example-service/Sources/MooseExampleAPI"),
        // The example service: a Hummingbird 2 app calling the protected API with a client-credentials token.
        .executableTarget(name: "moose-example-service", dependencies: [
            "MooseOAuth", "MooseHTTP", "MooseOpenAPI", "MooseAsyncHTTPClient", "MooseExampleAPI",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
            .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
        ], path: "tools/example-service/Sources/moose-example-service"),
        .testTarget(name: "MooseAsyncHTTPClientTests", dependencies: [
            "MooseAsyncHTTPClient", "MooseHTTP", "MooseTestSupport",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
        ]),
        .testTarget(name: "MooseOpenAPITests", dependencies: [
            "MooseOpenAPI", "MooseOAuth", "MooseHTTP", "MooseCrypto", "MooseAsyncHTTPClient", "MooseExampleAPI", "MooseTestSupport",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
        ]),
    ]
}

// Generated code (MooseExampleAPI) keeps the generator's own import style.
for target in package.targets where target.type != .system && target.name != "MooseExampleAPI" {
    target.swiftSettings = (target.swiftSettings ?? []) + strictSettings
}

// MARK: - Fuzzing (only when MOOSE_FUZZ=1; see tools/fuzz/run)
// One libFuzzer executable whose harness is chosen by MOOSE_FUZZ_TARGET; in this package so it can
// reach `package` parsers. Normal builds never see it.
if Context.environment["MOOSE_FUZZ"] == "1" {
    package.targets.append(.executableTarget(
        name: "MooseFuzz",
        dependencies: ["MooseCrypto", "MooseJWT", "MooseHTTP", "MooseOAuth", "MooseSecretStore"],
        path: "tools/fuzz/Sources/MooseFuzz",
        swiftSettings: strictSettings + [.unsafeFlags(["-parse-as-library"])]))
    package.products.append(.executable(name: "moose-fuzz", targets: ["MooseFuzz"]))
}
