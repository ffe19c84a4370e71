#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Reads files from the repository's `Fixtures/` folder (test vectors, JWKS, tokens).
///
/// The folder is found relative to this source file, so tests run from any working directory.
///
/// ```swift
/// let jwks = try Fixtures.data("joserfc/jwks.json")
/// ```
public enum Fixtures {
    /// The absolute path of the `Fixtures/` folder.
    public static let root: String = {
        var components = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        components.removeLast(3) // Tests/Support/Fixtures.swift
        return components.joined(separator: "/") + "/Fixtures"
    }()

    /// The absolute path of a fixture.
    public static func path(_ relativePath: String) -> String { root + "/" + relativePath }

    /// The bytes of a fixture.
    public static func data(_ relativePath: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path(relativePath)))
    }

    /// A fixture as UTF-8 text.
    public static func string(_ relativePath: String) throws -> String {
        String(decoding: try data(relativePath), as: UTF8.self)
    }
}

/// Hexadecimal helpers for test vectors.
public enum Hex {
    /// Decodes a hex string (either case, even length); `nil` on anything else.
    public static func decode(_ hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    /// Lower-case hex of `bytes`.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let alphabet = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in bytes {
            out.append(alphabet[Int(byte >> 4)])
            out.append(alphabet[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
