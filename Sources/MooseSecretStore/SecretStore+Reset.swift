public import MooseSealing
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SecretStore {
    /// The files of a store at `path`, in the order they move: SQLite's companions first — the
    /// write-ahead log (which holds the last commits), the shared memory, the rollback journal — then
    /// the store itself. Whatever moves, copies or removes a store moves all of them.
    ///
    /// - Parameter path: the store's path.
    /// - Returns: the paths, whether or not each exists now.
    public static func files(at path: String) -> [String] {
        (companionSuffixes + [""]).map { path + $0 }
    }

    /// SQLite's companions of a store file, in the order they move (the write-ahead log first).
    private static let companionSuffixes = ["-wal", "-shm", "-journal"]

    /// What `reset(path:masterKey:)` found and did.
    public enum ResetOutcome: Sendable, Equatable {
        /// The store opens with the key: nothing was moved or made.
        case opensWithItsKey
        /// A new, empty store was made at the path. The old one, if there was one, was moved to
        /// `movedAside` with its companions, whole: it opens again with its old key.
        case created(movedAside: String?)
    }

    /// Starts over where the store at `path` cannot be opened because its key is lost (or the key given
    /// is another): the store and its companions move aside to `path.broken-YYYYMMDDTHHMMSSZ` (kept, never
    /// deleted), and a new, empty store is made at `path` with `masterKey`. A missing store is made.
    ///
    /// Only a lost or other key moves a store. A store that opens is left alone (`.opensWithItsKey`);
    /// a busy, unreadable, damaged or newer one throws and stays as it is; and when no new store can be
    /// made (the key cannot be had), the old one goes back where it was.
    ///
    /// - Parameters:
    ///   - path: the store's path.
    ///   - masterKey: the key the new store is made with (and the one the old store is tried with).
    ///   - now: the time in the moved store's name (default: now).
    /// - Returns: what was done.
    /// - Throws: `SecretStoreError`: the opening error of a store that is not moved (its message says it
    ///   was left as it is), `invalidArgument` when a folder is in the store's place, `io` when a file
    ///   cannot be moved, and the new store's errors (the old one put back).
    public static func reset(path: String, masterKey: MasterKeySource, now: Date = Date()) throws(SecretStoreError)
        -> ResetOutcome
    {
        var info = stat()
        let exists = lstat(path, &info) == 0
        if exists, (info.st_mode & S_IFMT) == S_IFDIR {
            throw SecretStoreError(
                SecretStoreError.invalidArgument, "\(path) is a folder, not a store: move it away by hand")
        }
        var moved: String? = nil
        if exists {
            do throws(SecretStoreError) {
                _ = try SecretStore(path: path, masterKey: masterKey, create: false)
                return .opensWithItsKey
            } catch  where error.code != SecretStoreError.keyUnavailable && error.code != SecretStoreError.wrongKey {
                throw SecretStoreError(
                    error.code,
                    "\(error.message); only a store whose key is lost is moved aside, and this one was left as it is",
                    underlying: error.underlying)
            } catch {}
            moved = try moveAside(path, to: path + ".broken-" + stamp(now))
        }
        do throws(SecretStoreError) {
            _ = try SecretStore(path: path, masterKey: masterKey, create: true)
        } catch {
            if let moved { moveBack(moved, to: path) }
            throw error
        }
        return .created(movedAside: moved)
    }

    /// Moves the store at `path` and its companions to `aside`; a failed rename puts back what moved.
    private static func moveAside(_ path: String, to aside: String) throws(SecretStoreError) -> String {
        var done: [String] = []
        for suffix in companionSuffixes + [""] where FileSystem.exists(path + suffix) {
            guard rename(path + suffix, aside + suffix) == 0 else {
                let reason = String(cString: strerror(errno))
                for suffix in done { _ = rename(aside + suffix, path + suffix) }
                throw SecretStoreError(
                    SecretStoreError.io, "could not move \(path + suffix) aside to \(aside + suffix): \(reason)")
            }
            done.append(suffix)
        }
        return aside
    }

    /// Puts a store moved aside back at `path` (what a failed creation left there is removed first).
    private static func moveBack(_ aside: String, to path: String) {
        for suffix in [""] + companionSuffixes where FileSystem.exists(aside + suffix) {
            unlink(path + suffix)
            _ = rename(aside + suffix, path + suffix)
        }
    }

    /// `date` in UTC as `YYYYMMDDTHHMMSSZ`.
    private static func stamp(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }
}
