import Foundation
@testable import MooseCLI
import MooseOAuth
import Testing

/// Issue "Nothing a person set up is lost" §5: what a failed first login made is removed — the store,
/// its key and their folders — but never a store another first login (another process) stored a session
/// in meanwhile. A real store file and key file, in process.
struct FirstStoreTests {
    static func options(_ folder: URL) -> StoreOptions {
        StoreOptions(
            storePath: folder.appendingPathComponent("data/moose/store.sqlite").path,
            keyFile: folder.appendingPathComponent("config/moose/store.key").path, keyEnvironment: nil,
            passphraseFile: nil)
    }

    @Test func aFailedFirstLoginLeavesNothing() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-first-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let options = Self.options(folder)
        let made = FirstStore(options)
        let sessions = try CLISessions(options: options, create: true)
        #expect(FileManager.default.fileExists(atPath: try options.resolvedStorePath))
        made.undo(after: sessions)
        for path in ["data/moose/store.sqlite", "config/moose/store.key", "data", "config"] {
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(path).path), "\(path) left")
        }
    }

    @Test func aStoreThatHoldsASessionByNowIsKept() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-first-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let options = Self.options(folder)
        let made = FirstStore(options)
        let sessions = try CLISessions(options: options, create: true)
        // Another first login, finished meanwhile in another process, stored its session here.
        let other = try CLISessions(options: options, create: false)
        _ = try await other.storage.replace(
            OAuthSession(issuer: "https://id.example", clientID: "app", tokens: TokenSet(accessToken: "a")),
            key: "other")
        made.undo(after: sessions)
        #expect(FileManager.default.fileExists(atPath: try options.resolvedStorePath), "another login's store removed")
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("config/moose/store.key").path))
        #expect(try CLISessions(options: options, create: false).load("other") != nil)
    }
}
