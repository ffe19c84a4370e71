import MooseSealing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store file and its folder: created private (0600, 0700), checked before opening.
enum FileSystem {
    /// Creates the parent folder (and missing ancestors) with mode 0700 if needed.
    static func ensurePrivateFolder(for path: String) throws(SecretStoreError) {
        do { try PrivateFolder.ensure(for: path) } catch { throw SecretStoreError(error) }
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
