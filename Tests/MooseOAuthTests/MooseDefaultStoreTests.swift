import Foundation
import MooseSQLiteStorage
import MooseSecretStore
import Testing

/// `moose`'s default store and key, as the library finds them for an app (`EncryptedSessionStorage.moose`):
/// the same rules as the CLI's (`StoreOptions`), never a path under the current directory.
@Suite struct MooseDefaultStoreTests {
    @Test func theStoreAndKeyAreFoundWhereMooseKeepsThem() {
        let cases: [(environment: [String: String], store: String, key: String)] = [
            (
                ["HOME": "/home/ada"], "/home/ada/.local/share/moose/store.sqlite",
                "key file /home/ada/.config/moose/store.key"
            ),
            (
                ["HOME": "/home/ada", "XDG_DATA_HOME": "/data", "XDG_CONFIG_HOME": "/config"],
                "/data/moose/store.sqlite", "key file /config/moose/store.key"
            ),
            (
                ["HOME": "/home/ada", "MOOSE_STORE": "/srv/moose.sqlite", "MOOSE_STORE_KEY": "c2VjcmV0"],
                "/srv/moose.sqlite", "environment variable MOOSE_STORE_KEY"
            )
        ]
        for (environment, store, key) in cases {
            #expect(EncryptedSessionStorage.mooseStorePath(environment: environment) == store, "\(environment)")
            #expect(EncryptedSessionStorage.mooseMasterKey(environment: environment)?.description == key)
        }
        // Relative or empty bases are not used: never a store or a key under the current directory.
        for environment in [["HOME": "relative"], ["XDG_DATA_HOME": "data", "XDG_CONFIG_HOME": ""], [:]] {
            #expect(EncryptedSessionStorage.mooseStorePath(environment: environment) == nil)
            #expect(EncryptedSessionStorage.mooseMasterKey(environment: environment) == nil)
            #expect(throws: SecretStoreError.self) { _ = try EncryptedSessionStorage.moose(environment: environment) }
        }
    }

    @Test func aPostgreSQLStoreOrAMissingFileIsSaidNotMade() throws {
        #expect(throws: SecretStoreError.self) {
            _ = try EncryptedSessionStorage.moose(environment: [
                "HOME": "/home/ada", "MOOSE_STORE": "postgres://app@db/app"
            ])
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-default-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let environment = ["HOME": folder.path]
        #expect(throws: SecretStoreError.self) { _ = try EncryptedSessionStorage.moose(environment: environment) }
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(".local").path))
        _ = try EncryptedSessionStorage.moose(environment: environment, create: true)
        #expect(
            FileManager.default.fileExists(
                atPath: folder.appendingPathComponent(".local/share/moose/store.sqlite").path))
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent(".config/moose/store.key").path))
    }
}
