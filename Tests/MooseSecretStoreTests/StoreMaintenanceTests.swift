import Foundation
import MooseOAuth
import MooseSQLiteStorage
@testable import MooseSecretStore
import MooseSealing
import Testing

/// `SessionStoreMaintenance` on the SQLite file store, through the protocol as `moose store init|check|
/// rotate-key` uses it (MoosePostgresTests' `Maintenance` suite does the same on PostgreSQL).
struct StoreMaintenanceTests {
    static func session(_ access: String) -> OAuthSession {
        OAuthSession(issuer: "https://id.example", clientID: "app", tokens: TokenSet(accessToken: access))
    }

    @Test func prepareCheckRotateAndFindATamperedSession() async throws {
        let folder = try TempFolder()
        let path = folder.file("store.sqlite"), oldKey = folder.file("old.key"), newKey = folder.file("new.key")
        let file = EncryptedSessionStorage(store: try SecretStore(path: path, masterKey: .keyFile(oldKey)))
        let storage: any SessionStorage & SessionStoreMaintenance = file
        #expect(try await storage.prepareStore() == "store \(path) is ready; key OK")
        _ = try await storage.replace(Self.session("access-a"), key: "a")
        _ = try await storage.replace(Self.session("access-b"), key: "b")
        try file.store.put(bytes("not a session"), namespace: "app", name: "other")
        // The whole file is checked: the sessions and the app's own value.
        #expect(
            try await storage.checkStore()
                == SessionStoreCheck(lines: ["file: ok", "3 values open, 0 do not"], isHealthy: true))

        #expect(try await storage.rotateStoreDataKey() == "data key rotated; every value re-encrypted")
        #expect(try await storage.load("a")?.session.tokens.accessToken == "access-a")
        #expect(try await storage.rotateStoreMasterKey(to: .keyFile(newKey)) == "master key rotated")
        #expect(FileManager.default.fileExists(atPath: newKey), "the new key file was not made")
        #expect(try await storage.load("b")?.session.tokens.accessToken == "access-b")
        // Only the new key opens the file now.
        _ = expectStoreError(SecretStoreError.wrongKey) { _ = try SecretStore(path: path, masterKey: .keyFile(oldKey)) }
        let reopened: any SessionStoreMaintenance = EncryptedSessionStorage(
            store: try SecretStore(path: path, masterKey: .keyFile(newKey)))
        #expect(try await reopened.checkStore().isHealthy)

        // A session's sealed bytes copied onto another row do not open there: the report names the row
        // and the reason, never a value.
        try SQLiteConnection(path: path, mode: .readWrite).execute(
            """
            UPDATE secrets SET sealed = (SELECT sealed FROM secrets WHERE namespace='moose.session' AND name='a')
            WHERE namespace='moose.session' AND name='b'
            """)
        let report = try await reopened.checkStore()
        #expect(
            report
                == SessionStoreCheck(
                    lines: ["BAD  moose.session/b: tampered", "file: ok", "2 values open, 1 do not"], isHealthy: false))
        #expect(!report.lines.joined().contains("access-"))
    }
}
