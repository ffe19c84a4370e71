import Foundation
import MooseHTTP
import MooseOAuth
import MooseTestSupport
import MooseURLSession
import Testing

/// The real test identity provider (tools/idp/start: django-oauth-toolkit on 127.0.0.1). Started
/// once per test process if `MOOSE_IDP_ISSUER` is not already set by tools/test.
enum TestIdP {
    static var issuer: String { TestIdentityProvider.issuer }

    static let transport = URLSessionTransport()
    static let discovery = Discovery(transport: transport)

    static func metadata() async throws -> ProviderMetadata { try await discovery.metadata(for: issuer) }

    static func client(_ id: String, _ authentication: ClientAuthentication = .none) async throws -> OAuthClient {
        OAuthClient(metadata: try await metadata(), clientID: id, authentication: authentication, transport: transport)
    }
}
