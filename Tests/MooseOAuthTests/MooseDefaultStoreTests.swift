import Foundation
import MooseSQLiteStorage
import MooseSecretStore
import Testing

/// `moose`'s default store and key, as the library finds them for an app (`EncryptedSessionStorage.moose`):
/// the same rules as the CLI's (`StoreOptions`), never a path under the current directory.
@Suite struct MooseDefaultStoreTests {
    @Test func theStoreAndKeyAreFoundWhereMooseKeepsThem() {
        let home = ["HOME": "/home/ada"]
        #expect(
            EncryptedSessionStorage.mooseStorePath(environment: home) == "/home/ada/.local/share/moose/store.sqlite")
        guard
            case .keyFile("/home/ada/.config/moose/store.key")? = EncryptedSessionStorage.mooseMasterKey(
                environment: home)
        else {
            Issue.record("the key file is not under HOME's .config")
            return
        }
        let xdg = ["HOME": "/home/ada", "XDG_DATA_HOME": "/data", "XDG_CONFIG_HOME": "/config"]
        #expect(EncryptedSessionStorage.mooseStorePath(environment: xdg) == "/data/moose/store.sqlite")
        guard case .keyFile("/config/moose/store.key")? = EncryptedSessionStorage.mooseMasterKey(environment: xdg)
        else {
            Issue.record("XDG_CONFIG_HOME is not used")
            return
        }
        let explicit = ["HOME": "/home/ada", "MOOSE_STORE": "/srv/moose.sqlite", "MOOSE_STORE_KEY": "c2VjcmV0"]
        #expect(EncryptedSessionStorage.mooseStorePath(environment: explicit) == "/srv/moose.sqlite")
        guard case .environment("MOOSE_STORE_KEY")? = EncryptedSessionStorage.mooseMasterKey(environment: explicit)
        else {
            Issue.record("MOOSE_STORE_KEY is not used")
            return
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
