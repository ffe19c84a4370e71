// docs/refresh-coordinator.md, ```swift block 1: the region is quoted there word for word (DocSnippetTests).
import MooseOAuth
import MooseSQLiteStorage // EncryptedSessionStorage
import MooseSecretStore

func refreshCoordinator1(store: SecretStore, flow: any Authorizable) async throws {
    // snippet begins
    let coordinator = RefreshCoordinator(
        key: "default", storage: EncryptedSessionStorage(store: store), authorizer: flow)
    let token = try await coordinator.accessToken(minimumValidity: 60)
    // snippet ends
    _ = token
}
