import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §5: a mistyped command gets "did you mean", exit 2, and nothing on disk.
struct DidYouMeanTests {
    @Test(arguments: [
        ("logn", "login"), ("tokne", "token"), ("stauts", "status"), ("inpsect", "inspect"), ("prof", "profile")
    ])
    func aMistypedCommandGetsASuggestion(typed: String, meant: String) async throws {
        let (home, environment) = CLI.home("moose-typo")
        defer { try? FileManager.default.removeItem(at: home) }
        let result = try await CLI.run([typed], environment: environment)
        #expect(result.status == 2, "\(result.status) \(result.stderr)")
        #expect(result.stderr.contains("did you mean `moose \(meant)`?"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: home.path), "a usage error created files")
    }

    @Test func aWordFarFromEveryCommandGetsNoGuess() async throws {
        let result = try await CLI.run(["xyzzyplugh"])
        #expect(result.status == 2)
        #expect(!result.stderr.contains("did you mean"), "\(result.stderr)")
    }
}
