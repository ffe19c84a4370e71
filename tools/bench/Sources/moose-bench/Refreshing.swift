import MooseOAuth

/// A coordinator whose refresh is `refresh` (the benchmarks' stand-ins: the stored tokens as they
/// are, or one grant at the test provider), built the one public way, with an `Authorizable`.
func benchCoordinator(
    key: String, storage: any SessionStorage, configuration: RefreshCoordinator.Configuration = .init(),
    current: OAuthSession? = nil, refresh: @escaping @Sendable (TokenSet) async throws -> TokenSet
) -> RefreshCoordinator {
    RefreshCoordinator(
        key: key, storage: storage, authorizer: Refreshing(refresh: refresh), configuration: configuration,
        current: current)
}

/// An `Authorizable` that only refreshes.
struct Refreshing: Authorizable {
    let refresh: @Sendable (TokenSet) async throws -> TokenSet

    func authorize(_ parameters: AuthorizationParameters) async throws -> TokenSet {
        throw OAuthError(OAuthError.invalidConfiguration, "a benchmark coordinator only refreshes")
    }

    func refresh(_ tokens: TokenSet) async throws -> TokenSet { try await refresh(tokens) }

    func logout(_ tokens: TokenSet) async throws -> LogoutResult { LogoutResult() }
}
