// swift-tools-version:6.2
// Benchmarks for Moose, side by side with their anchors in one run. A separate package so that the
// main build never compiles jwt-kit / swift-crypto. Run: tools/bench/run
import PackageDescription

let package = Package(
    name: "moose-bench",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Moose", path: "../.."),
        .package(url: "https://github.com/vapor/jwt-kit", exact: "5.8.0"),
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
                .product(name: "MooseSecretStore", package: "Moose"),
                .product(name: "MooseHTTP", package: "Moose"),
                .product(name: "MooseURLSession", package: "Moose"),
                .product(name: "MooseOAuth", package: "Moose"),
                .product(name: "MoosePostgres", package: "Moose"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
