#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// This process's environment, read without Foundation.
package enum ProcessEnvironment {
    /// `ProcessInfo.processInfo.environment[name]` without building the whole environment as a
    /// dictionary (0.39M instructions, 3% of `moose token --format exec-credential`), decided the same
    /// way: each entry read with `String(cString:)`, split at its first "=" character, the key compared
    /// with String equality, and for a name given twice the last one wins. An entry whose key and "="
    /// are plain ASCII (followed by ASCII or nothing, so no combining mark joins the "=") splits at the
    /// same byte, so only a matching one is decoded; any other entry is decoded whole, as ProcessInfo does.
    package static func value(_ name: String) -> String? {
        let table: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ
        guard var entry = table else { return nil }
        let key = Array(name.utf8)
        let asciiName = key.allSatisfy { $0 < 0x80 }
        let equalsSign = UInt8(ascii: "=")
        var found: String? = nil
        while let pointer = entry.pointee {
            entry += 1
            let bytes = UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self)
            var length = 0
            var ascii = asciiName
            while bytes[length] != 0, bytes[length] != equalsSign {
                if bytes[length] >= 0x80 { ascii = false }
                length += 1
            }
            if ascii, bytes[length] == equalsSign, bytes[length + 1] < 0x80 {
                if length == key.count, memcmp(bytes, key, length) == 0 {
                    found = String(cString: pointer + length + 1)
                }
            } else {
                let text = String(cString: pointer)
                if let equals = text.firstIndex(of: "="), text[..<equals] == name {
                    found = String(text[text.index(after: equals)...])
                }
            }
        }
        return found
    }
}
