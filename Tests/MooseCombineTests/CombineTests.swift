#if MooseCombine
import Foundation
import MooseCombine
import MooseHTTP
import MooseOAuth
import MooseOAuthSystem
import MooseTestSupport
import MooseURLSession
import OpenCombineShim
import Synchronization
import Testing

/// Counts the token-endpoint requests that reach the real provider.
final class TokenRequests: HTTPTransport {
    let inner = URLSessionTransport()
    let count = Mutex(0)
    func send(_ request: APIRequest) async throws -> APIResponse {
        if (request.url?.path ?? "").hasPrefix("/token") { count.withLock { $0 += 1 } }
        return try await inner.send(request)
    }
    var value: Int { count.withLock { $0 } }
}

/// A manager logged in at the real test provider, its stored access token then made to look expired.
func loggedInManager(_ transport: TokenRequests) async throws -> (TokenManager, InMemorySessionStorage) {
    let storage = InMemorySessionStorage()
    let moose = TokenManager(
        issuer: TestIdentityProvider.issuer, clientID: "moose-cli", storage: storage, transport: transport,
        scopes: ["openid"])
    let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: URLSessionTransport())
    try await moose.login(
        with: .loopback(timeout: 30) { url in
            let redirect =
                URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first {
                    $0.name == "redirect_uri"
                }?.value ?? ""
            try await browser.visit(url, stopAt: redirect)
        })
    try await expire(storage)
    await moose.coordinator.didLogIn()
    return (moose, storage)
}

func expire(_ storage: InMemorySessionStorage, refreshToken: String? = nil) async throws {
    guard var session = try await storage.load("default")?.session else { return }
    session.tokens.expiresAt = Date().addingTimeInterval(-5)
    if let refreshToken { session.tokens.refreshToken = refreshToken }
    try await storage.replace(session, key: "default")
}

/// Waits (bounded) until `condition` holds.
func eventually(_ seconds: TimeInterval = 30, _ condition: () -> Bool) async {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition(), Date() < deadline { try? await Task.sleep(nanoseconds: 20_000_000) }
}

@Suite(.serialized)
struct CombineTests {
    @Test func aHundredSubscribersOnAnExpiredTokenCauseOneRefreshAndACancelledOneLeavesAlone() async throws {
        let transport = TokenRequests()
        let (moose, _) = try await loggedInManager(transport)
        let before = transport.value
        let received = Mutex<[Int: String]>([:])
        let completions = Mutex(0)
        var cancellables: [AnyCancellable] = []
        for index in 0..<100 {
            cancellables.append(
                moose.accessTokenPublisher().sink(
                    receiveCompletion: { completion in
                        if case .finished = completion { completions.withLock { $0 += 1 } }
                    },
                    receiveValue: { token in received.withLock { $0[index] = token.value } }))
        }
        cancellables[0].cancel() // one subscriber leaves while the refresh runs
        await eventually { received.withLock { $0.count } >= 99 && completions.withLock { $0 } >= 99 }
        try await Task.sleep(nanoseconds: 200_000_000)
        let values = received.withLock { $0 }
        #expect(values[0] == nil, "the cancelled subscriber got a token")
        #expect(
            values.count == 99 && Set(values.values).count == 1,
            "\(values.count) tokens, \(Set(values.values).count) distinct")
        #expect(transport.value - before == 1, "\(transport.value - before) refreshes at the provider")
        #expect(values.values.first == moose.coordinator.cachedAccessToken()?.value)
        withExtendedLifetime(cancellables) {}
    }

    @Test func aFailedRefreshReachesEverySubscriberWithTheSameError() async throws {
        let transport = TokenRequests()
        let (moose, storage) = try await loggedInManager(transport)
        try await expire(storage, refreshToken: "not-a-refresh-token-of-this-provider")
        await moose.coordinator.didLogIn()
        let errors = Mutex<[String]>([])
        var cancellables: [AnyCancellable] = []
        for _ in 0..<20 {
            cancellables.append(
                moose.accessTokenPublisher().sink(
                    receiveCompletion: { completion in
                        if case .failure(let error) = completion {
                            errors.withLock { $0.append(String(describing: error)) }
                        }
                    },
                    receiveValue: { _ in Issue.record("a token arrived for a refused refresh token") }))
        }
        await eventually { errors.withLock { $0.count } >= 20 }
        let seen = errors.withLock { $0 }
        #expect(seen.count == 20 && Set(seen).count == 1, "\(Set(seen))")
        #expect(
            seen.first?.contains("invalid_grant") == true || seen.first?.contains("needsLogin") == true,
            "\(seen.first ?? "")")
        withExtendedLifetime(cancellables) {}
    }

    @Test func everyEventsSubscriberGetsTheRefreshAndAPIClientRequestsDecode() async throws {
        let transport = TokenRequests()
        let (moose, _) = try await loggedInManager(transport)
        let first = Mutex<[String]>([]), second = Mutex<[String]>([])
        let a = moose.eventsPublisher.sink { event in
            if case .refreshed = event { first.withLock { $0.append("refreshed") } }
        }
        let b = moose.eventsPublisher.sink { event in
            if case .refreshed = event { second.withLock { $0.append("refreshed") } }
        }
        try await Task.sleep(nanoseconds: 100_000_000) // both listening
        _ = try await moose.accessToken()
        await eventually(10) { first.withLock { $0.count } == 1 && second.withLock { $0.count } == 1 }
        #expect(first.withLock { $0 } == ["refreshed"] && second.withLock { $0 } == ["refreshed"])

        // A request through APIClient (with the manager's middleware) as a publisher of a model.
        struct UserInfo: Endpoint {
            let baseURL: URL
            var path: String { "/userinfo/" }
            var requiresAuthentication: Bool { true }
        }
        struct Claims: Decodable, Sendable { let sub: String }
        let api = APIClient(transport: transport, middlewares: [moose.middleware])
        let subject = Mutex<String?>(nil)
        let c = api.publisher(for: UserInfo(baseURL: URL(string: TestIdentityProvider.issuer)!), as: Claims.self)
            .sink(receiveCompletion: { _ in }, receiveValue: { claims in subject.withLock { $0 = claims.sub } })
        await eventually(10) { subject.withLock { $0 } != nil }
        #expect(subject.withLock { $0 } == "1")
        // The endpoint's own error type for a non-2xx answer.
        struct Missing: Endpoint {
            let baseURL: URL
            var path: String { "/no-such-page/" }
            struct NotFound: Error, Decodable {}
            func serverError(for response: APIResponse) -> (any Error)? {
                response.status.code == 404 ? NotFound() : nil
            }
        }
        let failure = Mutex<(any Error)?>(nil)
        let d = api.publisher(for: Missing(baseURL: URL(string: TestIdentityProvider.issuer)!), as: Claims.self)
            .sink(
                receiveCompletion: { if case .failure(let error) = $0 { failure.withLock { $0 = error } } },
                receiveValue: { _ in })
        await eventually(10) { failure.withLock { $0 } != nil }
        #expect(failure.withLock { $0 } is Missing.NotFound)
        withExtendedLifetime([a, b, c, d]) {}
    }
}
#endif
