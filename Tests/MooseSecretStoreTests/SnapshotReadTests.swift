import Foundation
import MooseCrypto
@testable import MooseSecretStore
import MooseSealing
import MooseTestSupport
import Testing

/// `SecretStore.readSnapshot`: one read in SQLite's exclusive locking mode (no `-shm`), for `moose token`.
struct SnapshotReadTests {
    let folder: TempFolder
    let path: String
    let key: [UInt8]

    init() throws {
        folder = try TempFolder()
        path = folder.file("store.sqlite")
        key = try SecureRandom.bytes(count: 32)
        let store = try SecretStore(path: path, masterKey: .raw(key))
        try store.put(bytes("access-token-BBBB"), namespace: "session", name: "default")
        try store.put(bytes("other"), namespace: "other", name: "value")
    }

    func snapshot(
        _ namespace: String = "session", _ name: String = "default", path: String? = nil,
        key: MasterKeySource? = nil
    ) throws -> [UInt8]? {
        try SecretStore.readSnapshot(
            path: path ?? self.path, masterKey: key ?? .raw(self.key), namespace: namespace, name: name)
    }

    func sidecars(_ path: String) -> [String] {
        ["-wal", "-shm", "-journal"].filter { FileManager.default.fileExists(atPath: path + $0) }
    }

    @Test func readsWhatGetReadsChangesNothingAndLeavesNoFiles() throws {
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(sidecars(path).isEmpty)
        #expect(try snapshot() == bytes("access-token-BBBB"))
        #expect(try snapshot("other", "value") == bytes("other"))
        #expect(try snapshot("session", "nobody") == nil)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "a snapshot read changed the store file")
        #expect(sidecars(path).isEmpty, "a snapshot read left \(sidecars(path)) behind")
        #expect(
            try SecretStore(path: path, masterKey: .raw(key)).get(namespace: "session", name: "default")
                == bytes("access-token-BBBB"))
    }

    /// Another connection has the store open: `busy` at once, never a wait, never that connection's
    /// log taken away (the caller then reads the ordinary way, next to it).
    @Test func anotherOpenConnectionMeansBusyWithoutWaiting() throws {
        let open = try SecretStore(path: path, masterKey: .raw(key))
        try open.put(bytes("access-token-CCCC"), namespace: "session", name: "default")
        let started = Date()
        _ = expectStoreError(SecretStoreError.busy) { _ = try snapshot() }
        // A wait would be the 5 s busy timeout of an ordinary open; scheduling on a loaded machine is not.
        #expect(Date().timeIntervalSince(started) < 4, "the snapshot waited for the lock")
        // The open connection is undisturbed: it writes and reads on, and so does a new ordinary one.
        try open.put(bytes("access-token-DDDD"), namespace: "session", name: "default")
        #expect(try open.get(namespace: "session", name: "default") == bytes("access-token-DDDD"))
        #expect(
            try SecretStore(path: path, masterKey: .raw(key)).get(namespace: "session", name: "default")
                == bytes("access-token-DDDD"))
    }

    /// Commits still in the write-ahead log (a writer that stopped before any checkpoint) are read.
    @Test func seesCommitsStillInTheLog() throws {
        let copy = folder.file("copy.sqlite")
        do {
            let writer = try SecretStore(path: path, masterKey: .raw(key))
            try writer.put(bytes("access-token-EEEE"), namespace: "session", name: "default")
            // Copy the file and its log while the writer is open: the new value is only in the log.
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            try FileManager.default.copyItem(atPath: path + "-wal", toPath: copy + "-wal")
        }
        #expect(try snapshot(path: copy) == bytes("access-token-EEEE"))
        #expect(
            try SecretStore(path: copy, masterKey: .raw(key)).get(namespace: "session", name: "default")
                == bytes("access-token-EEEE"))
    }

    @Test func refusesAsTheOrdinaryOpenDoes() throws {
        _ = expectStoreError(SecretStoreError.io) { _ = try snapshot(path: folder.file("missing.sqlite")) }
        #expect(
            !FileManager.default.fileExists(atPath: folder.file("missing.sqlite")), "a snapshot read created a store")

        let empty = folder.file("empty.sqlite")
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        _ = expectStoreError(SecretStoreError.corrupt) { _ = try snapshot(path: empty) }

        let garbage = folder.file("garbage.sqlite")
        try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }).write(to: URL(fileURLWithPath: garbage))
        _ = expectStoreError(SecretStoreError.corrupt) { _ = try snapshot(path: garbage) }

        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        _ = expectStoreError(SecretStoreError.wrongKey) {
            _ = try snapshot(key: .raw(try SecureRandom.bytes(count: 32)))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test func tamperedRowIsTampered() throws {
        do {
            let connection = try SQLiteConnection(path: path, mode: .readWrite)
            try connection.execute(
                """
                UPDATE secrets SET sealed = (SELECT sealed FROM secrets WHERE namespace='other' AND name='value')
                WHERE namespace='session' AND name='default'
                """)
        }
        _ = expectStoreError(SecretStoreError.tampered) { _ = try snapshot() }
        #expect(try snapshot("other", "value") == bytes("other"))
    }

    /// scrypt (~200 ms) is not run under the exclusive lock: a passphrase store is left to the ordinary read.
    @Test func passphraseStoreIsLeftToTheOrdinaryRead() throws {
        let phrase = folder.file("phrase.sqlite")
        let source = MasterKeySource.passphrase("correct horse battery staple")
        try SecretStore(path: phrase, masterKey: source, scryptParameters: fastScrypt).put(
            bytes("v"), namespace: "n", name: "k")
        _ = expectStoreError(SecretStoreError.invalidArgument) { _ = try snapshot("n", "k", path: phrase, key: source) }
    }

    /// Many snapshot readers and an ordinary writer at once, in threads: every read is a value some
    /// write committed (or the first), every failure is `busy`, and the writer never fails.
    @Test func concurrentSnapshotsAndAWriter() async throws {
        let path = self.path, key = self.key
        let values = (0..<40).map { "access-token-\($0)" }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                let writer = try SecretStore(path: path, masterKey: .raw(key))
                for value in values { try writer.put(bytes(value), namespace: "session", name: "default") }
            }
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<40 {
                        do {
                            let read = try SecretStore.readSnapshot(
                                path: path, masterKey: .raw(key), namespace: "session", name: "default")
                            let text = read.map { String(decoding: $0, as: UTF8.self) }
                            #expect(text == "access-token-BBBB" || values.contains(text ?? ""), "read \(text ?? "nil")")
                        } catch let error as SecretStoreError {
                            #expect(error.code == SecretStoreError.busy, "\(error)")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try snapshot() == bytes("access-token-39"))
    }
}
