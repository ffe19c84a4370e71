// swift-tools-version:6.1
import PackageDescription

/// Settings every Moose target gets: Swift 6 language mode (strict concurrency) and
/// upcoming features that keep the module boundaries honest.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
]

// MARK: - Traits
// One fixed manifest. The core (MooseOAuth and what it stands on) needs swift-log, swift-http-types and,
// for the CLI, swift-argument-parser. Each adapter is a package trait, off by default: every use of the
// library it adapts is conditional on the trait, so an app that does not enable it never resolves that
// library, and the adapter's sources (wrapped in `#if Trait`) compile to an empty module.
//
//   .package(url: "https://github.com/…/moose", from: "…", traits: ["MoosePostgres"])
//
// `swift build --enable-all-traits` (tools/test) builds everything; a plain `swift build` the core only.

/// A dependency product used only when `trait` is enabled.
func adapted(_ product: String, _ package: String, _ traits: Set<String>) -> Target.Dependency {
    .product(name: product, package: package, condition: .when(traits: traits))
}

/// A target of this package used only when one of `traits` is enabled.
func adapter(_ target: String, _ traits: Set<String>) -> Target.Dependency {
    .target(name: target, condition: .when(traits: traits))
}

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
        .library(name: "MooseSealing", targets: ["MooseSealing"]),
        .library(name: "MooseSecretStore", targets: ["MooseSecretStore"]),
        .library(name: "MooseSQLiteStorage", targets: ["MooseSQLiteStorage"]),
        .library(name: "MooseURLSession", targets: ["MooseURLSession"]),
        .library(name: "MooseOAuth", targets: ["MooseOAuth"]),
        // MooseOAuth's system side: loopback listener, system browser, paste agent, detached refresher, config file.
        .library(name: "MooseOAuthSystem", targets: ["MooseOAuthSystem"]),
        .library(name: "MooseTesting", targets: ["MooseTesting"]),
        // Verifying what clients present to a resource server (RFC 9068 tokens, RFC 9449 DPoP proofs).
        .library(name: "MooseResourceServer", targets: ["MooseResourceServer"]),
        // The commands of `moose`, for a main of one's own (moose and moose-pg are two such mains).
        .library(name: "MooseCLI", targets: ["MooseCLI"]),
        .executable(name: "moose", targets: ["moose"]),
        .executable(name: "moose-test-provider", targets: ["moose-test-provider"]),
        // Adapters: each needs its trait (an empty module without it).
        .library(name: "MooseCombine", targets: ["MooseCombine"]),
        .library(name: "MooseMCP", targets: ["MooseMCP"]),
        .library(name: "MoosePostgres", targets: ["MoosePostgres"]),
        .library(name: "MooseOpenAPI", targets: ["MooseOpenAPI"]),
        .library(name: "MooseAsyncHTTPClient", targets: ["MooseAsyncHTTPClient"]),
        .library(name: "MooseObservability", targets: ["MooseObservability"]),
        .library(name: "MooseHummingbird", targets: ["MooseHummingbird"]),
        .library(name: "MooseVapor", targets: ["MooseVapor"]),
        // `moose` with PostgreSQL stores (trait MoosePostgres); `moose` execs it for a postgres:// store.
        .executable(name: "moose-pg", targets: ["moose-pg"]),
    ],
    traits: [
        .trait(name: "MooseCombine", description: "MooseCombine: publishers over the async API (OpenCombine where Combine is missing).", enabledTraits: ["MooseLibCrypto"]),
        .trait(name: "MooseMCP", description: "MooseMCP: an HTTPClientAuthorizer for the MCP Swift SDK (modelcontextprotocol/swift-sdk).", enabledTraits: ["MooseLibCrypto"]),
        .trait(name: "MoosePostgres", description: "MoosePostgres: sessions and leases in PostgreSQL (postgres-nio), and the moose-pg binary.", enabledTraits: ["MooseLibCrypto"]),
        .trait(name: "MooseOpenAPI", description: "MooseOpenAPI: a swift-openapi-runtime ClientMiddleware, and a ServerMiddleware for resource servers.", enabledTraits: ["MooseLibCrypto"]),
        .trait(name: "MooseAsyncHTTPClient", description: "MooseAsyncHTTPClient: an HTTPTransport on AsyncHTTPClient (swift-nio).", enabledTraits: ["MooseLibCrypto"]),
        .trait(name: "MooseObservability", description: "MooseObservability: swift-metrics counters and swift-distributed-tracing spans around provider requests and refreshes.", enabledTraits: ["MooseLibCrypto"]),
        .trait(name: "MooseHummingbird", description: "MooseHummingbird: a Hummingbird 2 middleware verifying access tokens and DPoP proofs (MooseResourceServer).", enabledTraits: ["MooseLibCrypto"]),
        .trait(name: "MooseVapor", description: "MooseVapor: a Vapor 4 middleware verifying access tokens and DPoP proofs (MooseResourceServer).", enabledTraits: ["MooseLibCrypto"]),
        .trait(name: "ExampleService", description: "Moose's own example service (Hummingbird) and its generated client, for Moose's tests.",
               enabledTraits: ["MooseOpenAPI", "MooseAsyncHTTPClient"]),
        // The cryptography backend of MooseCrypto: libcrypto (the default) and/or swift-crypto. With both
        // (`--enable-all-traits`), libcrypto backs the public API and swift-crypto is there for the
        // interoperability tests; with MooseSwiftCrypto alone (`--disable-default-traits --traits
        // MooseSwiftCrypto`, tools/test's swift-crypto build) MooseCrypto links no libcrypto. Each adapter's
        // trait above keeps libcrypto on, as naming traits (`traits: ["MoosePostgres"]`) drops the defaults.
        .trait(name: "MooseLibCrypto", description: "MooseCrypto on OpenSSL libcrypto (the default on Linux, and the CLI's)."),
        .trait(name: "MooseSwiftCrypto", description: "MooseCrypto on swift-crypto (Crypto, CryptoExtras); alone, with no libcrypto linked."),
        .default(enabledTraits: ["MooseLibCrypto"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // Adapters only (each resolved only when its trait is enabled).
        .package(url: "https://github.com/OpenCombine/OpenCombine", from: "0.14.0"),
        .package(url: "https://github.com/modelcontextprotocol/swift-sdk", from: "0.12.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
        // The example service (tools/example-service) and its tests only.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", from: "1.5.0"),
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
        // libcrypto's default provider called through its dispatch tables (no EVP fetch), for programs
        // that start often (`moose token`); used only where EVP would call the same code.
        .target(name: "CMooseOpenSSLDirect", dependencies: ["CLibCrypto"]),
        // Each backend only with its trait: an app without MooseSwiftCrypto never resolves swift-crypto,
        // and one with MooseSwiftCrypto alone never links libcrypto.
        .target(name: "MooseCrypto", dependencies: [
            adapter("CLibCrypto", ["MooseLibCrypto"]), adapter("CMooseOpenSSLDirect", ["MooseLibCrypto"]),
            adapted("Crypto", "swift-crypto", ["MooseSwiftCrypto"]), adapted("CryptoExtras", "swift-crypto", ["MooseSwiftCrypto"]),
        ]),
        .target(name: "MooseJWT", dependencies: ["MooseCrypto"]),
        // libcurl, loaded with dlopen on first use (no build-time dependency on libcurl's headers).
        .target(name: "CMooseCurl", linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]),
        .target(name: "MooseHTTP", dependencies: ["CMooseCurl", .product(name: "Logging", package: "swift-log"),
                                                .product(name: "HTTPTypes", package: "swift-http-types")]),
        // The envelope every store seals with (AES-256-GCM, AAD, data keys wrapped by the master key) and
        // the master-key sources: shared by the SQLite file store and PostgreSQL, links no database.
        // libsecret (the freedesktop Secret Service), loaded with dlopen on first use like libcurl.
        .target(name: "CMooseSecretService", linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]),
        .target(name: "MooseSealing", dependencies: ["MooseCrypto", "CMooseSecretService"]),
        // The encrypted SQLite key/value store (the only user of CSQLite).
        .target(name: "MooseSecretStore", dependencies: ["CSQLite", "MooseCrypto", "MooseSealing"]),
        // URLSession (FoundationNetworking) in its own module: the CLI never links it.
        .target(name: "MooseURLSession", dependencies: ["MooseHTTP"]),
        .target(name: "MooseOAuth", dependencies: ["MooseHTTP", "MooseJWT", "MooseCrypto",
                                                 .product(name: "Logging", package: "swift-log")]),
        // What MooseOAuth leaves to the system (as NIOPosix beside NIOCore): the loopback redirect listener
        // (sockets), the system browser and the detached refresher (child processes), the paste agent (the
        // terminal), the config file's parser. MooseOAuth opens no socket and starts no process.
        .target(name: "MooseOAuthSystem", dependencies: ["MooseOAuth", "MooseHTTP", "MooseJWT", "MooseCrypto"]),
        // Sessions in the SQLite file store (EncryptedSessionStorage): MooseOAuth links no SQLite.
        .target(name: "MooseSQLiteStorage", dependencies: ["MooseOAuth", "MooseSecretStore", "MooseSealing"]),
        .target(name: "MooseTesting", dependencies: ["MooseHTTP", "MooseOAuth", "MooseJWT", "MooseCrypto"]),
        // The resource server's side: access tokens, DPoP proofs, challenges, RFC 9728 metadata.
        .target(name: "MooseResourceServer", dependencies: ["MooseJWT", "MooseCrypto", "MooseHTTP", "MooseOAuth"]),
        // Repo-only helpers for Moose's own tests (fixtures, the test IdP, a scripted browser): not a product.
        .target(name: "MooseTestSupport", dependencies: [
            "MooseTesting", "MooseHTTP", "MooseJWT", "MooseOAuthSystem", .product(name: "Logging", package: "swift-log"),
        ], path: "Tests/Support"),
        .target(name: "Moose", dependencies: ["MooseCrypto", "MooseJWT", "MooseHTTP", "MooseURLSession", "MooseSealing",
                                              "MooseSecretStore", "MooseOAuth", "MooseOAuthSystem", "MooseSQLiteStorage"]),

        // MARK: The CLI
        // Every command; the session backend (file store, or what the main registers for postgres:// stores)
        // is chosen at start-up.
        .target(name: "MooseCLI", dependencies: [
            "MooseJWT", "MooseCrypto", "MooseHTTP", "MooseSealing", "MooseSecretStore", "MooseOAuth", "MooseOAuthSystem",
            "MooseSQLiteStorage", "MooseResourceServer",   // `moose verify`
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // `moose` does not link SwiftNIO (linking it made `moose token` start 1.33x slower: BENCHMARKS.md);
        // given a postgres:// store it execs `moose-pg`.
        .executableTarget(name: "moose", dependencies: ["MooseCLI"]),
        // MooseTesting's provider on a loopback port, for scripts and other languages' tests (docs/testing.md).
        .executableTarget(name: "moose-test-provider", dependencies: ["MooseTesting", "MooseJWT", "MooseCrypto"]),
        // The same commands with the PostgreSQL backend.
        .executableTarget(name: "moose-pg", dependencies: [
            "MooseCLI", "MooseOAuth", "MooseSealing", "MooseSecretStore", adapter("MoosePostgres", ["MoosePostgres"]),
        ]),
        // A child process for the store's multi-process tests (and, with MoosePostgres, a PostgreSQL replica).
        .executableTarget(name: "moose-store-worker", dependencies: [
            "MooseSecretStore", "MooseOAuth", "MooseSQLiteStorage", "MooseHTTP", adapter("MoosePostgres", ["MoosePostgres"]),
        ], path: "Tests/Workers/moose-store-worker"),
        .testTarget(name: "MooseSecretStoreTests", dependencies: [
            "MooseSecretStore", "MooseSealing", "MooseOAuth", "MooseSQLiteStorage", "MooseTestSupport", "moose-store-worker",
        ]),
        .testTarget(name: "MooseHTTPTests", dependencies: ["MooseHTTP", "MooseURLSession", "MooseTestSupport"]),
        .testTarget(name: "MooseOAuthTests", dependencies: [
            "MooseOAuth", "MooseOAuthSystem", "MooseSQLiteStorage", "MooseSecretStore", "MooseURLSession", "MooseTestSupport",
        ]),
        .testTarget(name: "MooseCryptoTests", dependencies: ["MooseCrypto", "MooseTestSupport"]),
        .testTarget(name: "MooseResourceServerTests", dependencies: [
            "MooseResourceServer", "MooseJWT", "MooseCrypto", "MooseOAuth", "MooseHTTP", "MooseURLSession", "MooseTestSupport",
        ]),
        .testTarget(name: "MooseJWTTests", dependencies: ["MooseJWT", "MooseCrypto", "MooseTestSupport"]),
        // Both backends in one binary (trait MooseSwiftCrypto beside the default MooseLibCrypto): the same
        // vectors on swift-crypto, and what one seals or signs the other opens or verifies.
        .testTarget(name: "MooseCryptoBackendTests", dependencies: [
            "MooseCrypto", "MooseJWT", "MooseSealing", "MooseOAuth", "MooseTestSupport",
        ]),
        .testTarget(name: "MooseCLITests", dependencies: [
            "MooseCLI", "MooseOAuthSystem", "moose", "moose-store-worker", "MooseTestSupport",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // MARK: Adapters (trait-guarded sources)
        // Combine where it exists, OpenCombine elsewhere (OpenCombineShim picks).
        .target(name: "MooseObservability", dependencies: [
            "MooseOAuth", "MooseHTTP", "MooseResourceServer", adapted("CoreMetrics", "swift-metrics", ["MooseObservability"]),
            adapted("Tracing", "swift-distributed-tracing", ["MooseObservability"]),
        ]),
        .testTarget(name: "MooseObservabilityTests", dependencies: [
            "MooseObservability", "MooseOAuth", "MooseHTTP", "MooseURLSession", "MooseTestSupport", "MooseResourceServer", "MooseJWT", "MooseCrypto", "MooseSQLiteStorage", "MooseSecretStore",
            adapted("CoreMetrics", "swift-metrics", ["MooseObservability"]), adapted("MetricsTestKit", "swift-metrics", ["MooseObservability"]),
            adapted("Tracing", "swift-distributed-tracing", ["MooseObservability"]),
            adapted("InMemoryTracing", "swift-distributed-tracing", ["MooseObservability"]),
        ]),
        .target(name: "MooseCombine", dependencies: [
            "MooseOAuth", "MooseHTTP", adapted("OpenCombineShim", "OpenCombine", ["MooseCombine"]),
        ]),
        .testTarget(name: "MooseCombineTests", dependencies: [
            "MooseCombine", "MooseOAuth", "MooseOAuthSystem", "MooseURLSession", "MooseTestSupport",
            adapted("OpenCombineShim", "OpenCombine", ["MooseCombine"]),
        ]),
        // The MCP Swift SDK's HTTPClientAuthorizer on Moose.
        .target(name: "MooseMCP", dependencies: [
            "MooseOAuth", "MooseHTTP", "MooseURLSession", "MooseResourceServer", "MooseJWT", "MooseCrypto", adapted("MCP", "swift-sdk", ["MooseMCP"]),
        ]),
        // A child process for the two-process MCP test (not a product).
        .executableTarget(name: "moose-mcp-worker", dependencies: [
            "MooseMCP", "MooseOAuth", "MooseOAuthSystem", "MooseSecretStore", "MooseSQLiteStorage", "MooseHTTP",
            adapted("MCP", "swift-sdk", ["MooseMCP"]),
        ], path: "Tests/MCPWorker"),
        .testTarget(name: "MooseMCPTests", dependencies: [
            "MooseMCP", "MooseOAuth", "MooseOAuthSystem", "MooseSQLiteStorage", "MooseSecretStore", "MooseURLSession",
            "MooseTestSupport", "moose-mcp-worker", "moose", adapted("MCP", "swift-sdk", ["MooseMCP"]),
            // The server-side tests host the SDK's server transport on swift-nio (which the SDK already
            // brings): no Hummingbird for apps that enable MooseMCP.
            "MooseResourceServer", "MooseJWT", "MooseCrypto", adapted("NIOCore", "swift-nio", ["MooseMCP"]),
            adapted("NIOPosix", "swift-nio", ["MooseMCP"]), adapted("NIOHTTP1", "swift-nio", ["MooseMCP"]),
        ]),
        // PostgreSQL: sessions and leases on postgres-nio, for several replicas. Seals with MooseSealing: no SQLite.
        .target(name: "MoosePostgres", dependencies: [
            "MooseOAuth", "MooseSealing", "MooseCrypto", "MooseResourceServer",   // PostgresDPoPReplayCache
            adapted("PostgresNIO", "postgres-nio", ["MoosePostgres"]),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "MoosePostgresTests", dependencies: [
            "MoosePostgres", "MooseOAuth", "MooseOAuthSystem", "MooseSealing", "MooseURLSession", "MooseTestSupport",
            "moose-store-worker", "moose", "moose-pg",
            "MooseResourceServer",
            adapted("PostgresNIO", "postgres-nio", ["MoosePostgres"]),
        ]),
        // A swift-openapi-runtime ClientMiddleware: the coordinator's token on every request, one refresh on a 401;
        // and a ServerMiddleware verifying what clients present (MooseResourceServer).
        .target(name: "MooseOpenAPI", dependencies: [
            "MooseOAuth", "MooseHTTP", adapter("MooseResourceServer", ["MooseOpenAPI"]),
            adapted("OpenAPIRuntime", "swift-openapi-runtime", ["MooseOpenAPI"]),
            .product(name: "HTTPTypes", package: "swift-http-types"), .product(name: "Logging", package: "swift-log"),
        ]),
        // An HTTPTransport on the app's AsyncHTTPClient HTTPClient (server apps).
        .target(name: "MooseAsyncHTTPClient", dependencies: [
            "MooseHTTP",
            adapted("AsyncHTTPClient", "async-http-client", ["MooseAsyncHTTPClient"]),
            adapted("NIOCore", "swift-nio", ["MooseAsyncHTTPClient"]),
            adapted("NIOHTTP1", "swift-nio", ["MooseAsyncHTTPClient"]),
            adapted("NIOFoundationCompat", "swift-nio", ["MooseAsyncHTTPClient"]),
            .product(name: "HTTPTypes", package: "swift-http-types"),
        ]),
        .testTarget(name: "MooseAsyncHTTPClientTests", dependencies: [
            "MooseAsyncHTTPClient", "MooseHTTP", "MooseTestSupport",
            adapted("AsyncHTTPClient", "async-http-client", ["MooseAsyncHTTPClient"]),
        ]),
        // A Hummingbird 2 middleware for resource servers (MooseResourceServer's verifier) and the RFC 9728 route.
        .target(name: "MooseHummingbird", dependencies: [
            "MooseResourceServer", "MooseHTTP", .product(name: "Logging", package: "swift-log"),
            adapted("Hummingbird", "hummingbird", ["MooseHummingbird"]),
            adapted("NIOCore", "swift-nio", ["MooseHummingbird"]),
        ]),
        .testTarget(name: "MooseHummingbirdTests", dependencies: [
            "MooseHummingbird", "MooseResourceServer", "MooseJWT", "MooseCrypto", "MooseHTTP", "MooseTestSupport",
            adapted("Hummingbird", "hummingbird", ["MooseHummingbird"]),
            adapted("HummingbirdTesting", "hummingbird", ["MooseHummingbird"]),
        ]),
        // A Vapor 4 middleware for resource servers (MooseResourceServer's verifier) and the RFC 9728 route.
        .target(name: "MooseVapor", dependencies: [
            "MooseResourceServer", .product(name: "Logging", package: "swift-log"),
            adapted("Vapor", "vapor", ["MooseVapor"]),
        ]),
        .testTarget(name: "MooseVaporTests", dependencies: [
            "MooseVapor", "MooseResourceServer", "MooseJWT", "MooseCrypto", "MooseHTTP", "MooseOAuth", "MooseURLSession", "MooseTestSupport",
            adapted("Vapor", "vapor", ["MooseVapor"]), adapted("VaporTesting", "vapor", ["MooseVapor"]),
        ]),
        // The example service (trait ExampleService). The client swift-openapi-generator made from
        // tools/resource/openapi.yaml (see tools/example-service/regenerate, which wraps it in `#if ExampleService`).
        .target(name: "MooseExampleAPI", dependencies: [
            adapted("OpenAPIRuntime", "swift-openapi-runtime", ["ExampleService"]),
            .product(name: "HTTPTypes", package: "swift-http-types"),
        ], path: "tools/example-service/Sources/MooseExampleAPI"),
        // A Hummingbird 2 app calling the protected API with a client-credentials token.
        .executableTarget(name: "moose-example-service", dependencies: [
            "MooseOAuth", "MooseHTTP", "MooseOpenAPI", "MooseAsyncHTTPClient", "MooseExampleAPI",
            adapted("Hummingbird", "hummingbird", ["ExampleService"]),
            adapted("AsyncHTTPClient", "async-http-client", ["ExampleService"]),
            adapted("OpenAPIAsyncHTTPClient", "swift-openapi-async-http-client", ["ExampleService"]),
            adapted("OpenAPIRuntime", "swift-openapi-runtime", ["ExampleService"]),
        ], path: "tools/example-service/Sources/moose-example-service"),
        // The middleware against the example service's generated client: needs ExampleService.
        .testTarget(name: "MooseOpenAPITests", dependencies: [
            "MooseOpenAPI", "MooseOAuth", "MooseHTTP", "MooseCrypto", "MooseAsyncHTTPClient", "MooseExampleAPI", "MooseTestSupport",
            "MooseResourceServer", "MooseJWT",
            adapted("AsyncHTTPClient", "async-http-client", ["ExampleService"]),
            adapted("OpenAPIRuntime", "swift-openapi-runtime", ["ExampleService"]),
            adapted("OpenAPIAsyncHTTPClient", "swift-openapi-async-http-client", ["ExampleService"]),
        ]),
        // Every ```swift block of README.md and docs/*.md, one file each (Tests/DocSnippetTests/<page>-<n>.swift),
        // compiled here; DocSnippetTests checks each page shows its file's region verbatim. Adapter snippets
        // are wrapped in `#if Trait`, so this target needs the adapters' libraries only with their traits.
        .testTarget(name: "DocSnippetTests", dependencies: [
            "Moose", "MooseOAuth", "MooseOAuthSystem", "MooseHTTP", "MooseURLSession", "MooseJWT", "MooseCrypto", "MooseSecretStore",
            "MooseSealing", "MooseSQLiteStorage", "MooseTesting", "MooseResourceServer",
            "MooseCombine", "MooseOpenAPI", "MooseAsyncHTTPClient", "MooseObservability", "MoosePostgres", "MooseMCP",
            "MooseHummingbird", "MooseVapor", "MooseExampleAPI",
            adapted("OpenCombineShim", "OpenCombine", ["MooseCombine"]),
            adapted("AsyncHTTPClient", "async-http-client", ["MooseAsyncHTTPClient"]),
            adapted("OpenAPIRuntime", "swift-openapi-runtime", ["MooseOpenAPI"]),
            adapted("OpenAPIAsyncHTTPClient", "swift-openapi-async-http-client", ["ExampleService"]),
            adapted("Hummingbird", "hummingbird", ["MooseHummingbird", "ExampleService"]),
            adapted("Vapor", "vapor", ["MooseVapor"]),
            adapted("MCP", "swift-sdk", ["MooseMCP"]),
            adapted("PostgresNIO", "postgres-nio", ["MoosePostgres"]),
        ]),
    ],
    swiftLanguageModes: [.v6]
)

// Generated code (MooseExampleAPI) keeps the generator's own import style.
for target in package.targets where target.type != .system && target.name != "MooseExampleAPI" {
    target.swiftSettings = (target.swiftSettings ?? []) + strictSettings
}

// MARK: - Fuzzing (only when MOOSE_FUZZ=1; see tools/fuzz/run)
// One libFuzzer executable whose harness is chosen by MOOSE_FUZZ_TARGET; in this package so it can
// reach `package` parsers. Normal builds never see it. This environment switch stays (unlike the old
// MOOSE_CORE_ONLY): the target needs -sanitize=fuzzer, which a trait cannot scope to one product.
if Context.environment["MOOSE_FUZZ"] == "1" {
    package.targets.append(.executableTarget(
        name: "MooseFuzz",
        dependencies: ["MooseCrypto", "MooseJWT", "MooseHTTP", "MooseOAuth", "MooseOAuthSystem", "MooseSealing", "MooseCLI", "MooseMCP",
                       "MooseResourceServer", "MooseTesting"],
        path: "tools/fuzz/Sources/MooseFuzz",
        swiftSettings: strictSettings + [.unsafeFlags(["-parse-as-library"])]))
    package.products.append(.executable(name: "moose-fuzz", targets: ["MooseFuzz"]))
}
