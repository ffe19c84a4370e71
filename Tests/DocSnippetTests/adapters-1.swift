// docs/adapters.md, ```swift block 1: the region is quoted there word for word (DocSnippetTests).
#if MooseCombine
import Foundation
import MooseCombine
import MooseHTTP
import MooseOAuth
import OpenCombineShim

enum Adapters1 {
    // snippet begins
    struct Me: Endpoint {
        let baseURL: URL
        var path: String { "/userinfo/" }
        var requiresAuthentication: Bool { true } // the manager's middleware attaches the token
    }
    struct Profile: Decodable, Sendable { let sub: String; let preferred_username: String? }

    final class ProfileModel {
        private(set) var name = ""
        private(set) var needsLogin = false
        private var cancellables = Set<AnyCancellable>()

        init(moose: TokenManager, api: APIClient, apiBase: URL) {
            moose.eventsPublisher // refreshed, refresh failed, needs a new login…
                .sink { [weak self] event in if case .needsReauthentication = event { self?.needsLogin = true } }
                .store(in: &cancellables)
            moose.accessTokenPublisher() // one refresh, however many subscribe
                .flatMap { _ in api.publisher(for: Me(baseURL: apiBase), as: Profile.self) }
                .sink(
                    receiveCompletion: { completion in
                        if case .failure(let error) = completion { print("could not load the profile: \(error)") }
                    },
                    receiveValue: { [weak self] profile in self?.name = profile.preferred_username ?? profile.sub }
                )
                .store(in: &cancellables)
        }
    }

    // A POST needs nothing more than the imports above: MooseHTTP re-exports swift-http-types' vocabulary.
    struct Rename: Endpoint {
        let baseURL: URL
        let name: String
        var path: String { "/me/name" }
        var method: HTTPRequest.Method { .post }
        var body: EndpointBody { .form([("name", name)]) }
        var requiresAuthentication: Bool { true }
    }
    // snippet ends
}
#endif
