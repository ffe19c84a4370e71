#if MoosePostgres
import Foundation
import MooseOAuth
import MoosePostgres
import MooseSealing
import PostgresNIO
import Testing

extension PostgresTests {
    /// `SessionStoreMaintenance` on PostgreSQL, through the protocol as `moose store init|check|rotate-key`
    /// uses it (MooseSecretStoreTests' `StoreMaintenanceTests` does the same on the SQLite file store).
    @Suite struct Maintenance {
        /// A row a logout left with only the plan (`OAuthSession.isLoggedOut`) opens, but is not counted
        /// as a session: `moose store check` and `rotate-key` say it apart.
        @Test func aKeptPlanIsNotCountedAsASession() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let configuration = try PostgresStorageConfiguration(url: try PG.direct(schema: schema))
            let version = PostgresSessionStorage.schemaVersion
            let database = "database: \(configuration.redactedURL), schema \(schema) version \(version)"
            try await PostgresSessionStorage.withRunning(configuration, masterKey: try randomKey()) { postgres in
                let storage: any SessionStorage & SessionStoreMaintenance = postgres
                _ = try await storage.prepareStore()
                _ = try await storage.replace(session("access-a"), key: "a")
                let kept = OAuthSession(
                    issuer: "https://id.example.com", clientID: "pg", tokens: TokenSet(accessToken: ""),
                    state: .needsReauthentication)
                #expect(kept.isLoggedOut)
                _ = try await storage.replace(kept, key: "b")
                #expect(
                    try await storage.checkStore()
                        == SessionStoreCheck(
                            lines: [database, "1 sessions open, 1 logged out with the plan kept, 0 do not (0 deleted)"],
                            isHealthy: true))
                // `moose store rotate-key` counts them apart too (both rows are sealed again).
                #expect(
                    try await storage.rotateStoreDataKey()
                        == "data key rotated; 1 sessions and 1 kept plans sealed again")
                #expect(try await storage.load("b")?.session.isLoggedOut == true)
            }
        }

        @Test func prepareCheckRotateAndFindATamperedSession() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let configuration = try PostgresStorageConfiguration(url: try PG.direct(schema: schema))
            let oldKey = try randomKey(), newKey = try randomKey()
            let version = PostgresSessionStorage.schemaVersion
            let database = "database: \(configuration.redactedURL), schema \(schema) version \(version)"
            #expect(!configuration.redactedURL.contains(PG.password))
            try await PostgresSessionStorage.withRunning(configuration, masterKey: oldKey) { postgres in
                let storage: any SessionStorage & SessionStoreMaintenance = postgres
                #expect(
                    try await storage.prepareStore()
                        == "store \(configuration.redactedURL) is ready (schema \(schema), version \(version)); key OK")
                _ = try await storage.replace(session("access-a"), key: "a")
                _ = try await storage.replace(session("access-b"), key: "b")
                _ = try await storage.replace(session("access-c"), key: "c")
                _ = try await storage.delete("c")
                #expect(
                    try await storage.checkStore()
                        == SessionStoreCheck(
                            lines: [database, "2 sessions open, 0 do not (1 deleted)"], isHealthy: true))
                #expect(try await storage.rotateStoreDataKey() == "data key rotated; 2 sessions sealed again")
                #expect(try await storage.load("a")?.session.tokens.accessToken == "access-a")
                #expect(
                    try await storage.rotateStoreMasterKey(to: newKey)
                        == "master key rotated; every machine that uses this store needs the new key")
                #expect(try await storage.load("b")?.session.tokens.accessToken == "access-b")
            }
            // Only the new key opens the store now.
            try await expectFailure({
                try await PostgresSessionStorage.withRunning(configuration, masterKey: oldKey) { postgres in
                    _ = try await postgres.prepareStore()
                }
            }) { storageError($0)?.code == PostgresStorageError.wrongKey }

            // A flipped byte in one session: the report names the row and the reason, never a value, and a
            // rotation over it fails.
            _ = try await PG.sql(
                "UPDATE \(unescaped: "\"\(schema)\".sessions") SET sealed = set_byte(sealed, 30, get_byte(sealed, 30) # 4) WHERE key = 'b'"
            )
            try await PostgresSessionStorage.withRunning(configuration, masterKey: newKey) { postgres in
                let storage: any SessionStoreMaintenance = postgres
                let report = try await storage.checkStore()
                #expect(
                    report
                        == SessionStoreCheck(
                            lines: [
                                "BAD  moose.session/b: tampered", database, "1 sessions open, 1 do not (1 deleted)"
                            ],
                            isHealthy: false))
                #expect(!report.lines.joined().contains("access-"))
                try await expectFailure({ _ = try await storage.rotateStoreDataKey() }) {
                    storageError($0)?.code == PostgresStorageError.tampered
                }
            }
        }
    }
}
#endif
