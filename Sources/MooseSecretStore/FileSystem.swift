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
            throw SecretStoreError(
                errno == EACCES ? SecretStoreError.permission : SecretStoreError.io,
                "cannot create \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// What keeps SQLite from opening `path`, when the file system can say it: a folder in the
    /// file's place, or a file (or folder) this user may not read and write. `nil` when neither.
    static func whyUnopenable(_ path: String) -> SecretStoreError? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            return SecretStoreError(
                SecretStoreError.io,
                "\(path) is a folder, not a store file; move it aside (or use another file for the store)")
        }
        if access(path, R_OK | W_OK) != 0, errno == EACCES || errno == EPERM {
            return SecretStoreError(
                SecretStoreError.permission,
                "\(path): permission denied (this user may not read and write it); check its owner and mode "
                    + "(`ls -l`), a store is the user's own file with mode 600")
        }
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !folder.isEmpty, access(folder, W_OK | X_OK) != 0, errno == EACCES || errno == EPERM {
            return SecretStoreError(
                SecretStoreError.permission,
                "\(folder): permission denied (SQLite keeps its journal beside the store, so its folder must be "
                    + "writable by this user)")
        }
        return nil
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    static func size(_ path: String) -> Int64? {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : nil
    }

    /// Whether `path` was modified within the last `seconds` (by the clock; a file from the future
    /// counts as young).
    static func isYoung(_ path: String, seconds: Int = 10) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        #if canImport(Darwin)
        let modified = Int(info.st_mtimespec.tv_sec)
        #else
        let modified = Int(info.st_mtim.tv_sec)
        #endif
        return time(nil) - modified < seconds
    }

    /// Waits (at most 5 s, polling every 20 ms) while `stillBeingMade()` holds for a young file at
    /// `path`: another process that is creating the store has made the file but not yet its schema.
    /// `true` once it no longer holds.
    static func awaitCreator(of path: String, while stillBeingMade: () throws -> Bool) rethrows -> Bool {
        var waited = 0
        while try stillBeingMade() {
            guard waited < 250, isYoung(path) else { return false }
            usleep(20_000)
            waited += 1
        }
        return true
    }
}
