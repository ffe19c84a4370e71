import MooseCrypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Key files: 32 random bytes, mode 0600, in a 0700 folder.
enum KeyFile {
    static func load(path: String, create: Bool) throws(SealingError) -> SecretKey {
        var info = stat()
        if stat(path, &info) != 0 {
            guard errno == ENOENT else {
                throw SealingError(.permission, "cannot read key file \(path): \(String(cString: strerror(errno)))")
            }
            guard create else {
                throw SealingError(.keyUnavailable, "key file \(path) does not exist")
            }
            return try make(path: path)
        }
        // Like ssh: a key readable or writable by group or others is refused.
        if info.st_mode & 0o077 != 0 {
            throw SealingError(
                .permission,
                "key file \(path) is accessible by other users (mode \(String(info.st_mode & 0o777, radix: 8))); run chmod 600 \(path)"
            )
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw SealingError(.permission, "cannot read key file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 33)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, 33) }
        defer { bytes.withUnsafeMutableBytes { buffer in for i in buffer.indices { buffer[i] = 0 } } }
        guard count == 32 else {
            throw SealingError(.keyUnavailable, "key file \(path) must hold exactly 32 bytes")
        }
        return SecretKey(bytes.prefix(32))
    }

    /// Makes the key file whole or not at all: written to a private temporary name, then linked to
    /// `path` (which fails if it exists). Two processes making the same store's key at once: the
    /// second reads the first's key rather than failing or seeing a half-written file.
    static func make(path: String) throws(SealingError) -> SecretKey {
        try PrivateFolder.ensure(for: path)
        let key: SecretKey
        do { key = try SecretKey(randomByteCount: 32) } catch {
            throw SealingError(.io, "cannot generate a key", underlying: error.message)
        }
        // A name of its own per call (threads of one process make keys at once too).
        let suffix: String
        do { suffix = try SecureRandom.bytes(count: 8).map { String($0, radix: 16) }.joined() } catch {
            throw SealingError(.io, "no randomness for a temporary key file name", underlying: error.message)
        }
        let temporary = "\(path).new-\(suffix)"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw SealingError(.permission, "cannot create key file \(path): \(String(cString: strerror(errno)))")
        }
        defer { unlink(temporary) }
        let written = key.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == 32, synced else {
            throw SealingError(.io, "cannot write key file \(path)")
        }
        guard link(temporary, path) == 0 else {
            if errno == EEXIST { return try load(path: path, create: false) }
            throw SealingError(.permission, "cannot create key file \(path): \(String(cString: strerror(errno)))")
        }
        return key
    }
}

/// Folders for secrets: mode 0700 (the key file's, and the SQLite store's).
package enum PrivateFolder {
    /// Creates the parent folder of `path` (and missing ancestors) with mode 0700 if needed.
    package static func ensure(for path: String) throws(SealingError) {
        var components = path.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        guard !components.isEmpty else { return }
        var current = path.hasPrefix("/") ? "" : "."
        if path.hasPrefix("/") { components = components.dropFirst() }
        for component in components where !component.isEmpty {
            current += "/" + component
            if mkdir(current, 0o700) != 0, errno != EEXIST {
                throw SealingError(.io, "cannot create folder \(current): \(String(cString: strerror(errno)))")
            }
        }
    }
}
