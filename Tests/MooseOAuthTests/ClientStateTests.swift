import Foundation
import MooseHTTP
@testable import MooseOAuth
import MooseTesting
import Synchronization
import Testing

/// `TokenManager`'s client state: discovery and the JWKS cache once, the client and its ID-token
/// validator at every use — so the HMAC key of HS256 ID tokens (the client secret, OIDC Core §10.1) is
/// the secret of the moment: a rotated secret file's, or a session's own registration's.
@Suite struct ClientStateTests {
    @Test func theValidatorKeysHMACWithTheSecretOfTheMoment() async throws {
        let discoveries = Mutex(0)
        let transport = ScriptedTransport { request in
            guard (request.url?.path ?? "").hasSuffix("/.well-known/openid-configuration") else {
                throw HTTPRequestError.transportFailure("not scripted", request)
            }
            discoveries.withLock { $0 += 1 }
            return .json(
                #"{"issuer":"https://id.example.com","authorization_endpoint":"https://id.example.com/authorize","token_endpoint":"https://id.example.com/token","jwks_uri":"https://id.example.com/jwks","response_types_supported":["code"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["RS256","HS256"]}"#
            )
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-client-state-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let secretFile = folder.appendingPathComponent("secret")
        try Data("first-secret\n".utf8).write(to: secretFile)
        let plan = SessionPlan(
            name: "app", issuer: "https://id.example.com", clientID: "app", scopes: ["openid"],
            credential: .secretFile(secretFile.path, sending: .basic))
        let state = ClientState(plan: plan, authentication: nil, transport: transport, idTokenKeys: nil, logger: nil)

        let first = try await state.prepare()
        #expect(first.validator?.clientSecret == "first-secret")
        try Data("rotated-secret\n".utf8).write(to: secretFile)
        let second = try await state.prepare()
        #expect(second.validator?.clientSecret == "rotated-secret")
        guard case .clientSecretBasic("rotated-secret") = second.client.authentication else {
            Issue.record("the rotated secret was not used: \(second.client.authentication)")
            return
        }
        // One discovery, one JWKS cache, whatever the secret.
        #expect(discoveries.withLock { $0 } == 1)
        #expect(first.validator?.jwks === second.validator?.jwks)

        // A session's own registration: its secret keys the validator of that session's refresh.
        let registered = OAuthSession(
            issuer: "https://id.example.com", clientID: "app", tokens: TokenSet(accessToken: "a"),
            registration: RegisteredClient(
                issuer: "https://id.example.com", clientID: "app", clientSecret: "registered"))
        #expect(try await state.prepare(for: registered).validator?.clientSecret == "registered")
    }
}
