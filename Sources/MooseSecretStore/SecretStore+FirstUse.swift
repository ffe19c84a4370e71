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

extension SecretStore {
    /// What creating a store would make that is not there yet — its files (`files(at:)`), its key
    /// file, and the folders above them — noted before the store is created, so that a first use that
    /// fails (a login refused, an issuer mistyped) can remove them again and leave nothing on disk.
    ///
    /// A store that is already there notes nothing. A file or folder that was already there is never
    /// touched, and a folder is removed only when it is empty.
    public struct FirstUse: Sendable {
        /// The files to remove, in order.
        public private(set) var files: [String] = []
        /// The folders to remove: the store's, deepest first, then the key file's (a folder above both is
        /// in both lists, and goes once the second list has emptied it).
        public private(set) var folders: [String] = []

        /// Notes what creating the store at `path`, with its key in `keyFile`, would make.
        ///
        /// - Parameters:
        ///   - path: the store's file.
        ///   - keyFile: the master key's file, when the key is kept in one (`MasterKeySource.keyFile`).
        public init(store path: String, keyFile: String?) {
            guard !Self.isThere(path) else { return }
            // Only what is not there: a leftover `-wal` or `-journal` beside a missing store is not ours.
            files = SecretStore.files(at: path).filter { !Self.isThere($0) }
            folders = Self.missingFolders(above: path)
            if let keyFile, !Self.isThere(keyFile) {
                files.append(keyFile)
                folders += Self.missingFolders(above: keyFile)
            }
        }

        /// Whether creating the store makes nothing (it was there already).
        public var isEmpty: Bool { files.isEmpty }

        /// Removes what was noted. Call it only when the store holds nothing worth keeping, after it
        /// is closed.
        public func undo() {
            for file in files { unlink(file) }
            for folder in folders { rmdir(folder) }
        }

        /// Whether anything is at `path`, a symbolic link included — one whose target is missing (a
        /// secrets mount not there yet) is someone's, never made here.
        static func isThere(_ path: String) -> Bool {
            var info = stat()
            return lstat(path, &info) == 0
        }

        /// The folders above `path` that do not exist yet, deepest first.
        static func missingFolders(above path: String) -> [String] {
            var missing: [String] = []
            var folder = URL(fileURLWithPath: path).deletingLastPathComponent()
            while folder.path != "/", !FileManager.default.fileExists(atPath: folder.path) {
                missing.append(folder.path)
                folder = folder.deletingLastPathComponent()
            }
            return missing
        }
    }
}
