import Foundation
import MooseOAuth
import MooseOAuthSystem
import Testing

struct ProfileFileTests {
    @Test func profilesHostsAndDefaultWithCRLFLines() throws {
        let text =
            "default = \"work\"\r\n# a comment\r\n[profiles.work]\r\nissuer = \"https://id.example.com\" # trailing\r\n"
            + "scopes = [\"openid\", 'profile']\r\n[profiles.\"odd name\"]\r\nclient_id = \"c\\u00e9\"\r\n[hosts]\r\n\"Git.Example.com\" = \"work\"\r\n"
        let config = try ProfileFile(parsing: Array(text.utf8))
        #expect(config.defaultProfile == "work")
        #expect(config.profiles["work"]?.issuer == "https://id.example.com")
        #expect(config.profiles["work"]?.scopes == ["openid", "profile"])
        #expect(config.profiles["odd name"]?.clientID == "c\u{e9}")
        #expect(config.profile(forHost: "git.example.com:443") == "work" && config.profile(forHost: "other") == nil)
        #expect(try ProfileFile(parsing: Array(config.serialized.utf8)) == config)
    }

    /// `moose profile use` sets the default and keeps the rest of the file byte for byte: comments,
    /// order, spacing, line ends, and a comment after the old default.
    @Test func settingTheDefaultKeepsEveryOtherByte() throws {
        let body =
            "# my profiles\n\n[profiles.work]   # the office\nissuer = \"https://id.example.com\"\nclient_id = \"app\"\n"
        func edited(_ text: String, _ name: String = "work") throws -> String {
            String(decoding: try ProfileFile.settingDefault(name, in: Array(text.utf8)), as: UTF8.self)
        }
        #expect(try edited(body) == "default = \"work\"\n\n" + body)
        // Only the old value is replaced: indentation, spacing and a comment after it stay.
        #expect(
            try edited("default = 'old'   # chosen by hand\n" + body) == "default = \"work\"   # chosen by hand\n"
                + body)
        #expect(try edited("  default=\"a#b\" # \"x\"\n" + body, "x\"y") == "  default=\"x\\\"y\" # \"x\"\n" + body)
        #expect(try edited("\"default\" = \"a\\\"=b\"\r\n" + body) == "\"default\" = \"work\"\r\n" + body)
        let crlf = body.replacing("\n", with: "\r\n")
        #expect(try edited(crlf) == "default = \"work\"\r\n\r\n" + crlf)
        #expect(try edited("") == "default = \"work\"\n")
        #expect(try edited("[hosts]\n\"a\" = \"b\"") == "default = \"work\"\n\n[hosts]\n\"a\" = \"b\"")
        // A file that does not parse is not rewritten; an edit past the parser's limits says which.
        #expect(throws: ProfileFile.ParseError.self) { try edited("[profiles.a]\nissuer = 3\n") }
        let long = "default = \"" + String(repeating: "a", count: 8170) + "\"\n"
        let tooLong = #expect(throws: ProfileFile.ParseError.self) {
            try ProfileFile.settingDefault(String(repeating: "b", count: 8190), in: Array(long.utf8))
        }
        #expect(tooLong?.line == 1 && tooLong?.message == "the line is too long", "\(String(describing: tooLong))")
    }

    /// Set in a file that is a link not pointing anywhere yet: the file it names is made (with its
    /// folder), the link stays; a file that does not parse is left as it is, with the line said.
    @Test func settingTheDefaultInAFileFollowsItsLink() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-setdefault-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let link = folder.appendingPathComponent("config.toml").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "dots/moose.toml")
        try ProfileFile.setDefault("work", inFileAt: link)
        let target = folder.appendingPathComponent("dots/moose.toml")
        #expect(try String(contentsOf: target, encoding: .utf8) == "default = \"work\"\n")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == "dots/moose.toml")

        try Data("# mine\n[profiles.a]\nissuer = 3\n".utf8).write(to: target)
        do {
            try ProfileFile.setDefault("a", inFileAt: link)
            Issue.record("a file that does not parse was rewritten")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.invalidConfiguration && error.message.contains("line 3"), "\(error)")
        }
        #expect(try String(contentsOf: target, encoding: .utf8) == "# mine\n[profiles.a]\nissuer = 3\n")

        // A file that parses but cannot be written (its temporary sibling's name is too long): a fault
        // of the file system, not of the configuration; the file is left as it was.
        let long = folder.appendingPathComponent(String(repeating: "l", count: 250) + ".toml")
        try Data("[profiles.a]\n".utf8).write(to: long)
        do {
            try ProfileFile.setDefault("a", inFileAt: long.path)
            Issue.record("a file whose sibling cannot be made was written")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.fileSystem && error.message.contains("cannot write"), "\(error)")
        }
        #expect(try String(contentsOf: long, encoding: .utf8) == "[profiles.a]\n")
    }

    /// Host names ignore case, so two that differ only in case are one host given twice: refused with
    /// the later line (which one won depended on dictionary order before).
    @Test func aHostGivenTwiceInAnotherCaseIsRefused() {
        let text = "[hosts]\n\"Git.Example.com\" = \"a\"\n\"git.example.com\" = \"b\"\n"
        let twice = #expect(throws: ProfileFile.ParseError.self) { _ = try ProfileFile(parsing: Array(text.utf8)) }
        #expect(
            twice?.line == 3 && twice?.message == "host \"git.example.com\" is given twice (host names ignore case)",
            "\(String(describing: twice))")
    }

    @Test(arguments: [
        ("[profiles.a]\nissuer = 3\n", 2, "must be a string"),
        ("x = \"y\"\n", 1, "unknown top-level key"),
        ("[profiles.a]\nissuer = \"open\n", 2, "not closed"),
        ("[profiles.a]\nscopes = [\"a\",\n", 2, "one line"),
        ("[[profiles]]\n", 1, "arrays of tables"),
        ("[profiles.a]\nissuer = \"a\"\nissuer = \"b\"\n", 3, "twice"),
        ("[profiles.a]\nissuer = \"\\q\"\n", 2, "unknown escape"),
        ("[profiles.a]\nissuer = \"bell\u{7}\"\n", 2, "control characters"),
        ("[profiles.a]\nbogus = \"x\"\n", 2, "unknown profile key")
    ])
    func refusalsNameTheLine(text: String, line: Int, words: String) {
        do {
            _ = try ProfileFile(parsing: Array(text.utf8))
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.line == line && error.message.contains(words), "\(error)")
        }
    }

    @Test func aProfileWithIssuerAndClientIsAPlan() throws {
        let text = """
            default = "work"
            [profiles.work]
            issuer = "https://id.example.com"
            client_id = "cli"
            resource = "https://api.example.com"
            dpop = "ES256"
            [profiles.half]
            issuer = "https://id.example.com"
            """
        let file = try ProfileFile(parsing: Array(text.utf8))
        let plan = try #require(file.plan())
        #expect(plan.name == "work" && plan.issuer == "https://id.example.com" && plan.clientID == "cli")
        #expect(plan.scopes == ["openid", "profile", "email"] && plan.grant == .authorizationCode(loopbackPort: nil))
        #expect(plan.resource == "https://api.example.com" && plan.dpop == "ES256")
        #expect(file.plan(for: "half") == nil, "a profile without client_id is no plan")
        #expect(file.plan(for: "absent") == nil)
    }

    @Test func theFileIsWhereMooseLooks() {
        #expect(ProfileFile.defaultPath(environment: ["MOOSE_CONFIG": "/etc/m.toml", "HOME": "/h"]) == "/etc/m.toml")
        #expect(
            ProfileFile.defaultPath(environment: ["XDG_CONFIG_HOME": "/x", "HOME": "/h"]) == "/x/moose/config.toml")
        #expect(ProfileFile.defaultPath(environment: ["HOME": "/h"]) == "/h/.config/moose/config.toml")
        #expect(ProfileFile.defaultPath(environment: ["HOME": "relative"]) == nil)
    }

    @Test func loadingNamesTheFileAndLine() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("profile-file-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("config.toml").path
        #expect(try ProfileFile.load(path: path) == ProfileFile(), "no file is an empty configuration")
        try Data("[profiles.a]\nissuer = 3\n".utf8).write(to: URL(fileURLWithPath: path))
        do {
            _ = try ProfileFile.load(path: path)
            Issue.record("a bad file loaded")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.invalidConfiguration)
            #expect(error.message.contains(path) && error.message.contains("line 2"), "\(error.message)")
        }
    }
}
