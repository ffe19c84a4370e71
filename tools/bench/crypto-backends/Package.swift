// swift-tools-version:6.1
// Moose's cryptography on each backend, through the same public API (MooseCrypto, MooseJWT): built once
// with the trait LibCrypto (Moose's default, MooseLibCrypto) and once with SwiftCrypto (Moose's
// MooseSwiftCrypto alone: no libcrypto linked). tools/bench/run runs both and prints the rows side by side.
import PackageDescription

let package = Package(
    name: "moose-crypto-bench",
    platforms: [.macOS(.v15)],
    traits: [
        .trait(name: "LibCrypto", description: "Moose on libcrypto (its default)."),
        .trait(name: "SwiftCrypto", description: "Moose on swift-crypto alone."),
        .default(enabledTraits: ["LibCrypto"]),
    ],
    dependencies: [
        .package(name: "Moose", path: "../../..", traits: [
            .init(name: "MooseLibCrypto", condition: .when(traits: ["LibCrypto"])),
            .init(name: "MooseSwiftCrypto", condition: .when(traits: ["SwiftCrypto"])),
        ]),
    ],
    targets: [
        .executableTarget(name: "moose-crypto-bench", dependencies: [
            .product(name: "MooseCrypto", package: "Moose"),
            .product(name: "MooseJWT", package: "Moose"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
