import Foundation
import MooseTestSupport
import Testing

/// Issue "The second hour" §2: every store fault names the store's path and the next step, and a
/// still-valid cached token is printed when the store can be read but not written.
struct StoreFaultCLITests {
    /// Whether `chattr +i` works on a file in the temporary folder (root ignores permission bits, so an
    /// immutable file is how a test makes a store unwritable; some file systems have no such flag).
    static let immutableFilesWork: Bool = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("moose-chattr-\(UUID().uuidString)")
            .path
        guard FileManager.default.createFile(atPath: path, contents: Data("x".utf8)) else { return false }
        defer {
            _ = chattr("-i", path)
            try? FileManager.default.removeItem(atPath: path)
        }
        return chattr("+i", path) && !FileManager.default.isWritableFile(atPath: path)
    }()

    @discardableResult
    static func chattr(_ flag: String, _ path: String) -> Bool {
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
        process.arguments = [flag, path]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// A file of random bytes where the store should be, and a folder in its place: each command says
    /// which file, what is wrong and what to do — and the file is left as it was.
    @Test func aForeignFileOrAFolderWhereTheStoreShouldBeIsNamedWithTheNextStep() async throws {
        let (home, environment) = CLI.home("moose-cli-foreign-store")
        defer { try? FileManager.default.removeItem(at: home) }
        let folder = home.appendingPathComponent("data/moose")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let store = folder.appendingPathComponent("store.sqlite").path
        let noise = Data((0..<4096).map { _ in UInt8.random(in: 0...255) })
        #expect(FileManager.default.createFile(atPath: store, contents: noise))
        for arguments in [
            ["status"], ["token"], ["store", "check"],
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"]
        ] {
            let result = try await CLI.run(arguments, environment: environment, timeout: 60)
            #expect(result.status == 1, "\(arguments): \(result.stdout) \(result.stderr)")
            #expect(
                result.stderr.contains(store) && result.stderr.contains("damaged or not a Moose store")
                    && result.stderr.contains("restore it from a backup"), "\(arguments): \(result.stderr)")
        }
        #expect(FileManager.default.contents(atPath: store) == noise, "the foreign file was changed")

        try FileManager.default.removeItem(atPath: store)
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
        let result = try await CLI.run(["status"], environment: environment, timeout: 60)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(
            result.stderr.contains("\(store) is a folder, not a store file") && result.stderr.contains("[io]"),
            "\(result.stderr)")
    }

    /// An immutable store (it can be read, not written): `moose token` still prints the valid cached
    /// token; a refresh, which must write first, fails before the provider sees anything and names the
    /// file, why and what to check.
    @Test(.enabled(if: immutableFilesWork, "chattr +i does not work in the temporary folder here"))
    func anUnwritableStoreStillGivesItsValidTokenAndARefreshNamesTheFile() async throws {
        let (home, environment) = CLI.home("moose-cli-immutable-store")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let secret = home.appendingPathComponent("secret")
        try Data("moose-service-secret\n".utf8).write(to: secret)
        let login = try await CLI.run(
            [
                "login", "--client-credentials", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-service",
                "--client-secret-file", secret.path
            ], environment: environment, timeout: 60)
        try #require(login.status == 0, "\(login.stderr)")
        let first = try await CLI.run(["token"], environment: environment)
        try #require(first.status == 0, "\(first.stderr)")

        let store = home.appendingPathComponent("data/moose/store.sqlite").path
        try #require(Self.chattr("+i", store))
        defer { Self.chattr("-i", store) }
        let cached = try await CLI.run(["token"], environment: environment)
        #expect(cached.status == 0 && cached.stdout == first.stdout, "\(cached.stdout) \(cached.stderr)")

        let refresh = try await CLI.run(["refresh"], environment: environment, timeout: 60)
        #expect(refresh.status == 1, "\(refresh.stdout) \(refresh.stderr)")
        #expect(
            refresh.stderr.contains("no refresh token was spent") && refresh.stderr.contains(store)
                && refresh.stderr.contains("cannot be written") && refresh.stderr.contains("lsattr"),
            "\(refresh.stderr)")
        Self.chattr("-i", store)
        let after = try await CLI.run(["token"], environment: environment)
        #expect(after.status == 0 && after.stdout == first.stdout, "the session was changed: \(after.stderr)")
    }
}
