import Foundation
import MooseOAuth
import Testing

/// Issue 40 §3: a plan is typed (provider, client credential by reference, grant with its data) and
/// written as version 2's nested JSON; the flat plans of versions 0 (Moose 0.3, no `version`) and 1
/// still read as the same typed values.
struct SessionPlanCodingTests {
    static let pin = "sha256//" + Data(repeating: 1, count: 32).base64EncodedString()

    /// One plan of each shape, as versions 0, 1 and 2 wrote it, and the typed value all three read as.
    static let fixtures: [(v0: String, v1: String, v2: String, plan: SessionPlan)] = [
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
            #"{"version":2,"name":"svc","provider":{"issuer":"https://id.example.com","#
                + #""endpoints":{"tokenEndpoint":"https://id.example.com/token"},"caFile":"/ca.pem","#
                + #""publicKeyPins":["sha256//AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="]},"#
                + #""client":{"id":"svc","credential":{"type":"secret_file","file":"/run/secret","sending":"post"}},"#
                + #""grant":{"type":"client_credentials"},"scopes":["read"],"audience":"https://api.example.com","#
                + #""resource":"https://api.example.com/v1","dpop":"ES256"}"#,
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
            #"{"version":2,"name":"ci","provider":{"issuer":"https://id.example.com","endpoints":{}},"#
                + #""client":{"id":"ci","credential":{"type":"private_key","file":"/keys/ci.pem","keyID":"ci-1"}},"#
                + #""grant":{"type":"workload","source":"github","identityAudience":"moose","#
                + #""workloadGrant":"jwt-bearer","subjectTokenType":"urn:ietf:params:oauth:token-type:jwt"},"#
                + #""scopes":[]}"#,
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
            #"{"version":2,"name":"cli","provider":{"issuer":"https://id.example.com","endpoints":{}},"#
                + #""client":{"id":"cli","credential":{"type":"secret_variable","variable":"CLI_SECRET","sending":"basic"}},"#
                + #""grant":{"type":"authorization_code","loopbackPort":53682},"scopes":["openid"]}"#,
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
            #"{"version":2,"name":"tv","provider":{"issuer":"https://id.example.com"},"#
                + #""client":{"id":"tv","credential":{"type":"held_by_app"}},"grant":{"type":"device_code"},"#
                + #""scopes":["openid"]}"#,
            SessionPlan(
                name: "tv", issuer: "https://id.example.com", clientID: "tv", scopes: ["openid"], grant: .deviceCode,
                credential: .heldByApp)
        ),
        (
            #"{"issuer":"https://id.example.com","clientID":"web"}"#,
            #"{"version":1,"issuer":"https://id.example.com","clientID":"web"}"#,
            #"{"version":2,"provider":{"issuer":"https://id.example.com"},"client":{"id":"web"},"#
                + #""grant":{"type":"authorization_code"}}"#,
            SessionPlan(name: "", issuer: "https://id.example.com", clientID: "web", scopes: [])
        )
    ]

    static func decode(_ text: String) throws -> SessionPlan {
        try JSONDecoder().decode(SessionPlan.self, from: Data(text.utf8))
    }

    @Test(arguments: 0..<SessionPlanCodingTests.fixtures.count)
    func everyVersionReadsAsTheSameTypedPlan(index: Int) throws {
        let fixture = Self.fixtures[index]
        for (version, text) in [(0, fixture.v0), (1, fixture.v1), (2, fixture.v2)] {
            var plan = try Self.decode(text)
            #expect(plan.version == version)
            plan.version = SessionPlan.currentVersion
            #expect(plan == fixture.plan, "version \(version) of fixture \(index)")
        }
    }

    @Test(arguments: 0..<SessionPlanCodingTests.fixtures.count)
    func aPlanIsWrittenAsVersion2AndReadBackTheSame(index: Int) throws {
        let plan = Self.fixtures[index].plan
        let data = try JSONEncoder().encode(plan)
        #expect(try JSONDecoder().decode(SessionPlan.self, from: data) == plan)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["version"] as? Int == 2 && object["issuer"] == nil && object["clientID"] == nil)
        #expect((object["grant"] as? [String: Any])?["type"] as? String == plan.grant.kind.rawValue)
        // An older plan is written back as the current version.
        var old = try Self.decode(Self.fixtures[index].v1)
        #expect(old.version == 1)
        old = try JSONDecoder().decode(SessionPlan.self, from: try JSONEncoder().encode(old))
        #expect(old.version == SessionPlan.currentVersion && old == plan)
    }

    /// A plan is sealed with its session, but still read defensively: what it cannot type is a decoding
    /// error, so the session implies its least plan instead (as for any plan that does not decode).
    @Test func whatCannotBeTypedDoesNotDecode() throws {
        let bad = [
            #"{"version":2,"provider":{"issuer":"https://id.example.com"},"client":{"id":"c"},"grant":{"type":"password"}}"#,
            #"{"version":2,"provider":{"issuer":"https://id.example.com"},"client":{"id":"c"},"grant":{"type":"Workload"}}"#,
            #"{"version":2,"provider":{"issuer":"https://id.example.com"},"client":{"id":"c"},"grant":{}}"#,
            #"{"version":2,"provider":{"issuer":"https://id.example.com"},"client":{"id":"c"}}"#,
            #"{"version":2,"provider":{"issuer":"https://id.example.com"},"client":{"id":"c","#
                + #""credential":{"type":"secret"}},"grant":{"type":"device_code"}}"#,
            #"{"version":2,"provider":{"issuer":"https://id.example.com"},"client":{"id":"c","#
                + #""credential":{"type":"secret_file","file":"/s","sending":"header"}},"grant":{"type":"device_code"}}"#,
            #"{"version":2,"provider":{"issuer":"https://id.example.com"},"client":{"id":"c"},"#
                + #""grant":{"type":"authorization_code","loopbackPort":70000}}"#,
            #"{"version":2,"client":{"id":"c"},"grant":{"type":"device_code"}}"#,
            #"{"version":2,"issuer":"https://id.example.com","clientID":"c","grant":"device_code"}"#,
            #"{"version":1,"issuer":"https://id.example.com","clientID":"c","grant":"client-credentials"}"#,
            #"{"issuer":"https://id.example.com","grant":"device_code"}"#
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
