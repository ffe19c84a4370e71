import Foundation
import MooseHTTP
import MooseOAuth
import MooseTestSupport
import Synchronization
import Testing

/// Only a refused refresh token ends a session: a client-credentials session whose renewal the
/// provider refuses (`invalid_grant`, `invalid_client`) fails that attempt, stays active, and the next
/// call asks again. (The workload case runs at authgent in MooseCLITests.RefusedRenewalCLITests.)
struct RefusedRenewalTests {
    @Test func aRefusedClientCredentialsRenewalFailsThatAttemptOnly() async throws {
        let answers = Mutex<[String]>([
            #"{"access_token":"cc-1","token_type":"Bearer","expires_in":3600}"#,
            #"{"error":"invalid_grant","error_description":"assertion expired"}"#,
            #"{"error":"invalid_client","error_description":"secret rotated"}"#,
            #"{"access_token":"cc-4","token_type":"Bearer","expires_in":3600}"#
        ])
        let transport = ScriptedTransport { request in
            let path = request.url?.path ?? ""
            if path.hasSuffix("/.well-known/openid-configuration") {
                return .json(
                    #"{"issuer":"https://id.example.com","authorization_endpoint":"https://id.example.com/authorize","token_endpoint":"https://id.example.com/token","jwks_uri":"https://id.example.com/jwks","response_types_supported":["code"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["RS256"]}"#
                )
            }
            guard path.hasSuffix("/token") else { return .json("{}", status: .notFound) }
            let next = answers.withLock { $0.isEmpty ? "{}" : $0.removeFirst() }
            return .json(next, status: next.contains("\"error\"") ? .badRequest : .ok)
        }
        let storage = InMemorySessionStorage()
        let moose = TokenManager(
            issuer: "https://id.example.com", clientID: "svc", authentication: .clientSecretBasic("s"),
            storage: storage, transport: transport, scopes: ["read"])
        let events = moose.events
        let seen = Task { () -> [String] in
            var names: [String] = []
            for await event in events {
                switch event {
                case .refreshFailed(let error): names.append("failed:\(error.code)")
                case .needsReauthentication: names.append("needsReauthentication")
                case .refreshed:
                    names.append("refreshed")
                    if names.contains("failed:invalidClient") { return names } // the renewal after both refusals
                case .loggedOut: names.append("loggedOut")
                }
            }
            return names
        }
        _ = try await moose.login(with: .clientCredentials)
        let first = try await moose.accessToken()
        #expect(first.value == "cc-1")

        var refused: OAuthError?
        do { _ = try await moose.coordinator.refresh(rejecting: first) } catch { refused = error as? OAuthError }
        #expect(
            refused?.code == OAuthError.renewalRefused && refused?.oauthError == "invalid_grant"
                && refused?.errorDescription == "assertion expired",
            "\(String(describing: refused))")
        #expect(
            try await storage.load("default")?.session.state == .active, "a refused renewal does not mark the session")

        let client = await errorCode { _ = try await moose.coordinator.refreshNow() }
        #expect(client == OAuthError.invalidClient)
        #expect(try await storage.load("default")?.session.state == .active)

        let renewed = try await moose.coordinator.refreshNow()
        #expect(renewed.value == "cc-4", "the next call asks again and renews")
        let names = await seen.value
        #expect(!names.contains("needsReauthentication"), "\(names)")
        #expect(names.contains("failed:renewalRefused") && names.contains("failed:invalidClient"), "\(names)")
    }
}

/// Issue "One session, whatever made it", §2: a resource's logout wipes its local session even when
/// the resource's metadata cannot be fetched (the resource is down): nothing revoked, said so, wiped.
struct ResourceLogoutWithoutDiscoveryTests {
    @Test func aResourceLogoutWipesWhenDiscoveryFails() async throws {
        let transport = ScriptedTransport { request in
            throw HTTPRequestError.transportFailure("the resource is down", request)
        }
        let storage = InMemorySessionStorage()
        let resource = "https://mcp.example.com/mcp"
        let session = OAuthSession(
            issuer: "https://id.example.com", clientID: "dyn-1",
            tokens: TokenSet(accessToken: "at", refreshToken: "rt"),
            resource: resource)
        try await storage.replace(
            session, key: OAuthSession.storageKey(issuer: "https://id.example.com", resource: resource))
        try await storage.replace(
            OAuthSession(
                issuer: "https://id.example.com", clientID: "other", tokens: TokenSet(accessToken: "x"),
                resource: "https://other.example.com/"), key: "unrelated")
        let manager = try ResourceTokenManager(resource: resource, storage: storage, transport: transport)
        let result = await manager.logout()
        #expect(result.hadSession && result.wipeError == nil)
        #expect(
            result.revocationError?.message.contains("nothing was revoked") == true,
            "\(String(describing: result.revocationError))")
        #expect(try await storage.keys() == ["unrelated"], "the resource's session was not wiped, or another one was")
    }
}
