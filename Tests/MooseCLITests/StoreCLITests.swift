import Foundation
import MooseTestSupport
import Testing

/// `moose store …` as a whole process, with XDG folders in a temporary directory.
struct StoreCLITests {
    let home: URL
    let environment: [String: String]

    init() throws {
        (home, environment) = CLI.home("moose-cli-store")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
    }

    var storePath: String { home.appendingPathComponent("data/moose/store.sqlite").path }

    func moose(_ arguments: [String], stdin: String? = nil) async throws -> CLIResult {
        try await CLI.run(["store"] + arguments, stdin: stdin.map { Data($0.utf8) }, environment: environment)
    }

    @Test func initPutGetListRemoveAndRotate() async throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let created = try await moose(["init"])
        #expect(created.status == 0, "\(created.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: storePath)
        #expect(attributes[.posixPermissions] as? Int == 0o600)
        let keyPath = home.appendingPathComponent("config/moose/store.key").path
        #expect(try FileManager.default.attributesOfItem(atPath: keyPath)[.posixPermissions] as? Int == 0o600)

        await #expect(try moose(["put", "refresh_token", "--namespace", "session"], stdin: "r-secret-1").status == 0)
        let got = try await moose(["get", "refresh_token", "--namespace", "session"])
        #expect(got.status == 0 && got.stdout == "r-secret-1")
        let list = try await moose(["list", "--json"])
        #expect(list.stdout.contains("\"name\":\"refresh_token\"") && !list.stdout.contains("r-secret-1"))
        await #expect(try moose(["rotate-key"]).status == 0)
        await #expect(try moose(["rotate-key", "--master"]).status == 0)
        await #expect(try moose(["get", "refresh_token", "--namespace", "session"]).stdout == "r-secret-1")
        await #expect(try moose(["check"]).status == 0)
        await #expect(try moose(["rm", "refresh_token", "--namespace", "session"]).status == 0)
        let missing = try await moose(["get", "refresh_token", "--namespace", "session"])
        #expect(missing.status == 1 && missing.stderr.contains("no value"))
        // Values never come from the command line.
        await #expect(try moose(["put", "name", "value-on-argv"]).status == 2)
    }

    @Test func wrongKeyAndTamperedRowsAreReported() async throws {
        defer { try? FileManager.default.removeItem(at: home) }
        await #expect(try moose(["put", "a"], stdin: "alpha").status == 0)
        await #expect(try moose(["put", "b"], stdin: "beta").status == 0)
        // Flip one ciphertext byte of row "b" with Python's sqlite3 (as an attacker with the file would).
        let script = """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            sealed = bytearray(db.execute("SELECT sealed FROM secrets WHERE name='b'").fetchone()[0])
            sealed[20] ^= 1
            db.execute("UPDATE secrets SET sealed=? WHERE name='b'", (bytes(sealed),))
            db.commit()
            """
        let python = TestProcess()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", script, storePath]
        try python.run()
        python.waitUntilExit()
        #expect(python.terminationStatus == 0)
        let check = try await moose(["check"])
        #expect(check.status == 1)
        #expect(check.stdout.contains("BAD  default/b: tampered"))
        #expect(check.stdout.contains("1 values open, 1 do not"))
        await #expect(try moose(["get", "a"]).stdout == "alpha")
        let tampered = try await moose(["get", "b"])
        #expect(tampered.status == 1 && tampered.stderr.contains("tampered") && !tampered.stderr.contains("beta"))
        // Another key: wrongKey, and the store is not touched.
        let otherKey = home.appendingPathComponent("other.key").path
        let wrong = try await CLI.run(["store", "get", "a", "--key-file", otherKey], environment: environment)
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("keyUnavailable") || wrong.stderr.contains("wrongKey"))
        let fresh = try await CLI.run(
            ["store", "init", "--store", home.appendingPathComponent("x.sqlite").path, "--key-file", otherKey],
            environment: environment)
        #expect(fresh.status == 0)
        let wrongKey = try await CLI.run(["store", "get", "a", "--key-file", otherKey], environment: environment)
        #expect(wrongKey.stderr.contains("wrongKey"))
    }
}
