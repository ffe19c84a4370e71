import Foundation
import MooseCrypto
import MooseSealing
import MooseSecretStore
import Testing

/// `SecretStore.reset`: a store whose key is lost is moved aside whole (kept, still opening with its
/// old key) and a new one made; anything else is left exactly as it is.
struct StoreResetTests {
    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-reset-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test func aStoreWithAnotherKeyIsMovedAsideWholeAndANewOneMade() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("store.sqlite").path
        let old = MasterKeySource.raw(try SecureRandom.bytes(count: 32))
        let new = MasterKeySource.raw(try SecureRandom.bytes(count: 32))
        try SecretStore(path: path, masterKey: old).put(Array("kept".utf8), namespace: "n", name: "a")

        let noon = Date(timeIntervalSince1970: 1_795_953_600) // 2026-11-29T12:00:00Z
        let outcome = try SecretStore.reset(path: path, masterKey: new, now: noon)
        let aside = path + ".broken-20261129T120000Z"
        #expect(outcome == .created(movedAside: aside))
        // The old store opens with its old key, its value intact; the new one with the new key, empty.
        #expect(
            try SecretStore(path: aside, masterKey: old, create: false).get(namespace: "n", name: "a")
                == Array("kept".utf8))
        #expect(try SecretStore(path: path, masterKey: new, create: false).list().isEmpty)
        // Beside the new store (and its own companions) only the old one, moved whole under its new name.
        let moved = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter {
            !SecretStore.files(at: "store.sqlite").contains($0)
        }
        #expect(moved.allSatisfy { $0.hasPrefix("store.sqlite.broken-20261129T120000Z") }, "\(moved)")
        #expect(moved.contains("store.sqlite.broken-20261129T120000Z"), "\(moved)")
        // Again: it opens with its key now, and nothing moves.
        #expect(try SecretStore.reset(path: path, masterKey: new) == .opensWithItsKey)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(
            names.filter { $0.hasPrefix("store.sqlite.broken-") && !$0.contains("-wal") && !$0.contains("-shm") }.count
                == 1, "\(names)")
    }

    @Test func aMissingStoreIsMade() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("store.sqlite").path
        let key = MasterKeySource.raw(try SecureRandom.bytes(count: 32))
        #expect(try SecretStore.reset(path: path, masterKey: key) == .created(movedAside: nil))
        #expect(try SecretStore(path: path, masterKey: key, create: false).list().isEmpty)
    }

    /// A damaged store is not a lost key: it stays, byte for byte, and the error says so.
    @Test func aDamagedStoreIsLeftAsItIs() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("store.sqlite").path
        let garbage = Data((0..<4096).map { _ in UInt8.random(in: 0...255) })
        try garbage.write(to: URL(fileURLWithPath: path))
        let key = MasterKeySource.raw(try SecureRandom.bytes(count: 32))
        let error = #expect(throws: SecretStoreError.self) { try SecretStore.reset(path: path, masterKey: key) }
        #expect(error?.code == SecretStoreError.corrupt, "\(String(describing: error))")
        #expect(error?.message.hasSuffix("and this one was left as it is") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == garbage)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["store.sqlite"])
    }

    @Test func aFolderInTheStoresPlaceIsSaid() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let key = MasterKeySource.raw(try SecureRandom.bytes(count: 32))
        let error = #expect(throws: SecretStoreError.self) { try SecretStore.reset(path: folder.path, masterKey: key) }
        #expect(error?.code == SecretStoreError.invalidArgument && error?.message.contains("is a folder") == true)
    }

    /// `SecretStore.FirstUse`: what creating a store makes is noted and removed again; what was there
    /// before (a folder, a key file, a folder that is no longer empty) is never touched.
    @Test func aFirstUseRemovesOnlyWhatItMade() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("data/moose/store.sqlite").path
        let key = folder.appendingPathComponent("config/moose/store.key").path
        // The key's folder is there already, with a file of the person's own.
        try FileManager.default.createDirectory(
            atPath: folder.appendingPathComponent("config/moose").path, withIntermediateDirectories: true)
        let own = folder.appendingPathComponent("config/moose/config.toml").path
        try Data("default = \"work\"\n".utf8).write(to: URL(fileURLWithPath: own))
        let made = SecretStore.FirstUse(store: path, keyFile: key)
        #expect(!made.isEmpty && made.files.contains(path) && made.files.contains(key))
        #expect(
            made.folders == [
                folder.appendingPathComponent("data/moose").path, folder.appendingPathComponent("data").path
            ])
        _ = try SecretStore(path: path, masterKey: .keyFile(key))
        // Another first use of the same store, now there, notes nothing.
        #expect(SecretStore.FirstUse(store: path, keyFile: key).isEmpty)
        made.undo()
        for gone in [path, key, folder.appendingPathComponent("data").path] {
            #expect(!FileManager.default.fileExists(atPath: gone), "\(gone) left")
        }
        #expect(FileManager.default.fileExists(atPath: own), "a file that was there before was removed")
    }

    /// A key file that is a symbolic link whose target is missing (a secrets mount not there yet) and a
    /// leftover write-ahead log beside a missing store are someone's: a first use never notes them.
    @Test func aFirstUseNeverNotesALinkOrALeftoverItDidNotMake() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("store.sqlite").path
        let key = folder.appendingPathComponent("store.key").path
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        #expect(symlink(folder.appendingPathComponent("mount/store.key").path, key) == 0)
        try Data("log".utf8).write(to: URL(fileURLWithPath: path + "-wal"))
        let made = SecretStore.FirstUse(store: path, keyFile: key)
        #expect(made.files == [path + "-shm", path + "-journal", path], "\(made.files)")
        made.undo()
        var info = stat()
        #expect(lstat(key, &info) == 0, "the link was removed")
        #expect(FileManager.default.fileExists(atPath: path + "-wal"), "the leftover log was removed")
    }
}
