#if canImport(Security)
// Apple platforms only: Linux has no Security framework, so this file compiles to nothing there.
// Written against Apple's documentation, never compiled (no Apple machine where it was written): see docs/apple.md.
import Foundation
import Security
import MooseCrypto

/// Master keys in the Keychain (`MasterKeySource.keychain`): one generic password item per key
/// (`kSecClassGenericPassword`, service `moose`, account = the key's name) holding the 32 key bytes,
/// in the data protection keychain, readable only while the device is unlocked and never leaving it
/// (`kSecAttrAccessibleWhenUnlockedThisDeviceOnly`: not synced by iCloud Keychain, not restored to another device).
///
/// A missing item (when the store is not being created), a locked device (`errSecInteractionNotAllowed`),
/// an item with another accessibility, or any other Keychain status is an error naming the item:
/// never a silent fallback to another key source.
///
/// API reference:
/// - https://developer.apple.com/documentation/security/ksecclassgenericpassword
/// - https://developer.apple.com/documentation/security/ksecattraccessiblewhenunlockedthisdeviceonly
/// - https://developer.apple.com/documentation/security/ksecusedataprotectionkeychain
/// - https://developer.apple.com/documentation/security/secitemcopymatching(_:_:)
/// - https://developer.apple.com/documentation/security/secitemadd(_:_:)
/// - https://developer.apple.com/documentation/security/errsecinteractionnotallowed
enum KeychainMasterKey {
    /// The `kSecAttrService` of every Moose master-key item.
    static let service = "moose"
    /// The longest key name accepted (the item's `kSecAttrAccount`).
    static let maximumNameLength = 128

    /// The key named `name`; with `create`, one is made and stored when there is none.
    static func load(name: String, create: Bool) throws(SealingError) -> SecretKey {
        try check(name)
        if let key = try lookup(name) { return key }
        guard create else {
            throw SealingError(
                .keyUnavailable,
                "the Keychain has no Moose key \(itemName(name)): was the store made with another key source, "
                    + "on another device (the item is this-device-only), or the item deleted?")
        }
        let key: SecretKey
        do { key = try SecretKey(randomByteCount: 32) } catch {
            throw SealingError(.io, "cannot generate a key", underlying: error.message)
        }
        var attributes = baseQuery(name)
        attributes[kSecAttrLabel as String] = "Moose store master key (\(name))"
        attributes[kSecAttrAccessible as String] = kSecAttrAccessibleWhenUnlockedThisDeviceOnly
        attributes[kSecValueData as String] = key.withUnsafeBytes { Data($0) }
        let status = SecItemAdd(attributes as CFDictionary, nil)
        // errSecDuplicateItem: another process created it first; use what is stored.
        guard status == errSecSuccess || status == errSecDuplicateItem else {
            throw failure(status, name, doing: "store the new key")
        }
        guard let stored = try lookup(name) else {
            throw SealingError(
                .keyUnavailable, "the Keychain accepted the key \(itemName(name)) but does not return it")
        }
        return stored
    }

    /// The stored key, `nil` when there is no item.
    static func lookup(_ name: String) throws(SealingError) -> SecretKey? {
        var query = baseQuery(name)
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        query[kSecReturnData as String] = true
        query[kSecReturnAttributes as String] = true
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw failure(status, name, doing: "read the key") }
        guard let item = result as? [String: Any], var bytes = item[kSecValueData as String] as? Data else {
            throw SealingError(.keyUnavailable, "the Keychain returned no data for \(itemName(name))")
        }
        defer { bytes.resetBytes(in: 0..<bytes.count) }
        // Made by someone else with a weaker accessibility (synced, or readable while locked): refused, not used.
        let accessible = item[kSecAttrAccessible as String] as? String
        guard accessible == (kSecAttrAccessibleWhenUnlockedThisDeviceOnly as String) else {
            throw SealingError(
                .keyUnavailable,
                "the Keychain item \(itemName(name)) is not kSecAttrAccessibleWhenUnlockedThisDeviceOnly "
                    + "(it is \(accessible ?? "unknown")): delete it, or name another key")
        }
        guard bytes.count == 32 else {
            throw SealingError(
                .keyUnavailable, "the Keychain item \(itemName(name)) is not a Moose master key (32 bytes)")
        }
        return SecretKey(bytes)
    }

    /// The attributes that identify the item: class, service, account, the data protection keychain.
    private static func baseQuery(_ name: String) -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: name,
            // macOS: the iOS-style keychain, where kSecAttrAccessible is honoured (the file-based login
            // keychain ignores it). It needs a signed program with a keychain entitlement.
            kSecUseDataProtectionKeychain as String: true
        ]
    }

    /// `service/account`, for messages.
    private static func itemName(_ name: String) -> String {
        "\(service)/\(name) (generic password, service \(service), account \(name))"
    }

    private static func check(_ name: String) throws(SealingError) {
        guard !name.isEmpty, name.utf8.count <= maximumNameLength,
            name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else {
            throw SealingError(
                .keyUnavailable, "a Keychain key name is 1…\(maximumNameLength) visible ASCII characters")
        }
    }

    /// A Keychain status as an error naming the item and saying what to do.
    private static func failure(_ status: OSStatus, _ name: String, doing what: String) -> SealingError {
        let system = SecCopyErrorMessageString(status, nil).map { $0 as String } ?? "OSStatus \(status)"
        let hint: String
        switch status {
        case errSecInteractionNotAllowed:
            hint =
                " (errSecInteractionNotAllowed: the item is readable only while the device is unlocked; unlock it and retry)"
        case errSecMissingEntitlement:
            hint =
                " (errSecMissingEntitlement: the data protection keychain needs a signed program with a "
                + "keychain-access-groups or application-identifier entitlement)"
        default:
            hint = ""
        }
        return SealingError(.keyUnavailable, "the Keychain could not \(what) \(itemName(name)): \(system)\(hint)")
    }
}
#endif
