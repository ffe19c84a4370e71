public import MooseCrypto
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

/// Where a store's master key comes from (the SQLite file store and the PostgreSQL storage alike).
///
/// The master key only wraps the store's data keys; rotating it rewraps those rows.
///
/// ```swift
/// let store = try SecretStore(path: path, masterKey: .keyFile("~/.config/moose/store.key"))
/// let ci = try SecretStore(path: path, masterKey: .environment("MOOSE_STORE_KEY"))   // base64, 32 bytes
/// let local = try SecretStore(path: path, masterKey: .passphrase("correct horse battery staple"))
/// let desktop = try SecretStore(path: path, masterKey: .secretService("default"))   // GNOME Keyring, KWallet…
/// ```
public enum MasterKeySource: Sendable {
    /// A file of 32 random bytes, created (mode 0600, folder 0700) if missing. A file readable by
    /// group or others is refused, as ssh refuses such private keys.
    case keyFile(String)
    /// An environment variable holding the 32-byte key in base64.
    case environment(String)
    /// A passphrase stretched with scrypt; salt and cost parameters are stored with the store.
    case passphrase(String)
    /// Raw key bytes from the caller (32 bytes).
    case raw([UInt8])
    /// A key kept in the freedesktop Secret Service (GNOME Keyring, KWallet, KeePassXC…) as the item
    /// with attributes `application=moose`, `key=NAME` in the default collection: 32 random bytes
    /// made on first use (when the store is created), stored as base64 text. libsecret is loaded at
    /// run time; without it, without a session bus, or with the collection locked, opening fails and
    /// says why — never a silent fallback to another source.
    case secretService(String)
    #if canImport(Security)
    /// Apple platforms only: a key kept in the Keychain as the generic password item with service
    /// `moose` and account `NAME`, in the data protection keychain with
    /// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly` (never synced, never restored to another
    /// device): 32 random bytes made on first use (when the store is created). A missing item, a
    /// locked device (`errSecInteractionNotAllowed`) or a program without a keychain entitlement
    /// fails and names the item — never a silent fallback to another source. See `KeychainMasterKey`.
    case keychain(String)
    #endif

    /// A short description for messages (never the key).
    public var description: String {
        switch self {
        case .keyFile(let path): "key file \(path)"
        case .environment(let name): "environment variable \(name)"
        case .passphrase: "passphrase"
        case .raw: "raw key"
        case .secretService(let name): "Secret Service key \(name)"
        #if canImport(Security)
        case .keychain(let name): "Keychain key \(name)"
        #endif
        }
    }

    /// The default scrypt cost: N = 2^16, r = 8, p = 1 (64 MiB, ~150–250 ms on a 2-core CI machine).
    public static let defaultScryptParameters = Scrypt.Parameters(n: 1 << 16, r: 8, p: 1)

    /// Resolves the key. `kdf` carries the store's scrypt salt and parameters for a passphrase;
    /// `create` lets a missing key file be made.
    package func resolve(kdf: KDFParameters?, create: Bool) throws(SealingError) -> SecretKey {
        switch self {
        case .raw(let bytes):
            guard bytes.count == 32 else {
                throw SealingError(.keyUnavailable, "a raw master key must be 32 bytes, got \(bytes.count)")
            }
            return SecretKey(bytes)
        case .environment(let name):
            guard let value = getenv(name).map({ String(cString: $0) }), !value.isEmpty else {
                throw SealingError(.keyUnavailable, "environment variable \(name) is not set")
            }
            guard let bytes = Data(base64Encoded: Self.trimmingWhitespace(value)), bytes.count == 32 else {
                throw SealingError(.keyUnavailable, "environment variable \(name) must hold 32 bytes in base64")
            }
            return SecretKey(bytes)
        case .keyFile(let path):
            return try KeyFile.load(path: path, create: create)
        case .secretService(let name):
            return try SecretServiceKey.load(name: name, create: create)
        #if canImport(Security)
        case .keychain(let name):
            return try KeychainMasterKey.load(name: name, create: create)
        #endif
        case .passphrase(let passphrase):
            guard !passphrase.isEmpty else {
                throw SealingError(.keyUnavailable, "the passphrase is empty")
            }
            guard let kdf else {
                throw SealingError(
                    .keyUnavailable, "this store was not created with a passphrase; use its key file or key")
            }
            do {
                return try Scrypt.deriveKey(
                    password: Array(passphrase.utf8), salt: kdf.salt, parameters: kdf.parameters)
            } catch {
                throw SealingError(.keyUnavailable, "scrypt failed", underlying: error.message)
            }
        }
    }

    static func trimmingWhitespace(_ text: String) -> String {
        var text = Substring(text)
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return String(text)
    }
}

/// scrypt salt and cost of a passphrase store, kept next to its keys (the SQLite store's `meta`
/// table, MoosePostgres's `meta` table) as this type's JSON.
package struct KDFParameters: Codable, Sendable {
    /// The random salt.
    package var salt: [UInt8]
    /// N, r, p.
    package var parameters: Scrypt.Parameters

    package init(salt: [UInt8], parameters: Scrypt.Parameters) {
        self.salt = salt
        self.parameters = parameters
    }

    /// New parameters for `source`: a fresh salt and `parameters` for a passphrase, `nil` for any
    /// other source (its key is used as it is).
    package static func fresh(for source: MasterKeySource, parameters: Scrypt.Parameters) throws(SealingError)
        -> KDFParameters?
    {
        guard case .passphrase = source else { return nil }
        do {
            return KDFParameters(salt: try SecureRandom.bytes(count: 16), parameters: parameters)
        } catch {
            throw SealingError(.io, "no randomness for a scrypt salt", underlying: error.message)
        }
    }
}
