import Foundation
import MooseCrypto
@testable import MooseSecretStore
import MooseSealing
import MooseTestSupport
import Testing

/// A fresh folder per test, removed afterwards.
final class TempFolder {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("moose-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    func file(_ name: String) -> String { path + "/" + name }
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Fast scrypt for tests (the default costs ~130 ms per open).
let fastScrypt = Scrypt.Parameters(n: 1024, r: 8, p: 1)

func expectStoreError(
    _ code: SecretStoreError.Code, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) -> SecretStoreError? {
    do {
        try body()
        Issue.record("expected \(code), nothing thrown", sourceLocation: sourceLocation)
    } catch let error as SecretStoreError {
        #expect(error.code == code, "expected \(code), got \(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

func mode(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? Int) ?? -1
}

struct StoreBasicsTests {
    /// Eight openers of a store that does not exist yet, at once (eight replicas starting): each opens
    /// it, one key file is made whole, and all of them read what any of them wrote. A missing key
    /// source makes no file at all.
    @Test func storesCreatedAtOnceShareOneKeyAndAMissingKeyMakesNoFile() async throws {
        let folder = try TempFolder()
        let path = folder.file("data/store.sqlite")
        let key = MasterKeySource.keyFile(folder.file("config/store.key"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<8 {
                group.addTask {
                    let store = try SecretStore(path: path, masterKey: key)
                    try store.put(bytes("v\(index)"), namespace: "replicas", name: "r\(index)")
                }
            }
            try await group.waitForAll()
        }
        let store = try SecretStore(path: path, masterKey: key, create: false)
        for index in 0..<8 { #expect(try store.get(namespace: "replicas", name: "r\(index)") == bytes("v\(index)")) }
        #expect(FileManager.default.fileExists(atPath: folder.file("config/store.key")))
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.file("config")) == ["store.key"],
            "a temporary key file was left")

        let missing = folder.file("other/store.sqlite")
        _ = expectStoreError(SecretStoreError.keyUnavailable) {
            _ = try SecretStore(path: missing, masterKey: .environment("MOOSE_TEST_NO_SUCH_KEY"))
        }
        #expect(!FileManager.default.fileExists(atPath: missing), "a store without its key was left behind")
    }

    @Test func roundTripPersistenceCodableLargeAndUnicode() throws {
        let folder = try TempFolder()
        let path = folder.file("data/store.sqlite")
        let key = MasterKeySource.keyFile(folder.file("config/store.key"))
        struct OAuthSession: Codable, Equatable { let access: String; let expires: Int }
        let big = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        do {
            let store = try SecretStore(path: path, masterKey: key)
            try store.put(bytes("r1"), namespace: "session", name: "refresh_token")
            try store.put(OAuthSession(access: "a1", expires: 42), namespace: "session", name: "set")
            try store.put(big, namespace: "blobs", name: "one-mebibyte")
            try store.put(bytes("élan 🦌"), namespace: "ünï/cødé 名前", name: "名前 🦌")
            try store.put(bytes("r2"), namespace: "session", name: "refresh_token") // replace
        }
        let reopened = try SecretStore(path: path, masterKey: key)
        #expect(try reopened.get(namespace: "session", name: "refresh_token") == bytes("r2"))
        #expect(
            try reopened.get(OAuthSession.self, namespace: "session", name: "set")
                == OAuthSession(access: "a1", expires: 42))
        #expect(try reopened.get(namespace: "blobs", name: "one-mebibyte") == big)
        #expect(try reopened.get(namespace: "ünï/cødé 名前", name: "名前 🦌") == bytes("élan 🦌"))
        #expect(try reopened.get(namespace: "session", name: "missing") == nil)
        #expect(try reopened.list(namespace: "session").map(\.name) == ["refresh_token", "set"])
        #expect(try reopened.list().count == 4)
        #expect(try reopened.delete(namespace: "session", name: "set"))
        #expect(try !reopened.delete(namespace: "session", name: "set"))
        #expect(try reopened.get(namespace: "session", name: "set") == nil)
    }

    @Test func filesAndFoldersArePrivate() throws {
        let folder = try TempFolder()
        let path = folder.file("data/moose/store.sqlite")
        let keyPath = folder.file("config/moose/store.key")
        let store = try SecretStore(path: path, masterKey: .keyFile(keyPath))
        try store.put(bytes("x"), namespace: "n", name: "v")
        #expect(mode(path) == 0o600)
        #expect(mode(path + "-wal") == 0o600)
        #expect(mode(folder.file("data/moose")) == 0o700)
        #expect(mode(keyPath) == 0o600)
        #expect(mode(folder.file("config/moose")) == 0o700)
        #expect(FileSystem.size(keyPath) == 32)
    }

    @Test func keyFileReadableByOthersIsRefused() throws {
        let folder = try TempFolder()
        let keyPath = folder.file("store.key")
        _ = try SecretStore(path: folder.file("s.sqlite"), masterKey: .keyFile(keyPath))
        chmod(keyPath, 0o644)
        let error = expectStoreError(SecretStoreError.permission) {
            _ = try SecretStore(path: folder.file("s.sqlite"), masterKey: .keyFile(keyPath))
        }
        #expect(error?.message.contains("chmod 600") == true)
    }

    @Test func environmentAndRawAndPassphraseSources() throws {
        let folder = try TempFolder()
        let key = try SecureRandom.bytes(count: 32)
        setenv("MOOSE_TEST_STORE_KEY", Data(key).base64EncodedString(), 1)
        defer { unsetenv("MOOSE_TEST_STORE_KEY") }
        let envStore = try SecretStore(path: folder.file("env.sqlite"), masterKey: .environment("MOOSE_TEST_STORE_KEY"))
        try envStore.put(bytes("v"), namespace: "n", name: "k")
        // The same key given raw opens it.
        #expect(
            try SecretStore(path: folder.file("env.sqlite"), masterKey: .raw(key)).get(namespace: "n", name: "k")
                == bytes("v"))
        _ = expectStoreError(SecretStoreError.keyUnavailable) {
            _ = try SecretStore(path: folder.file("x.sqlite"), masterKey: .environment("MOOSE_TEST_NO_SUCH_VARIABLE"))
        }
        let pass = try SecretStore(
            path: folder.file("pass.sqlite"), masterKey: .passphrase("correct horse"), scryptParameters: fastScrypt)
        try pass.put(bytes("p"), namespace: "n", name: "k")
        #expect(
            try SecretStore(path: folder.file("pass.sqlite"), masterKey: .passphrase("correct horse"))
                .get(namespace: "n", name: "k") == bytes("p"))
        _ = expectStoreError(SecretStoreError.wrongKey) {
            _ = try SecretStore(path: folder.file("pass.sqlite"), masterKey: .passphrase("wrong horse"))
        }
    }

    @Test func transactionIsAllOrNothing() throws {
        let folder = try TempFolder()
        let store = try SecretStore(path: folder.file("s.sqlite"), masterKey: .raw(try SecureRandom.bytes(count: 32)))
        try store.put(bytes("old"), namespace: "s", name: "refresh")
        struct Boom: Error {}
        _ = expectStoreError(SecretStoreError.invalidArgument) {
            try store.transaction { tx throws(SecretStoreError) in
                try tx.put(bytes("new"), namespace: "s", name: "refresh")
                try tx.put(bytes("new access"), namespace: "s", name: "access")
                try tx.put(bytes("x"), namespace: "", name: "invalid") // fails: rolls everything back
            }
        }
        #expect(try store.get(namespace: "s", name: "refresh") == bytes("old"))
        #expect(try store.get(namespace: "s", name: "access") == nil)
        try store.transaction { tx throws(SecretStoreError) in
            try tx.put(bytes("new"), namespace: "s", name: "refresh")
            try tx.put(bytes("new access"), namespace: "s", name: "access")
            #expect(try tx.get(namespace: "s", name: "refresh") == bytes("new"))
        }
        #expect(try store.get(namespace: "s", name: "access") == bytes("new access"))
    }
}

struct StoreTamperTests {
    let folder: TempFolder
    let path: String
    let key: [UInt8]

    init() throws {
        folder = try TempFolder()
        path = folder.file("store.sqlite")
        key = try SecureRandom.bytes(count: 32)
        let store = try SecretStore(path: path, masterKey: .raw(key))
        try store.put(bytes("refresh-token-AAAA"), namespace: "session", name: "refresh_token")
        try store.put(bytes("access-token-BBBB"), namespace: "session", name: "access_token")
        try store.put(bytes("other"), namespace: "other", name: "value")
    }

    /// Raw SQL on the file, bypassing the store (as an attacker with the file would).
    func raw(_ sql: String) throws {
        let connection = try SQLiteConnection(path: path, mode: .readWrite)
        try connection.execute(sql)
    }

    func checkpoint() throws {
        try raw("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    @Test func wrongMasterKeyChangesNothing() throws {
        try checkpoint()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let error = expectStoreError(SecretStoreError.wrongKey) {
            _ = try SecretStore(path: path, masterKey: .raw(try SecureRandom.bytes(count: 32)))
        }
        #expect(error?.description.contains("master key") == true)
        let after = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(before == after, "the store file changed after a wrong-key open")
        #expect(
            try SecretStore(path: path, masterKey: .raw(key)).get(namespace: "other", name: "value") == bytes("other"))
    }

    @Test func flippedByteIsTamperedForThatRowOnly() throws {
        // Flip one bit of the ciphertext (after the 12-byte nonce) of one row, with raw SQL.
        let connection = try SQLiteConnection(path: path, mode: .readWrite)
        let select = try connection.statement(
            "SELECT sealed FROM secrets WHERE namespace='session' AND name='access_token'")
        _ = try select.step()
        var sealed = select.blob(0)
        select.reset()
        sealed[20] ^= 0x01
        let update = try connection.statement(
            "UPDATE secrets SET sealed = ? WHERE namespace='session' AND name='access_token'")
        try update.bind(1, blob: sealed)
        try update.step()

        let store = try SecretStore(path: path, masterKey: .raw(key))
        let error = expectStoreError(SecretStoreError.tampered) {
            _ = try store.get(namespace: "session", name: "access_token")
        }
        #expect(error?.namespace == "session" && error?.name == "access_token")
        #expect(error?.description.contains("access-token") == false)
        #expect(try store.get(namespace: "other", name: "value") == bytes("other")) // other rows still open
        let report = try store.check()
        #expect(report.good == 2 && report.bad.count == 1 && report.integrity == "ok")
        #expect(report.bad.first?.entry.name == "access_token")
    }

    @Test func ciphertextCopiedToAnotherRowIsTampered() throws {
        try raw(
            """
            UPDATE secrets SET sealed = (SELECT sealed FROM secrets WHERE namespace='session' AND name='refresh_token')
            WHERE namespace='session' AND name='access_token'
            """)
        let store = try SecretStore(path: path, masterKey: .raw(key))
        _ = expectStoreError(SecretStoreError.tampered) {
            _ = try store.get(namespace: "session", name: "access_token")
        }
        #expect(try store.get(namespace: "session", name: "refresh_token") == bytes("refresh-token-AAAA"))
        // A row moved to another name does not open either.
        try raw("UPDATE secrets SET name = 'moved' WHERE namespace='other' AND name='value'")
        _ = expectStoreError(SecretStoreError.tampered) { _ = try store.get(namespace: "other", name: "moved") }
    }

    @Test func garbageAndTruncatedFilesAreCorrupt() throws {
        let garbage = folder.file("garbage.sqlite")
        try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }).write(to: URL(fileURLWithPath: garbage))
        let before = try Data(contentsOf: URL(fileURLWithPath: garbage))
        _ = expectStoreError(SecretStoreError.corrupt) { _ = try SecretStore(path: garbage, masterKey: .raw(key)) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: garbage)) == before)

        try checkpoint()
        let truncated = folder.file("truncated.sqlite")
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: truncated))
        _ = expectStoreError(SecretStoreError.corrupt) {
            let store = try SecretStore(path: truncated, masterKey: .raw(key))
            _ = try store.list()
            if !(try store.check().isHealthy) {
                throw SecretStoreError(SecretStoreError.corrupt, "check reported damage")
            }
        }
        let notSQLite = folder.file("text.sqlite")
        try Data("hello, this is not a database\n".utf8).write(to: URL(fileURLWithPath: notSQLite))
        _ = expectStoreError(SecretStoreError.corrupt) { _ = try SecretStore(path: notSQLite, masterKey: .raw(key)) }
    }

    /// The store is a library: its errors say what any program can do (restore, move aside, create),
    /// never a command of the `moose` tool, which an app's user does not have (issue 40 §3). `moose`
    /// adds its own next step.
    @Test func faultsNameNoCommandOfTheTool() throws {
        let empty = folder.file("empty.sqlite")
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        let notSQLite = folder.file("text.sqlite")
        try Data("hello, this is not a database\n".utf8).write(to: URL(fileURLWithPath: notSQLite))
        let faults = [
            expectStoreError(SecretStoreError.corrupt) { _ = try SecretStore(path: empty, masterKey: .raw(key)) },
            expectStoreError(SecretStoreError.corrupt) { _ = try SecretStore(path: notSQLite, masterKey: .raw(key)) },
            expectStoreError(SecretStoreError.io) {
                _ = try SecretStore(path: folder.file("absent.sqlite"), masterKey: .raw(key), create: false)
            }
        ]
        for fault in faults {
            let message = try #require(fault).message
            #expect(!message.contains("moose "), "\(message)")
            #expect(message.contains("start over") || message.contains("create"), "\(message)")
        }
    }

    @Test func plaintextNeverReachesTheFiles() throws {
        let secret = "refresh-secret-\(UUID().uuidString)"
        let store = try SecretStore(path: path, masterKey: .raw(key))
        try store.put(bytes(secret), namespace: "session", name: "refresh_token")
        try store.put(bytes(secret), namespace: "session", name: "copy")
        try store.delete(namespace: "session", name: "copy")
        for suffix in ["", "-wal", "-shm", "-journal"] {
            guard let data = FileManager.default.contents(atPath: path + suffix) else { continue }
            #expect(data.range(of: Data(secret.utf8)) == nil, "plaintext found in store\(suffix)")
            #expect(data.range(of: Data(key)) == nil, "master key found in store\(suffix)")
        }
    }

    @Test func rotationsKeepValuesAndRetireTheOldKey() throws {
        let store = try SecretStore(path: path, masterKey: .raw(key))
        let newKeyPath = folder.file("new.key")
        try store.rotateMasterKey(to: .keyFile(newKeyPath))
        try store.rotateDataKey()
        try store.put(bytes("after"), namespace: "n", name: "after")
        #expect(try store.list().allSatisfy { $0.keyID == 2 })
        let reopened = try SecretStore(path: path, masterKey: .keyFile(newKeyPath))
        #expect(try reopened.get(namespace: "session", name: "refresh_token") == bytes("refresh-token-AAAA"))
        #expect(try reopened.get(namespace: "n", name: "after") == bytes("after"))
        #expect(try reopened.check().isHealthy)
        _ = expectStoreError(SecretStoreError.wrongKey) { _ = try SecretStore(path: path, masterKey: .raw(key)) }
        // And to a passphrase and back.
        try reopened.rotateMasterKey(to: .passphrase("pass phrase"), scryptParameters: fastScrypt)
        #expect(
            try SecretStore(path: path, masterKey: .passphrase("pass phrase")).get(namespace: "other", name: "value")
                == bytes("other"))
        _ = expectStoreError(SecretStoreError.wrongKey) {
            _ = try SecretStore(path: path, masterKey: .keyFile(newKeyPath))
        }
    }

    @Test func newerSchemaIsRefusedUntouched() throws {
        try raw("PRAGMA user_version = 99")
        try checkpoint()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let error = expectStoreError(SecretStoreError.unsupportedVersion) {
            _ = try SecretStore(path: path, masterKey: .raw(key))
        }
        #expect(error?.message.contains("99") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test func rolledBackKeyIdIsTampered() throws {
        let store = try SecretStore(path: path, masterKey: .raw(key))
        try store.rotateMasterKey(to: .raw(key)) // no-op rewrap
        try raw("UPDATE secrets SET key_id = 7 WHERE namespace='other'")
        _ = expectStoreError(SecretStoreError.tampered) { _ = try store.get(namespace: "other", name: "value") }
    }
}
