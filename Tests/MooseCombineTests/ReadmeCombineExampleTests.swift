#if MooseCombine
import Foundation
import MooseCombine
import MooseHTTP
import MooseOAuth
import MooseTestSupport
import OpenCombineShim
import Synchronization
import Testing

// README, "Combine": the example in ReadmeCombineExample.swift (the whole file, imports included) is
// quoted there verbatim, and run here against the real test provider.

struct ReadmeCombineExampleTests {
    @Test func theReadmeExampleLoadsTheProfile() async throws {
        let transport = TokenRequests()
        let (moose, _) = try await loggedInManager(transport)
        let api = APIClient(transport: transport, middlewares: [moose.middleware])
        let model = ProfileModel(moose: moose, api: api, apiBase: URL(string: TestIdentityProvider.issuer)!)
        await eventually(15) { !model.name.isEmpty }
        #expect(model.name == "1") // scope openid only: UserInfo has just sub
        #expect(!model.needsLogin)
    }

    @Test func theReadmeQuotesTheExampleVerbatim() throws {
        let root = LocalServer.repositoryRoot
        let file = try String(
            contentsOfFile: root + "/Tests/MooseCombineTests/ReadmeCombineExample.swift", encoding: .utf8)
        // The file without its first line (`#if MooseCombine`, the trait) and its last (`#endif`).
        var lines = file.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first?.hasPrefix("#if MooseCombine") == true && lines.dropLast().last == "#endif")
        lines = Array(lines.dropFirst().dropLast(2))
        let example = lines.joined(separator: "\n") + "\n"
        let readme = try String(contentsOfFile: root + "/docs/adapters.md", encoding: .utf8)
        #expect(
            readme.contains("```swift\n" + example + "```\n"),
            "docs/adapters.md's Combine example differs from the tested one")
    }
}
#endif
