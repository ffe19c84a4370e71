import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseOAuthSystem
import MooseSQLiteStorage
import MooseCrypto
import MooseSecretStore
import MooseTestSupport
import MooseURLSession
import Synchronization
import Testing

struct UserInfoEndpoint: Endpoint {
    let baseURL: URL
    var path: String { "/userinfo/" }
    var requiresAuthentication: Bool { true }
}

/// The facade against the real provider: login, tokens, requests, refresh, logout, in one object.
struct TokenManagerTests {
    @Test func loginRequestRefreshAndLogoutThroughOneObject() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-manager-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SecretStore(
            path: folder.appendingPathComponent("store.sqlite").path, masterKey: .raw(try SecureRandom.bytes(count: 32))
        )
        let storage = EncryptedSessionStorage(store: store)
        let spy = TokenEndpointSpy(TestIdP.transport)
        let moose = TokenManager(issuer: TestIdP.issuer, clientID: "moose-cli", storage: storage, transport: spy)
        let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: TestIdP.transport)
        let user = try await moose.login(
            with: .loopback(timeout: 30) { url in
                let redirect =
                    URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first {
                        $0.name == "redirect_uri"
                    }?.value ?? ""
                try await browser.visit(url, stopAt: redirect)
            })
        #expect(user.state == .active && user.issuer == TestIdP.issuer)
        // The ID token carries only sub: the names come from UserInfo, preferred_username first.
        #expect(
            user.displayName == "alice" && user.email == "alice@example.com" && user.name == "Alice Liddell"
                && user.subject == "1")

        // Requests get the token; a 401-style refresh goes through the one coordinator.
        let api = APIClient(transport: TestIdP.transport, middlewares: [moose.middleware])
        let info = try await api.json(from: UserInfoEndpoint(baseURL: URL(string: TestIdP.issuer)!))
        #expect(info["sub"]?.string == user.subject)
        let first = try await moose.accessToken()
        let calls = spy.tokenCalls
        let second = try await moose.coordinator.refresh(rejecting: first)
        #expect(second.value != first.value && spy.tokenCalls == calls + 1)
        #expect(try await moose.userInfo()["sub"]?.stringValue == user.subject)
        #expect(try await storage.load("default")?.session.tokens.accessToken == second.value)

        // Logout: revoked at the provider, wiped locally, the old refresh token is dead.
        let stored = try #require(try await storage.load("default")).session.tokens
        let result = await moose.logout()
        #expect(result.refreshTokenRevoked == true && result.endSessionURL != nil)
        #expect(try await storage.load("default") == nil)
        await #expect(throws: OAuthError.self) {
            _ = try await OAuthClient(
                metadata: try await moose.metadata(), clientID: "moose-cli",
                transport: TestIdP.transport
            ).refresh(stored)
        }
        await #expect(throws: OAuthError.self) { _ = try await moose.accessToken() }
    }

    /// Logout wipes the local session even when the provider cannot be reached; client credentials
    /// refresh with a new grant. (Scripted parts: MooseTesting's transport, agent-free flow, storage.)
    @Test func logoutAlwaysWipesAndClientCredentialsRenew() async throws {
        let transport = Self.clientCredentialsProvider(revokes: false)
        let storage = InMemorySessionStorage()
        let moose = TokenManager(
            issuer: "https://id.example.com", clientID: "svc", authentication: .clientSecretBasic("s"),
            storage: storage, transport: transport, scopes: ["read"])
        _ = try await moose.login(with: .clientCredentials)
        let token = try await moose.accessToken()
        #expect(token.value == "cc-1")
        let renewed = try await moose.coordinator.refresh(rejecting: token)
        #expect(renewed.value == "cc-2", "a client-credentials session renews with a new grant")
        let result = await moose.logout()
        #expect(result.revocationError != nil, "the failed revocation is reported")
        #expect(try await storage.keys().isEmpty, "the local session is wiped all the same")
    }

    /// Issue 40 §1: a logout that keeps the plan keeps it through the `SessionStorage` contract — a row
    /// with the plan and no tokens — so another process (another machine sharing the storage) opens the
    /// key and logs in the same way again; that row is never handed out nor renewed by a new grant.
    @Test func aLogoutKeepingThePlanLeavesItForTheNextLoginAnywhere() async throws {
        let transport = Self.clientCredentialsProvider(revokes: true)
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("moose-kept-\(UUID().uuidString)")
        try Data("svc-secret".utf8).write(to: secret)
        defer { try? FileManager.default.removeItem(at: secret) }
        var plan = SessionPlan(name: "svc", issuer: "https://id.example.com", clientID: "svc", scopes: ["read"])
        plan.grant = .clientCredentials
        plan.client.credential = .secretFile(secret.path, sending: .basic)
        let storage = InMemorySessionStorage()
        let first = try TokenManager(plan: plan, storage: storage, transport: transport)
        _ = try await first.login(with: .clientCredentials)
        #expect(try await first.accessToken().value == "cc-1")

        let result = await first.logout(keepingPlan: true)
        #expect(result.hadSession && result.planKept && result.wipeError == nil)
        let row = try #require(try await storage.load("svc")).session
        #expect(row.isLoggedOut && row.tokens.refreshToken == nil && row.tokens.accessToken.isEmpty)
        #expect(try await first.summary() == nil, "a kept plan is no session")
        await #expect(throws: OAuthError.self) { _ = try await first.accessToken() }

        // Another process opens the key: the kept plan, and its login logs in as it says.
        let second = try await TokenManager.open(key: "svc", storage: storage, transport: transport)
        #expect(second.plan.grant == .clientCredentials && second.plan.client.credential == plan.client.credential)
        _ = try await second.login(with: .clientCredentials)
        #expect(try await second.accessToken().value == "cc-2", "the kept plan was never renewed by a new grant")

        // A second logout finds no session and keeps the plan; one not asked to keep it removes the row.
        _ = await second.logout(keepingPlan: true)
        let again = await second.logout(keepingPlan: true)
        #expect(!again.hadSession && again.planKept)
        #expect(try await storage.load("svc")?.session.isLoggedOut == true)
        let wiped = await second.logout()
        #expect(!wiped.hadSession && !wiped.planKept)
        #expect(try await storage.keys().isEmpty)
    }

    /// A logout that keeps the plan keeps it as it was written: the fields of a newer Moose's plan, which
    /// this one reads past, survive this one's logout (a fleet upgraded one process at a time).
    @Test func aKeptPlanIsTheStoredTextByteForByte() async throws {
        let transport = Self.clientCredentialsProvider(revokes: true)
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("moose-kept-\(UUID().uuidString)")
        try Data("svc-secret".utf8).write(to: secret)
        defer { try? FileManager.default.removeItem(at: secret) }
        let text =
            #"{"version":3,"name":"svc","issuer":"https://id.example.com","clientID":"svc","scopes":["read"],"#
            + #""grant":"client_credentials","clientSecretFile":"\#(secret.path)","clientAuth":"basic","#
            + #""endpoints":{},"aFieldOfANewerMoose":{"keep":["me"]}}"#
        let storage = InMemorySessionStorage()
        let session = OAuthSession(
            issuer: "https://id.example.com", clientID: "svc",
            tokens: TokenSet(accessToken: "cc-0", expiresAt: Date().addingTimeInterval(3600), scopes: ["read"]),
            attributes: [SessionPlan.attribute: text])
        try await storage.save(session, key: "svc", expectedGeneration: nil, lease: nil)
        let manager = try await TokenManager.open(key: "svc", storage: storage, transport: transport)
        #expect(manager.plan.grant == .clientCredentials && manager.plan.version == 3)
        let result = await manager.logout(keepingPlan: true)
        #expect(result.hadSession && result.planKept)
        let row = try #require(try await storage.load("svc")).session
        #expect(row.isLoggedOut)
        let kept = row.attributes[SessionPlan.attribute]
        #expect(kept?.utf8.elementsEqual(text.utf8) == true, "kept: \(kept ?? "none")")
    }

    /// A scripted provider at https://id.example.com for client-credentials sessions: discovery, a token
    /// endpoint answering `cc-1`, `cc-2`, … (one per grant), and a revocation endpoint that answers
    /// (`revokes`) or is down like every other path.
    static func clientCredentialsProvider(revokes: Bool) -> ScriptedTransport {
        let grants = LockedCounter()
        return ScriptedTransport { request in
            let path = (request.url?.path ?? "")
            if path.hasSuffix("/.well-known/openid-configuration") {
                return .json(
                    #"{"issuer":"https://id.example.com","authorization_endpoint":"https://id.example.com/authorize","token_endpoint":"https://id.example.com/token","revocation_endpoint":"https://id.example.com/revoke","jwks_uri":"https://id.example.com/jwks","response_types_supported":["code"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["RS256"]}"#
                )
            }
            if path.hasSuffix("/token") {
                let n = grants.increment()
                return .json(#"{"access_token":"cc-\#(n)","token_type":"Bearer","expires_in":3600}"#)
            }
            if revokes, path.hasSuffix("/revoke") { return .json("{}") }
            throw HTTPRequestError.transportFailure("the provider is down", request)
        }
    }
}

final class LockedCounter: Sendable {
    private let value = Mutex(0)
    func increment() -> Int {
        value.withLock {
            $0 += 1; return $0
        }
    }
}
