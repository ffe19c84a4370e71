import Foundation
import MooseSealing
import MooseSecretStore
import MooseTestSupport
import Testing

/// Issue "Without a person", §4: the master key in the freedesktop Secret Service, against a real one
/// (gnome-keyring-daemon on a private session bus, tools/secretsvc).
@Suite(.serialized)
struct SecretServiceKeyTests {
    static func folder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("moose-secretsvc-\(UUID().uuidString)")
    }

    @Test func aStoreWhoseKeyTheSecretServiceKeepsOpensAgainAndWithNothingElse() throws {
        guard SecretServiceBus.useInThisProcess() != nil else {
            Issue.record(Comment(rawValue: SecretServiceBus.unavailable)); return
        }
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("store.sqlite").path
        let name = "test-\(UUID().uuidString.prefix(8))"
        defer { _ = SecretServiceBus.secretTool(["clear", "application", "moose", "key", name]) }

        let store = try SecretStore(path: path, masterKey: .secretService(name), create: true)
        try store.put(Array("s3cret".utf8), namespace: "ci", name: "deploy")
        // The key is an item any Secret Service client sees: 32 bytes in base64, labelled.
        let (status, item) = SecretServiceBus.secretTool(["lookup", "application", "moose", "key", name])
        #expect(
            status == 0 && Data(base64Encoded: item.trimmingCharacters(in: .whitespacesAndNewlines))?.count == 32,
            "\(item)")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("store.key").path))

        let again = try SecretStore(path: path, masterKey: .secretService(name), create: false)
        #expect(try again.get(namespace: "ci", name: "deploy") == Array("s3cret".utf8))

        // Another item's key does not open it; it is refused as the wrong key, nothing is changed.
        let other = "test-\(UUID().uuidString.prefix(8))"
        defer { _ = SecretServiceBus.secretTool(["clear", "application", "moose", "key", other]) }
        #expect(
            SecretServiceBus.secretTool(
                ["store", "--label", "other", "application", "moose", "key", other],
                input: Data(repeating: 9, count: 32).base64EncodedString()
            ).0 == 0)
        let wrong = #expect(throws: SecretStoreError.self) {
            _ = try SecretStore(path: path, masterKey: .secretService(other), create: false)
        }
        #expect(wrong?.code == SecretStoreError.wrongKey, "\(String(describing: wrong))")
        #expect(
            try SecretStore(path: path, masterKey: .secretService(name), create: false).get(
                namespace: "ci", name: "deploy") != nil)
    }

    @Test func aMissingOrForeignItemIsAClearErrorNeverANewKey() throws {
        guard SecretServiceBus.useInThisProcess() != nil else {
            Issue.record(Comment(rawValue: SecretServiceBus.unavailable)); return
        }
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("store.sqlite").path
        let name = "test-\(UUID().uuidString.prefix(8))"
        defer { _ = SecretServiceBus.secretTool(["clear", "application", "moose", "key", name]) }
        _ = try SecretStore(path: path, masterKey: .secretService(name), create: true)

        // The item deleted (by a person, another tool): opening says so and makes no new key.
        #expect(SecretServiceBus.secretTool(["clear", "application", "moose", "key", name]).0 == 0)
        let missing = #expect(throws: SecretStoreError.self) {
            _ = try SecretStore(path: path, masterKey: .secretService(name), create: false)
        }
        #expect(
            missing?.code == SecretStoreError.keyUnavailable
                && missing?.message.contains("no Moose key \(name)") == true, "\(String(describing: missing))")
        #expect(
            SecretServiceBus.secretTool(["lookup", "application", "moose", "key", name]).1.isEmpty,
            "a key was made behind the caller's back")

        // An item that is not a Moose key (text, or another length): refused, with its name.
        #expect(
            SecretServiceBus.secretTool(
                ["store", "--label", "x", "application", "moose", "key", name], input: "hunter2"
            ).0 == 0)
        let foreign = #expect(throws: SecretStoreError.self) {
            _ = try SecretStore(path: path, masterKey: .secretService(name), create: false)
        }
        #expect(foreign?.message.contains("not a Moose master key") == true, "\(String(describing: foreign))")
        #expect(foreign.map { !"\($0)".contains("hunter2") } ?? false, "the item's text was quoted")
        // Names are bounded visible ASCII (they become D-Bus attributes).
        #expect(throws: SecretStoreError.self) {
            _ = try SecretStore(path: path, masterKey: .secretService("a b"), create: true)
        }
    }
}
