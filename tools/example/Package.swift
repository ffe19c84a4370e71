// swift-tools-version:6.0
// An app embedding Moose: discovery, login, the secret store, the refresh coordinator and a MooseHTTP
// client calling a protected endpoint. tools/test builds and runs it against the test IdP.
// Moose's default traits: the core only (no adapter's library is resolved).
import PackageDescription

let package = Package(
    name: "moose-example",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Moose", path: "../..")],
    targets: [
        .executableTarget(name: "moose-example", dependencies: [.product(name: "Moose", package: "Moose")])
    ],
    swiftLanguageModes: [.v6]
)
