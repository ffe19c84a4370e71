import Foundation
import MooseOAuth
import Testing

/// Issue 40 §3: a plan is typed (provider, client credential by reference, grant with its data); its
/// JSON stays version 1's flat fields, which a Moose from before the typed plan reads in full, and the
/// plans of versions 0 (Moose 0.3, no `version`) and 1 read as the same typed values.
struct SessionPlanCodingTests {
    static let pin = "sha256//" + Data(repeating: 1, count: 32).base64EncodedString()

    /// One plan of each shape, as versions 0 and 1 wrote it, and the typed value both read as.
    static let fixtures: [(v0: String, v1: String, plan: SessionPlan)] = [
        (
            #"{"name":"svc","issuer":"https://id.example.com","clientID":"svc","scopes":["read"],"#
                + #""grant":"client_credentials","clientSecretFile":"/run/secret","clientAuth":"post","#
                + #""endpoints":{"tokenEndpoint":"https://id.example.com/token"},"audience":"https://api.example.com","#
                + #""resource":"https://api.example.com/v1","dpop":"ES256","caFile":"/ca.pem","#
                + #""publicKeyPins":["sha256//AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="]}"#,
            #"{"version":1,"name":"svc","issuer":"https://id.example.com","clientID":"svc","scopes":["read"],"#
                + #""grant":"client_credentials","clientSecretFile":"/run/secret","clientAuth":"post","#
                + #""endpoints":{"tokenEndpoint":"https://id.example.com/token"},"audience":"https://api.example.com","#
                + #""resource":"https://api.example.com/v1","dpop":"ES256","caFile":"/ca.pem","#
                + #""publicKeyPins":["sha256//AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="]}"#,
            {
                var endpoints = EndpointOverrides()
                endpoints.tokenEndpoint = URL(string: "https://id.example.com/token")
                return SessionPlan(
                    name: "svc",
                    provider: SessionPlan.Provider(
                        issuer: "https://id.example.com", endpoints: endpoints, caFile: "/ca.pem", publicKeyPins: [pin]),
                    client: SessionPlan.Client(id: "svc", credential: .secretFile("/run/secret", sending: .post)),
                    grant: .clientCredentials, scopes: ["read"], audience: "https://api.example.com",
                    resource: "https://api.example.com/v1", dpop: "ES256")
            }()
        ),
        (
            #"{"name":"ci","issuer":"https://id.example.com","clientID":"ci","scopes":[],"grant":"workload","#
                + #""endpoints":{},"privateKeyFile":"/keys/ci.pem","privateKeyID":"ci-1","workload":"github","#
                + #""workloadAudience":"moose","workloadGrant":"jwt-bearer","#
                + #""subjectTokenType":"urn:ietf:params:oauth:token-type:jwt"}"#,
            #"{"version":1,"name":"ci","issuer":"https://id.example.com","clientID":"ci","scopes":[],"#
                + #""grant":"workload","endpoints":{},"privateKeyFile":"/keys/ci.pem","privateKeyID":"ci-1","#
                + #""workload":"github","workloadAudience":"moose","workloadGrant":"jwt-bearer","#
                + #""subjectTokenType":"urn:ietf:params:oauth:token-type:jwt"}"#,
            SessionPlan(
                name: "ci", issuer: "https://id.example.com", clientID: "ci", scopes: [],
                grant: .workload(
                    SessionPlan.Workload(
                        source: "github", identityAudience: "moose", grant: .jwtBearer,
                        subjectTokenType: "urn:ietf:params:oauth:token-type:jwt")),
                credential: .privateKey(file: "/keys/ci.pem", keyID: "ci-1"))
        ),
        (
            #"{"name":"cli","issuer":"https://id.example.com","clientID":"cli","scopes":["openid"],"#
                + #""grant":"authorization_code","endpoints":{},"loopbackPort":53682,"clientSecretEnv":"CLI_SECRET"}"#,
            #"{"version":1,"name":"cli","issuer":"https://id.example.com","clientID":"cli","scopes":["openid"],"#
                + #""grant":"authorization_code","endpoints":{},"loopbackPort":53682,"clientSecretEnv":"CLI_SECRET","#
                + #""clientAuth":"basic"}"#,
            SessionPlan(
                name: "cli", issuer: "https://id.example.com", clientID: "cli", scopes: ["openid"],
                grant: .authorizationCode(loopbackPort: 53682),
                credential: .secretVariable("CLI_SECRET", sending: .basic))
        ),
        (
            // A device login of an app that held its credentials; no `grant` in version 0 is a browser's.
            #"{"name":"tv","issuer":"https://id.example.com","clientID":"tv","scopes":["openid"],"#
                + #""grant":"device_code","authenticationHeldByApp":true}"#,
            #"{"version":1,"name":"tv","issuer":"https://id.example.com","clientID":"tv","scopes":["openid"],"#
                + #""grant":"device_code","endpoints":{},"authenticationHeldByApp":true}"#,
            SessionPlan(
                name: "tv", issuer: "https://id.example.com", clientID: "tv", scopes: ["openid"], grant: .deviceCode,
                credential: .heldByApp)
        ),
        (
            #"{"issuer":"https://id.example.com","clientID":"web"}"#,
            #"{"version":1,"issuer":"https://id.example.com","clientID":"web"}"#,
            SessionPlan(name: "", issuer: "https://id.example.com", clientID: "web", scopes: [])
        )
    ]

    static func decode(_ text: String) throws -> SessionPlan {
        try JSONDecoder().decode(SessionPlan.self, from: Data(text.utf8))
    }

    @Test(arguments: 0..<SessionPlanCodingTests.fixtures.count)
    func everyVersionReadsAsTheSameTypedPlan(index: Int) throws {
        let fixture = Self.fixtures[index]
        for (version, text) in [(0, fixture.v0), (1, fixture.v1)] {
            var plan = try Self.decode(text)
            #expect(plan.version == version)
            plan.version = SessionPlan.currentVersion
            #expect(plan == fixture.plan, "version \(version) of fixture \(index)")
        }
    }

    /// Written, a plan holds every field version 1 wrote for it, with the same values (so a Moose from
    /// before the typed plan reads its credential, trust, grant and workload in full), and reads back
    /// as the same typed plan.
    @Test(arguments: 0..<SessionPlanCodingTests.fixtures.count)
    func aPlanIsWrittenAsVersion1AndReadBackTheSame(index: Int) throws {
        let plan = Self.fixtures[index].plan
        let data = try JSONEncoder().encode(plan)
        #expect(try JSONDecoder().decode(SessionPlan.self, from: data) == plan)
        let written = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let v1 = try #require(
            try JSONSerialization.jsonObject(with: Data(Self.fixtures[index].v1.utf8)) as? [String: Any])
        #expect(written["version"] as? Int == 1)
        // A value's JSON, keys sorted: the same text is the same value.
        func canonical(_ value: Any?) throws -> Data? {
            try value.map { try JSONSerialization.data(withJSONObject: [$0], options: .sortedKeys) }
        }
        for (key, value) in v1 {
            #expect(try canonical(written[key]) == canonical(value), "fixture \(index): \(key)")
        }
        // One reference field for the credential, never two.
        let references = ["privateKeyFile", "clientSecretFile", "clientSecretEnv", "authenticationHeldByApp"]
        #expect(references.filter { written[$0] != nil }.count <= 1)
        // An older plan is written back as the current version, the same plan.
        var old = try Self.decode(Self.fixtures[index].v0)
        old = try JSONDecoder().decode(SessionPlan.self, from: try JSONEncoder().encode(old))
        #expect(old.version == SessionPlan.currentVersion && old == plan)
    }

    /// A plan is sealed with its session, but still read defensively: what it cannot type is a decoding
    /// error, so the session implies its least plan instead (as for any plan that does not decode).
    @Test func whatCannotBeTypedDoesNotDecode() throws {
        let bad = [
            #"{"version":1,"issuer":"https://id.example.com","clientID":"c","grant":"password"}"#,
            #"{"version":1,"issuer":"https://id.example.com","clientID":"c","grant":"Workload"}"#,
            #"{"version":1,"issuer":"https://id.example.com","clientID":"c","grant":{"type":"device_code"}}"#,
            #"{"version":1,"issuer":"https://id.example.com","clientID":"c","loopbackPort":70000}"#,
            #"{"version":1,"issuer":"https://id.example.com","clientID":"c","grant":"client-credentials"}"#,
            #"{"version":1,"clientID":"c","grant":"device_code"}"#,
            #"{"issuer":"https://id.example.com","grant":"device_code"}"#,
            #"{"issuer":["https://id.example.com"],"clientID":"c"}"#
        ]
        for text in bad {
            #expect(throws: DecodingError.self, "\(text)") { try Self.decode(text) }
            let session = OAuthSession(
                issuer: "https://id.example.com", clientID: "c", tokens: TokenSet(accessToken: "a"),
                attributes: [SessionPlan.attribute: text, SessionEngine.grantAttribute: "client_credentials"])
            #expect(SessionPlan.stored(in: session, key: "k") == nil)
            // Without a refresh token the implied plan renews as the recorded grant says.
            #expect(SessionPlan.of(session, key: "k").grant == .clientCredentials)
        }
    }

    /// Renewal follows the plan's grant, not the grant attribute kept for older readers.
    @Test func renewalFollowsThePlansGrant() throws {
        var plan = SessionPlan(
            name: "svc", issuer: "https://id.example.com", clientID: "svc", scopes: [], grant: .clientCredentials,
            credential: .secretVariable("S", sending: .basic))
        let service = OAuthSession(
            issuer: plan.issuer, clientID: plan.clientID, tokens: TokenSet(accessToken: "a"), attributes: plan.stored())
        #expect(service.renewsWithoutAPerson && service.canRenew)
        plan.grant = .deviceCode
        let person = OAuthSession(
            issuer: plan.issuer, clientID: plan.clientID, tokens: TokenSet(accessToken: "a"),
            state: .needsReauthentication,
            attributes: plan.stored(in: [SessionEngine.grantAttribute: "client_credentials"]))
        #expect(!person.renewsWithoutAPerson && !person.canRenew, "the plan says a person logs in")
        // A row a logout kept the plan in is never renewed, whatever its grant.
        plan.grant = .clientCredentials
        let kept = OAuthSession(
            issuer: plan.issuer, clientID: plan.clientID, tokens: TokenSet(accessToken: ""),
            state: .needsReauthentication, attributes: plan.stored())
        #expect(kept.isLoggedOut && !kept.renewsWithoutAPerson && !kept.canRenew)
    }

    @Test func grantKindsAreNamedByConfigFilesAndCommandLines() {
        #expect(SessionPlan.Grant.Kind(named: "client_credentials") == .clientCredentials)
        #expect(SessionPlan.Grant.Kind(named: "SERVICE") == .clientCredentials)
        #expect(SessionPlan.Grant.Kind(named: "browser") == .authorizationCode)
        #expect(SessionPlan.Grant.Kind(named: "device") == .deviceCode)
        #expect(SessionPlan.Grant.Kind(named: "workload") == .workload)
        #expect(SessionPlan.Grant.Kind(named: "password") == nil)
        for kind in SessionPlan.Grant.Kind.allCases { #expect(SessionPlan.Grant(kind).kind == kind) }
    }
}
