import CMooseSecretService
import MooseCrypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Master keys in the freedesktop Secret Service (`MasterKeySource.secretService`), through libsecret
/// loaded at run time (CMooseSecretService). The key travels as base64 text: libsecret's simple
/// password calls take NUL-terminated text.
enum SecretServiceKey {
    /// The longest item name accepted: it becomes a D-Bus attribute value.
    static let maximumNameLength = 128

    /// The key named `name`; with `create`, one is made and stored when there is none.
    static func load(name: String, create: Bool) throws(SealingError) -> SecretKey {
        try check(name)
        if let key = try lookup(name) { return key }
        guard create else {
            // libsecret answers a locked keyring's lookup as "no such item" (no error): say both.
            throw SealingError(
                .keyUnavailable,
                "the Secret Service has no Moose key \(name) (application=moose, key=\(name)), "
                    + "or its keyring is locked: unlock it (a desktop login does), or was the store made with another key source, or the item deleted?"
            )
        }
        let key: SecretKey
        do { key = try SecretKey(randomByteCount: 32) } catch {
            throw SealingError(.io, "cannot generate a key", underlying: error.message)
        }
        let text = key.withUnsafeBytes { Data($0).base64EncodedString() }
        var error = [CChar](repeating: 0, count: 512)
        guard moose_secret_service_store(name, "Moose store master key (\(name))", text, &error, error.count) == 0
        else {
            throw unavailable(error, doing: "store the new key \(name)")
        }
        // Two processes creating at once: the item written last wins; use what is stored.
        guard let stored = try lookup(name) else {
            throw SealingError(.keyUnavailable, "the Secret Service accepted the key \(name) but does not return it")
        }
        return stored
    }

    /// Removes the key named `name`; `true` if there was one (tests, and moving a store off it).
    @discardableResult
    static func remove(name: String) throws(SealingError) -> Bool {
        try check(name)
        var error = [CChar](repeating: 0, count: 512)
        let result = moose_secret_service_clear(name, &error, error.count)
        guard result >= 0 else { throw unavailable(error, doing: "remove the key \(name)") }
        return result == 1
    }

    static func lookup(_ name: String) throws(SealingError) -> SecretKey? {
        var password: UnsafeMutablePointer<CChar>? = nil
        var error = [CChar](repeating: 0, count: 512)
        let found = moose_secret_service_lookup(name, &password, &error, error.count)
        guard found >= 0 else { throw unavailable(error, doing: "read the key \(name)") }
        guard found == 1, let password else { return nil }
        defer { moose_secret_service_free(password) } // libsecret wipes it
        // Bounded before decoding: the item is another program's to write.
        let length = strnlen(password, 256)
        guard length < 256 else {
            throw SealingError(.keyUnavailable, "the Secret Service item \(name) is not a Moose master key (too long)")
        }
        var bytes = [UInt8](repeating: 0, count: length)
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { memcpy(base, password, length) }
        }
        defer { bytes.withUnsafeMutableBytes { buffer in for i in buffer.indices { buffer[i] = 0 } } }
        while let last = bytes.last, last == 0x20 || last == 0x0A || last == 0x0D || last == 0x09 { bytes.removeLast() }
        guard var key = Data(base64Encoded: Data(bytes)), key.count == 32 else {
            throw SealingError(
                .keyUnavailable, "the Secret Service item \(name) is not a Moose master key (32 bytes in base64)")
        }
        defer { key.resetBytes(in: 0..<key.count) }
        return SecretKey(key)
    }

    static func check(_ name: String) throws(SealingError) {
        guard !name.isEmpty, name.utf8.count <= maximumNameLength,
            name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else {
            throw SealingError(
                .keyUnavailable, "a Secret Service key name is 1…\(maximumNameLength) visible ASCII characters")
        }
    }

    static func unavailable(_ error: [CChar], doing what: String) -> SealingError {
        // D-Bus text is another program's: only printable ASCII reaches a terminal (no C0/C1 controls).
        let bytes = error.prefix { $0 != 0 }.prefix(400).map { UInt8(bitPattern: $0) }.map {
            $0 < 0x20 || $0 >= 0x7F ? UInt8(ascii: "?") : $0
        }
        let message = String(decoding: bytes, as: UTF8.self)
        let hint =
            message.contains("DBUS_SESSION_BUS_ADDRESS") || message.lowercased().contains("autolaunch")
            ? " (no D-Bus session bus here: the Secret Service runs in a desktop or a dbus-run-session)" : ""
        return SealingError(.keyUnavailable, "the Secret Service could not \(what): \(message)\(hint)")
    }
}
