import Foundation
import MooseHTTP
import MooseOAuth
import MooseTestSupport
import MooseURLSession
import Testing

/// A token endpoint that refuses a client's credentials sent with HTTP Basic answers 401 with
/// `WWW-Authenticate: Basic` (RFC 6749 §5.2), as `TestProvider` does, served on a loopback port.
/// Over `URLSessionTransport` on Linux, swift-corelibs-foundation turned that into a challenge whose
/// default handling never completed: the grant ended at its deadline as `timedOut`. It is the refused
/// client it is, at once.
struct ChallengeOverURLSessionTests {
    @Test func aRefusedBasicClientIsInvalidClientOverURLSession() async throws {
        let server = try LoopbackHTTPServer(connectionDeadline: 60)
        defer { server.stop() }
        let provider = TestProvider(issuer: server.baseURL.absoluteString)
        server.serve(provider)
        let transport = URLSessionTransport()
        let metadata = try await ProviderMetadata.discover(issuer: provider.issuer, transport: transport)
        let client = OAuthClient(
            metadata: metadata, clientID: TestProvider.Client.defaultService.id,
            authentication: .clientSecretBasic("wrong"), transport: transport)
        do {
            _ = try await ClientCredentialsFlow(client: client).authorize(AuthorizationParameters(scopes: []))
            Issue.record("a wrong secret was accepted")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.invalidClient, "\(error)")
        }
        // The right secret still logs in over the same session.
        let good = OAuthClient(
            metadata: metadata, clientID: TestProvider.Client.defaultService.id,
            authentication: .clientSecretBasic("service-secret"), transport: transport)
        let tokens = try await ClientCredentialsFlow(client: good).authorize(AuthorizationParameters(scopes: []))
        #expect(!tokens.accessToken.isEmpty)
    }
}
