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

/// Where a store's master key comes from.
///
/// The master key only wraps the store's data key; rotating it rewraps one row.
///
/// ```swift
/// let store = try SecretStore(path: path, masterKey: .keyFile("~/.config/moose/store.key"))
/// let ci = try SecretStore(path: path, masterKey: .environment("MOOSE_STORE_KEY"))   // base64, 32 bytes
/// let local = try SecretStore(path: path, masterKey: .passphrase("correct horse battery staple"))
/// ```
public enum MasterKeySource: Sendable {
    /// A file of 32 random bytes, created (mode 0600, folder 0700) if missing. A file readable by
    /// group or others is refused, as ssh refuses such private keys.
    case keyFile(String)
    /// An environment variable holding the 32-byte key in base64.
    case environment(String)
    /// A passphrase stretched with scrypt; salt and cost parameters are stored in the file.
    case passphrase(String)
    /// Raw key bytes from the caller (32 bytes).
    case raw([UInt8])

    /// A short description for messages (never the key).
    public var description: String {
        switch self {
        case .keyFile(let path): "key file \(path)"
        case .environment(let name): "environment variable \(name)"
        case .passphrase: "passphrase"
        case .raw: "raw key"
        }
    }

    /// The default scrypt cost: N = 2^16, r = 8, p = 1 (64 MiB, ~150–250 ms on a 2-core CI machine).
    public static let defaultScryptParameters = Scrypt.Parameters(n: 1 << 16, r: 8, p: 1)

    /// Resolves the key. `kdf` carries the store's scrypt salt and parameters for a passphrase.
    /// (`package`: MoosePostgres resolves the same sources for its tables.)
    package func resolve(kdf: KDFParameters?, create: Bool) throws(SecretStoreError) -> SecretKey {
        switch self {
        case .raw(let bytes):
            guard bytes.count == 32 else {
                throw SecretStoreError(SecretStoreError.keyUnavailable, "a raw master key must be 32 bytes, got \(bytes.count)")
            }
            return SecretKey(bytes)
        case .environment(let name):
            guard let value = getenv(name).map({ String(cString: $0) }), !value.isEmpty else {
                throw SecretStoreError(SecretStoreError.keyUnavailable, "environment variable \(name) is not set")
            }
            guard let bytes = Data(base64Encoded: value.trimmingWhitespace()), bytes.count == 32 else {
                throw SecretStoreError(SecretStoreError.keyUnavailable,
                                       "environment variable \(name) must hold 32 bytes in base64")
            }
            return SecretKey(bytes)
        case .keyFile(let path):
            return try KeyFile.load(path: path, create: create)
        case .passphrase(let passphrase):
            guard !passphrase.isEmpty else {
                throw SecretStoreError(SecretStoreError.keyUnavailable, "the passphrase is empty")
            }
            guard let kdf else {
                throw SecretStoreError(SecretStoreError.keyUnavailable,
                                       "this store was not created with a passphrase; use its key file or key")
            }
            do {
                return try Scrypt.deriveKey(password: Array(passphrase.utf8), salt: kdf.salt, parameters: kdf.parameters)
            } catch {
                throw SecretStoreError(SecretStoreError.keyUnavailable, "scrypt failed", underlying: error.message)
            }
        }
    }
}

/// scrypt salt and cost, stored in the file's `meta` table for passphrase stores (and in MoosePostgres's).
package struct KDFParameters: Codable, Sendable {
    package var salt: [UInt8]
    package var parameters: Scrypt.Parameters

    package init(salt: [UInt8], parameters: Scrypt.Parameters) {
        self.salt = salt
        self.parameters = parameters
    }
}

/// Key files: 32 random bytes, mode 0600, in a 0700 folder.
enum KeyFile {
    static func load(path: String, create: Bool) throws(SecretStoreError) -> SecretKey {
        var info = stat()
        if stat(path, &info) != 0 {
            guard errno == ENOENT else {
                throw SecretStoreError(SecretStoreError.permission, "cannot read key file \(path): \(String(cString: strerror(errno)))")
            }
            guard create else {
                throw SecretStoreError(SecretStoreError.keyUnavailable, "key file \(path) does not exist")
            }
            return try make(path: path)
        }
        // Like ssh: a key readable or writable by group or others is refused.
        if info.st_mode & 0o077 != 0 {
            throw SecretStoreError(SecretStoreError.permission,
                                   "key file \(path) is accessible by other users (mode \(String(info.st_mode & 0o777, radix: 8))); run chmod 600 \(path)")
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw SecretStoreError(SecretStoreError.permission, "cannot read key file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 33)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, 33) }
        defer { bytes.withUnsafeMutableBytes { buffer in for i in buffer.indices { buffer[i] = 0 } } }
        guard count == 32 else {
            throw SecretStoreError(SecretStoreError.keyUnavailable, "key file \(path) must hold exactly 32 bytes")
        }
        return SecretKey(bytes.prefix(32))
    }

    static func make(path: String) throws(SecretStoreError) -> SecretKey {
        try FileSystem.ensurePrivateFolder(for: path)
        let key: SecretKey
        do { key = try SecretKey(randomByteCount: 32) } catch {
            throw SecretStoreError(SecretStoreError.io, "cannot generate a key", underlying: error.message)
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw SecretStoreError(SecretStoreError.permission, "cannot create key file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let written = key.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == 32, fsync(fd) == 0 else {
            unlink(path)
            throw SecretStoreError(SecretStoreError.io, "cannot write key file \(path)")
        }
        return key
    }
}

enum FileSystem {
    /// Creates the parent folder (and missing ancestors) with mode 0700 if needed.
    static func ensurePrivateFolder(for path: String) throws(SecretStoreError) {
        var components = path.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        guard !components.isEmpty else { return }
        var current = path.hasPrefix("/") ? "" : "."
        if path.hasPrefix("/") { components = components.dropFirst() }
        for component in components where !component.isEmpty {
            current += "/" + component
            if mkdir(current, 0o700) != 0, errno != EEXIST {
                throw SecretStoreError(SecretStoreError.io, "cannot create folder \(current): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Creates an empty file with mode 0600 unless it exists.
    static func createPrivateFile(_ path: String) throws(SecretStoreError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 {
            close(fd)
        } else if errno != EEXIST {
            throw SecretStoreError(errno == EACCES ? SecretStoreError.permission : SecretStoreError.io,
                                   "cannot create \(path): \(String(cString: strerror(errno)))")
        }
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    static func size(_ path: String) -> Int64? {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : nil
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var text = Substring(self)
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return String(text)
    }
}
