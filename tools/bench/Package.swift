// swift-tools-version:6.2
// Benchmarks for Moose, side by side with their anchors in one run. A separate package so that the
// main build never compiles jwt-kit / swift-crypto. Run: tools/bench/run
// One group of rows alone: swift build -c release --product moose-bench && .build/release/moose-bench resource-server
import PackageDescription

let package = Package(
    name: "moose-bench",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The adapters it measures are package traits of Moose (off by default).
        .package(name: "Moose", path: "../..", traits: ["MoosePostgres", "MooseAsyncHTTPClient", "MooseOpenAPI", "MooseHummingbird"]),
        .package(url: "https://github.com/vapor/jwt-kit", exact: "5.8.0"),
        // The adapters' anchors: bare AsyncHTTPClient, and swift-openapi's AsyncHTTPClient transport.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // The resource-server rows: a Hummingbird route with and without ResourceServerMiddleware.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        // The libcrypto floor: the same verifications straight from C, keys imported once.
        .target(name: "CFloor", linkerSettings: [.linkedLibrary("crypto"), .linkedLibrary("sqlite3")]),
        .executableTarget(
            name: "moose-bench",
            dependencies: [
                "CFloor",
                .product(name: "MooseJWT", package: "Moose"),
                .product(name: "MooseCrypto", package: "Moose"),
                .product(name: "MooseSealing", package: "Moose"),
                .product(name: "MooseSecretStore", package: "Moose"),
                .product(name: "MooseSQLiteStorage", package: "Moose"),
                .product(name: "MooseHTTP", package: "Moose"),
                .product(name: "MooseURLSession", package: "Moose"),
                .product(name: "MooseOAuth", package: "Moose"),
                .product(name: "MooseOAuthSystem", package: "Moose"),
                .product(name: "MoosePostgres", package: "Moose"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "MooseAsyncHTTPClient", package: "Moose"),
                .product(name: "MooseOpenAPI", package: "Moose"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "MooseResourceServer", package: "Moose"),
                .product(name: "MooseHummingbird", package: "Moose"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
