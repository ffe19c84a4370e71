import Foundation
import MooseCrypto
import MooseOAuth
import MooseSQLiteStorage
import MooseSecretStore
import MooseTestSupport
import Testing

/// The storage contract (MooseTesting's `SessionStorageContract`) against every storage Moose ships.
struct StorageContractTests {
    @Test func encryptedSQLiteStorageKeepsTheContract() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-contract-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let key = try SecureRandom.bytes(count: 32)
        try await SessionStorageContract.verify(
            {
                let store = try SecretStore(
                    path: folder.appendingPathComponent("\(UUID().uuidString).sqlite").path, masterKey: .raw(key))
                return EncryptedSessionStorage(store: store)
            },
            damage: { storage, key in
                // The real file, damaged by another program: one bit of the row's sealed bytes.
                let path = try #require(storage as? EncryptedSessionStorage).store.path
                try DamagedRow.flip(storePath: path, name: key)
            })
    }

    @Test func inMemoryStorageKeepsTheContract() async throws {
        try await SessionStorageContract.verify(
            { InMemorySessionStorage() },
            damage: { storage, key in
                try #require(storage as? InMemorySessionStorage).damage(key)
            })
    }

    /// A row that opens but is not a session (another program's value under the key) is damaged too,
    /// not a store outage; a logout removes it and a login writes over it.
    @Test func aRowThatIsNotASessionIsDamaged() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-notasession-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SecretStore(
            path: folder.appendingPathComponent("store.sqlite").path, masterKey: .raw(try SecureRandom.bytes(count: 32))
        )
        try store.put(Array("not a session".utf8), namespace: EncryptedSessionStorage.namespace, name: "odd")
        let storage = EncryptedSessionStorage(store: store)
        await #expect(errorCode { _ = try await storage.load("odd") } == OAuthError.sessionDamaged)
        #expect(try await storage.keys() == ["odd"])
        #expect(try await storage.delete("odd"))
        #expect(try await storage.load("odd") == nil)
        #expect(try await storage.keys().isEmpty)
    }

    /// Sessions written by Moose 0.1 (an embedded CLI profile, no generation) still load, and are
    /// rewritten in the new shape on the next save.
    @Test func sessionsWrittenByTheFirstVersionStillLoad() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-legacy-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SecretStore(
            path: folder.appendingPathComponent("store.sqlite").path, masterKey: .raw(try SecureRandom.bytes(count: 32))
        )
        let legacy =
            #"{"profile":{"name":"default","issuer":"https://id.example.com","clientID":"moose-cli","scopes":["openid"],"grant":"authorization_code","endpoints":{}},"tokens":{"accessToken":"at","tokenType":"Bearer","refreshToken":"rt","scopes":["openid"],"requestedAt":100},"state":"active","subject":"alice","updatedAt":100}"#
        try store.put(Array(legacy.utf8), namespace: EncryptedSessionStorage.namespace, name: "default")
        let storage = EncryptedSessionStorage(store: store)
        let stored = try #require(try await storage.load("default"))
        #expect(
            stored.generation == 0 && stored.session.issuer == "https://id.example.com"
                && stored.session.clientID == "moose-cli")
        #expect(stored.session.tokens.refreshToken == "rt" && stored.session.subject == "alice")
        #expect(stored.session.attributes[OAuthSession.legacyProfileAttribute]?.contains("\"grant\"") == true)
        let next = try await storage.save(stored.session, key: "default", expectedGeneration: 0, lease: nil)
        #expect(next == 1)
        #expect(
            try await storage.load("default")?.session
                == stored.session.with(updatedAt: try #require(try await storage.load("default")).session.updatedAt))
    }
}

/// The `OAuthError` code `body` throws (`nil`: it threw nothing, or something else).
func errorCode(_ body: () async throws -> Void) async -> OAuthError.Code? {
    do {
        try await body()
        return nil
    } catch {
        return (error as? OAuthError)?.code
    }
}

extension OAuthSession {
    func with(updatedAt: Date) -> OAuthSession {
        var copy = self
        copy.updatedAt = updatedAt
        return copy
    }
}
