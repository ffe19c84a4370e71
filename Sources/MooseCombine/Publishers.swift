#if MooseCombine
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import MooseOAuth
public import MooseJWT
public import OpenCombineShim

// Combine publishers over Moose's async API, for apps built on Combine (Apple's Combine where it
// exists, OpenCombine on Linux). Each is a `TaskPublisher` over the async call: one implementation.

extension RefreshCoordinator {
    /// A valid access token (`accessToken(minimumValidity:)`): the cached one, or the one shared
    /// refresh — 100 subscribers on an expired token cause one refresh. Cancelling a subscription
    /// cancels only that subscriber's wait.
    public nonisolated func accessTokenPublisher(minimumValidity: TimeInterval? = nil) -> AnyPublisher<
        AccessToken, any Error
    > {
        TaskPublisher { try await self.accessToken(minimumValidity: minimumValidity) }.eraseToAnyPublisher()
    }

    /// `refresh(rejecting:)` for a token a server refused: refreshes only if it is still current.
    public nonisolated func refreshPublisher(rejecting token: AccessToken) -> AnyPublisher<AccessToken, any Error> {
        TaskPublisher { try await self.refresh(rejecting: token) }.eraseToAnyPublisher()
    }

    /// The coordinator's events (refreshed, refresh failed, needs a new login, logged out), from
    /// the moment each subscriber subscribes: every subscription of this publisher (store it and
    /// subscribe as often as you like) listens on its own, gets every event that happens after it
    /// subscribed and none from before, and cancelling it ends only its own listening. Never fails.
    public nonisolated var eventsPublisher: AnyPublisher<RefreshEvent, Never> {
        AsyncStreamPublisher { [self] in self.events }.eraseToAnyPublisher()
    }
}

extension TokenManager {
    /// A valid access token (see `RefreshCoordinator.accessTokenPublisher`).
    public func accessTokenPublisher(minimumValidity: TimeInterval? = nil) -> AnyPublisher<AccessToken, any Error> {
        coordinator.accessTokenPublisher(minimumValidity: minimumValidity)
    }

    /// `login(with:parameters:)`: the session summary once the user signed in.
    public func loginPublisher(with method: LoginMethod, parameters: AuthorizationParameters? = nil) -> AnyPublisher<
        SessionSummary, any Error
    > {
        TaskPublisher { try await self.login(with: method, parameters: parameters) }.eraseToAnyPublisher()
    }

    /// `logout()`: revoke, end-session URL, wipe (always); never fails — failures are in the result.
    public func logoutPublisher(postLogoutRedirectURI: URL? = nil) -> AnyPublisher<LogoutResult, Never> {
        TaskPublisher { await self.logout(postLogoutRedirectURI: postLogoutRedirectURI) }
            .catch { _ in Empty<LogoutResult, Never>() }
            .eraseToAnyPublisher()
    }

    /// The UserInfo claims, checked against the ID token's `sub`.
    public func userInfoPublisher() -> AnyPublisher<JSONObject, any Error> {
        TaskPublisher { try await self.userInfo() }.eraseToAnyPublisher()
    }

    /// The manager's events (see `RefreshCoordinator.eventsPublisher`).
    public var eventsPublisher: AnyPublisher<RefreshEvent, Never> { coordinator.eventsPublisher }
}

extension Authorizable {
    /// `authorize(_:)`: runs the grant (a login, an "edit profile" with extra parameters, a new
    /// client-credentials token).
    public func authorizePublisher(_ parameters: AuthorizationParameters) -> AnyPublisher<TokenSet, any Error> {
        TaskPublisher { try await self.authorize(parameters) }.eraseToAnyPublisher()
    }

    /// `refresh(_:)` — prefer the coordinator's publisher, which shares one refresh among callers.
    public func refreshPublisher(_ tokens: TokenSet) -> AnyPublisher<TokenSet, any Error> {
        TaskPublisher { try await self.refresh(tokens) }.eraseToAnyPublisher()
    }

    /// `logout(_:)`.
    public func logoutPublisher(_ tokens: TokenSet) -> AnyPublisher<LogoutResult, any Error> {
        TaskPublisher { try await self.logout(tokens) }.eraseToAnyPublisher()
    }
}

extension APIClient {
    /// The endpoint's response decoded as `T` — or, for a non-2xx answer, the endpoint's own server
    /// error (`serverError(for:)`), else `HTTPRequestError`. The request runs through the client's
    /// middleware chain (auth, retry, logging) once per subscription.
    public func publisher<T: Decodable & Sendable>(
        for endpoint: some Endpoint, as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) -> AnyPublisher<T, any Error> {
        let client = self
        return TaskPublisher { try await client.decode(T.self, from: endpoint, decoder: decoder) }.eraseToAnyPublisher()
    }

    /// The endpoint's 2xx response body.
    public func dataPublisher(for endpoint: some Endpoint) -> AnyPublisher<Data, any Error> {
        let client = self
        return TaskPublisher { try await client.data(from: endpoint) }.eraseToAnyPublisher()
    }
}
#endif
