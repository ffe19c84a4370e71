import Foundation
import MooseOAuth
import MooseOAuthSystem
import Testing

/// `KeptPlans`: the plan each profile last logged in with, kept per store in a JSON file that holds no
/// secret, read back as it was written; a file that is not one is never overwritten.
struct KeptPlansTests {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-kept-\(UUID().uuidString)")

    func plan(_ name: String, issuer: String = "https://id.example.com") -> SessionPlan {
        SessionPlan(
            name: name, issuer: issuer, clientID: "cli", scopes: ["openid"],
            credential: .secretFile("/etc/moose/secret", sending: .post))
    }

    @Test func plansAreKeptPerStoreAndReadBackAsWritten() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let kept = KeptPlans.besideConfig(folder.appendingPathComponent("moose/config.toml").path)
        #expect(kept.path == folder.appendingPathComponent("moose/profiles.json").path)
        #expect(kept.plans(forStore: "/a.sqlite").isEmpty)
        try kept.keep(plan("work"), forStore: "/a.sqlite")
        try kept.keep(plan("play", issuer: "https://id.example.org"), forStore: "/a.sqlite")
        try kept.keep(plan("work", issuer: "https://other.example.com"), forStore: "/b.sqlite")
        #expect(kept.plan("work", forStore: "/a.sqlite") == plan("work"))
        #expect(kept.plan("play", forStore: "/a.sqlite")?.issuer == "https://id.example.org")
        #expect(kept.plan("work", forStore: "/b.sqlite")?.issuer == "https://other.example.com")
        #expect(kept.plan("work", forStore: "/c.sqlite") == nil)
        let mode = try FileManager.default.attributesOfItem(atPath: kept.path)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        // References only: the secret's path, never a secret.
        let text = try String(contentsOfFile: kept.path, encoding: .utf8)
        #expect(text.contains("/etc/moose/secret") && text.contains("\"version\" : 1"), "\(text)")
    }

    @Test func aPostgreSQLStoresSectionHasNoPassword() {
        #expect(
            KeptPlans.section(forStore: "postgres://moose:s3cret@db.example.com/moose")
                == "postgres://moose@db.example.com/moose")
        #expect(KeptPlans.section(forStore: "POSTGRESQL://u@db/m") == "POSTGRESQL://u@db/m")
        #expect(KeptPlans.section(forStore: "/home/me/a:b@c.sqlite") == "/home/me/a:b@c.sqlite")
    }

    @Test func aDamagedEntryIsSkippedAndAForeignFileIsNeverOverwritten() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let kept = KeptPlans(path: folder.appendingPathComponent("profiles.json").path)
        try kept.keep(plan("work"), forStore: "/a.sqlite")
        var text = try String(contentsOfFile: kept.path, encoding: .utf8)
        text = text.replacing("\"stores\" : {", with: "\"stores\" : {\"/a.sqlite2\": 3, ")
        try Data(text.utf8).write(to: URL(fileURLWithPath: kept.path))
        #expect(kept.plan("work", forStore: "/a.sqlite") == plan("work"))

        let foreign = Data("not json".utf8)
        try foreign.write(to: URL(fileURLWithPath: kept.path))
        #expect(kept.plans(forStore: "/a.sqlite").isEmpty)
        #expect(throws: OAuthError.self) { try kept.keep(plan("work"), forStore: "/a.sqlite") }
        #expect(try Data(contentsOf: URL(fileURLWithPath: kept.path)) == foreign)
    }
}
