// swift-tools-version:6.0
// An app embedding Moose: discovery, login, the secret store, the refresh coordinator and a MooseHTTP
// client calling a protected endpoint. tools/test builds and runs it against the test IdP, and runs its
// tests (Tests/SignInTests) against MooseTesting's in-process TestProvider.
// Moose's default traits: the core only (no adapter's library is resolved).
import PackageDescription

let package = Package(
    name: "moose-example",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Moose", path: "../..")],
    targets: [
        .executableTarget(name: "moose-example", dependencies: [.product(name: "Moose", package: "Moose")]),
        // The app's tests of its sign-in against MooseTesting's TestProvider (docs/testing.md): no network.
        .testTarget(
            name: "SignInTests",
            dependencies: [
                .product(name: "Moose", package: "Moose"), .product(name: "MooseTesting", package: "Moose"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
