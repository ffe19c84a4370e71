import Foundation
import MooseOAuth
import Testing

/// `ProfileCatalog`: the profiles one store knows — sessions, rows a logout left with their plans,
/// damaged rows — and the plans kept outside it; what `moose profile list|show`, `status` and `token
/// --resource` read. In process, on the in-memory storage.
struct ProfileCatalogTests {
    static let issuer = "https://id.example.com"
    static let resource = "https://api.example.com/mcp"

    static func session(client: String, resource: String? = nil, loggedOut: Bool = false) -> OAuthSession {
        var plan = SessionPlan(name: "", issuer: issuer, clientID: client, scopes: ["openid"])
        plan.resource = resource
        let tokens =
            loggedOut ? TokenSet(accessToken: "", scopes: []) : TokenSet(accessToken: "a-\(client)", scopes: [])
        return OAuthSession(
            issuer: issuer, clientID: client, tokens: tokens, state: loggedOut ? .needsReauthentication : .active,
            attributes: plan.stored(), resource: resource)
    }

    @Test func rowsAreSessionsLoggedOutOrDamagedAndKeptPlansFillTheRest() async throws {
        let storage = InMemorySessionStorage()
        _ = try await storage.replace(Self.session(client: "work", resource: Self.resource), key: "work")
        _ = try await storage.replace(Self.session(client: "old", resource: Self.resource, loggedOut: true), key: "old")
        _ = try await storage.replace(Self.session(client: "home", resource: Self.resource), key: "home")
        let kept = SessionPlan(name: "elsewhere", issuer: Self.issuer, clientID: "kept", scopes: [])
        let shadowed = SessionPlan(name: "work", issuer: Self.issuer, clientID: "stale", scopes: [])
        let catalog = try await ProfileCatalog.read(storage, kept: ["laptop": kept, "work": shadowed])

        #expect(catalog.sessions == ["home", "work"])
        #expect(catalog.loggedOut == ["laptop", "old"], "a row a logout left, and a plan kept outside")
        // The row's plan first (a logout's too), else the one kept outside, named as asked.
        #expect(catalog.plan(of: "work")?.clientID == "work")
        #expect(catalog.plan(of: "old")?.clientID == "old")
        #expect(catalog.plan(of: "laptop")?.clientID == "kept" && catalog.plan(of: "laptop")?.name == "laptop")
        #expect(catalog.plan(of: "nobody") == nil)
        // A row a logout left is a session for nothing.
        #expect(catalog.profiles(forResource: Self.resource) == ["home", "work"])
        #expect(catalog.profiles(forResource: Self.resource + "/") == [], "compared byte for byte")
    }

    @Test func aDamagedRowIsListedAsASessionAndOtherFaultsAreThrown() throws {
        struct Unreadable: Error {}
        let damaged = try ProfileCatalog.Row { throw OAuthError(OAuthError.sessionDamaged, "sealed bytes do not open") }
        guard case .damaged? = damaged else {
            Issue.record("a damaged row was not classified as damaged: \(String(describing: damaged))")
            return
        }
        #expect(throws: Unreadable.self) { _ = try ProfileCatalog.Row { throw Unreadable() } }
        #expect(try ProfileCatalog.Row { nil } == nil)

        let kept = SessionPlan(name: "", issuer: Self.issuer, clientID: "kept", scopes: [])
        let catalog = ProfileCatalog(rows: ["broken": .damaged], kept: ["broken": kept])
        #expect(catalog.sessions == ["broken"] && catalog.loggedOut.isEmpty, "never taken for none")
        #expect(catalog.plan(of: "broken")?.clientID == "kept", "its own plan cannot be read")
        #expect(catalog.profiles(forResource: Self.resource).isEmpty)
    }
}
