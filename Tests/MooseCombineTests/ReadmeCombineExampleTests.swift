#if MooseCombine
import Foundation
import MooseCombine
import MooseHTTP
import MooseOAuth
import MooseTestSupport
import OpenCombineShim
import Synchronization
import Testing

// README, "Combine": the example below is quoted there verbatim (between the markers), and run here
// against the real test provider.
// BEGIN README COMBINE EXAMPLE
struct Me: Endpoint {
    let baseURL: URL
    var path: String { "/userinfo/" }
    var requiresAuthentication: Bool { true }      // the manager's middleware attaches the token
}
struct Profile: Decodable, Sendable { let sub: String; let preferred_username: String? }

final class ProfileModel {
    private(set) var name = ""
    private(set) var needsLogin = false
    private var cancellables = Set<AnyCancellable>()

    init(moose: TokenManager, api: APIClient, apiBase: URL) {
        moose.eventsPublisher                               // refreshed, refresh failed, needs a new login…
            .sink { [weak self] event in if case .needsReauthentication = event { self?.needsLogin = true } }
            .store(in: &cancellables)
        moose.accessTokenPublisher()                        // one refresh, however many subscribe
            .flatMap { _ in api.publisher(for: Me(baseURL: apiBase), as: Profile.self) }
            .sink(receiveCompletion: { completion in
                      if case .failure(let error) = completion { print("could not load the profile: \(error)") }
                  },
                  receiveValue: { [weak self] profile in self?.name = profile.preferred_username ?? profile.sub })
            .store(in: &cancellables)
    }
}
// END README COMBINE EXAMPLE

struct ReadmeCombineExampleTests {
    @Test func theReadmeExampleLoadsTheProfile() async throws {
        let transport = TokenRequests()
        let (moose, _) = try await loggedInManager(transport)
        let api = APIClient(transport: transport, middlewares: [moose.middleware])
        let model = ProfileModel(moose: moose, api: api, apiBase: URL(string: TestIdentityProvider.issuer)!)
        await eventually(15) { !model.name.isEmpty }
        #expect(model.name == "1")   // scope openid only: UserInfo has just sub
        #expect(!model.needsLogin)
    }

    @Test func theReadmeQuotesTheExampleVerbatim() throws {
        let root = LocalServer.repositoryRoot
        let source = try String(contentsOfFile: root + "/Tests/MooseCombineTests/ReadmeCombineExampleTests.swift", encoding: .utf8)
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        let begin = try #require(source.range(of: "// BEGIN README COMBINE EXAMPLE\n"))
        let end = try #require(source.range(of: "// END README COMBINE EXAMPLE"))
        let example = String(source[begin.upperBound..<end.lowerBound])
        #expect(readme.contains(example), "README's Combine example differs from the tested one")
    }
}
#endif
