// docs/library.md, ```swift block 5: the region is quoted there word for word (DocSnippetTests).
import MooseHTTP
import MooseOAuth
import MooseSQLiteStorage
import MooseSecretStore

enum Library5 {
    static func callTheAPI(with token: AccessToken) async throws {}
    static func showStoreProblem(_ error: SecretStoreError) {}
    static func showSignIn() {}

    static func snippet(storePath: String, keyPath: String, issuer: String, transport: any HTTPTransport) async throws {
        // snippet begins
        do {
            let store = try SecretStore(path: storePath, masterKey: .keyFile(keyPath))
            let moose = TokenManager(
                issuer: issuer, clientID: "my-app", storage: EncryptedSessionStorage(store: store),
                transport: transport)
            try await callTheAPI(with: moose.accessToken())
        } catch let error as SecretStoreError {
            showStoreProblem(error) // the store is broken: error.code, error.message; a login cannot help
        } catch let error as OAuthError where error.errorClass == .needsLogin {
            showSignIn() // no session, a refused refresh token, a damaged row: log in again
        }
        // snippet ends
    }
}
