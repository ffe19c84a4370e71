import Foundation
@testable import MooseCLI
import Testing

struct ConfigFileTests {
    @Test func profilesHostsAndDefaultWithCRLFLines() throws {
        let text =
            "default = \"work\"\r\n# a comment\r\n[profiles.work]\r\nissuer = \"https://id.example.com\" # trailing\r\n"
            + "scopes = [\"openid\", 'profile']\r\n[profiles.\"odd name\"]\r\nclient_id = \"c\\u00e9\"\r\n[hosts]\r\n\"Git.Example.com\" = \"work\"\r\n"
        let config = try ConfigFile(parsing: Array(text.utf8))
        #expect(config.defaultProfile == "work")
        #expect(config.profiles["work"]?.issuer == "https://id.example.com")
        #expect(config.profiles["work"]?.scopes == ["openid", "profile"])
        #expect(config.profiles["odd name"]?.clientID == "c\u{e9}")
        #expect(config.profile(forHost: "git.example.com:443") == "work" && config.profile(forHost: "other") == nil)
        #expect(try ConfigFile(parsing: Array(config.serialized.utf8)) == config)
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
            _ = try ConfigFile(parsing: Array(text.utf8))
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.line == line && error.message.contains(words), "\(error)")
        }
    }
}
