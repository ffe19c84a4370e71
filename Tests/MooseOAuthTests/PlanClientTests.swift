import Foundation
import MooseHTTP
import MooseOAuth
import MooseSecretStore
import MooseSQLiteStorage
import MooseTestSupport
import Testing

/// The one way a session's client is made from its plan (`SessionPlan.client`), used by
/// `TokenManager` and the `moose` CLI: its credentials are read at every use, a session's own
/// registration counts, and the JWKS can be kept in the encrypted store.
@Suite struct PlanClientTests {
    static let metadata = ProviderMetadata(
        issuer: "https://id.example.com", tokenEndpoint: URL(string: "https://id.example.com/token"))

    @Test func aSessionsOwnRegistrationAuthenticatesItsClient() throws {
        let plan = SessionPlan(name: "mcp", issuer: "https://id.example.com", clientID: "registered-1", scopes: [])
        let own = RegisteredClient(issuer: "https://id.example.com", clientID: "registered-1", clientSecret: "s3cret")
        let client = try plan.client(metadata: Self.metadata, transport: CurlTransport(), registration: own)
        guard case .clientSecretBasic(let secret) = client.authentication else {
            Issue.record("the registration's secret was not used: \(client.authentication)")
            return
        }
        #expect(secret == "s3cret")
        // Another client's registration, or one made at another provider, is not this client's.
        for other in [
            RegisteredClient(issuer: "https://id.example.com", clientID: "registered-2", clientSecret: "x"),
            RegisteredClient(issuer: "https://id.example.com/", clientID: "registered-1", clientSecret: "x"),
            RegisteredClient(issuer: "https://other.example.com", clientID: "registered-1", clientSecret: "x")
        ] {
            let client = try plan.client(metadata: Self.metadata, transport: CurlTransport(), registration: other)
            guard case .none = client.authentication else {
                Issue.record("\(other.issuer) \(other.clientID)'s secret was sent for registered-1")
                continue
            }
        }
        // Credentials the app holds come first.
        let held = try plan.client(
            metadata: Self.metadata, transport: CurlTransport(), registration: own,
            authentication: .clientSecretPost("app"))
        guard case .clientSecretPost("app") = held.authentication else {
            Issue.record("the app's own credentials were not used")
            return
        }
    }

    /// A registered client whose secret expired (RFC 7591 `client_secret_expires_at`) sends nothing:
    /// the provider could only answer `invalid_client`, whose hint (check the secret) is the wrong
    /// fix. The next step named is a new login, which registers anew.
    @Test func aRegistrationWhoseSecretExpiredAsksForANewLogin() throws {
        let plan = SessionPlan(name: "mcp", issuer: "https://id.example.com", clientID: "registered-1", scopes: [])
        var expired = RegisteredClient(
            issuer: "https://id.example.com", clientID: "registered-1", clientSecret: "s3cret")
        expired.clientSecretExpiresAt = Date().addingTimeInterval(-1)
        do {
            _ = try plan.client(metadata: Self.metadata, transport: CurlTransport(), registration: expired)
            Issue.record("a client was made with an expired secret")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.needsLogin)
            #expect(error.message.contains("log in again"))
        }
        // Not yet expired, or a public registration (no secret to expire): used as before.
        var live = expired
        live.clientSecretExpiresAt = Date().addingTimeInterval(3600)
        let used = try plan.client(metadata: Self.metadata, transport: CurlTransport(), registration: live)
        guard case .clientSecretBasic("s3cret") = used.authentication else {
            Issue.record("a registration with a secret still valid was not used")
            return
        }
        var publicClient = expired
        publicClient.clientSecret = nil
        let anyone = try plan.client(metadata: Self.metadata, transport: CurlTransport(), registration: publicClient)
        guard case .none = anyone.authentication else {
            Issue.record("a public registration was refused for an expiry that concerns secrets only")
            return
        }
    }

    @Test func aNameThatIsNoDPoPAlgorithmIsAConfigurationError() {
        var plan = SessionPlan(name: "x", issuer: "https://id.example.com", clientID: "c", scopes: [])
        for name in ["HS256-not-a-dpop-alg", "HS256", "none"] {
            plan.dpop = name
            #expect(throws: OAuthError.self) {
                _ = try plan.client(metadata: Self.metadata, transport: CurlTransport())
            }
        }
        plan.dpop = "ES256"
        #expect((try? plan.client(metadata: Self.metadata, transport: CurlTransport()))?.dpop == .es256)
    }

    /// A secret file rotated under a running app (a Kubernetes secret, a vault agent) is read at the
    /// manager's next use — at the real test provider: the wrong secret is refused, the rotated one
    /// accepted, by the same manager.
    @Test func aRotatedSecretFileIsReadAtTheNextUse() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-rotated-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let secretFile = folder.appendingPathComponent("secret")
        try Data("not-the-secret\n".utf8).write(to: secretFile)
        let plan = SessionPlan(
            name: "svc", issuer: TestIdP.issuer, clientID: "moose-service", scopes: ["read"],
            grant: .clientCredentials, credential: .secretFile(secretFile.path, sending: .basic))
        let manager = try TokenManager(plan: plan, storage: InMemorySessionStorage(), transport: CurlTransport())
        await #expect {
            try await manager.login(with: .clientCredentials)
        } throws: { error in
            (error as? OAuthError)?.code == OAuthError.invalidClient
        }
        try Data("moose-service-secret\n".utf8).write(to: secretFile)
        let summary = try await manager.login(with: .clientCredentials)
        #expect(summary.key == "svc")
        #expect(!(try await manager.accessToken()).value.isEmpty)
    }

    /// The JWKS kept in a real store file: what one process saved, the next one loads (same bytes,
    /// same fetch time), for the same `jwks_uri` only; a value too short to hold a time counts as none.
    @Test func theJWKSKeptInTheStoreIsLoadedByTheNextProcess() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-jwks-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("store.sqlite").path
        let keyPath = folder.appendingPathComponent("store.key").path
        let document = Array(#"{"keys":[]}"#.utf8)
        let jwks = try #require(URL(string: "https://id.example.com/jwks"))
        let other = try #require(URL(string: "https://id.example.com/other-jwks"))
        let short = try #require(URL(string: "https://short.example.com/jwks"))
        let fetched = Date(timeIntervalSince1970: 1_790_000_000)
        do {
            let store = try SecretStore(path: path, masterKey: .keyFile(keyPath), create: true)
            JWKSCache.Persistence.secretStore(store, for: jwks).save(document, fetched)
        }
        let store = try SecretStore(path: path, masterKey: .keyFile(keyPath))
        let loaded = try #require(JWKSCache.Persistence.secretStore(store, for: jwks).load())
        #expect(loaded.document == document && loaded.fetchedAt == fetched)
        #expect(JWKSCache.Persistence.secretStore(store, for: other).load() == nil)
        try store.put([1, 2, 3], namespace: "moose.jwks", name: "https://short.example.com/jwks")
        #expect(JWKSCache.Persistence.secretStore(store, for: short).load() == nil)
    }
}
