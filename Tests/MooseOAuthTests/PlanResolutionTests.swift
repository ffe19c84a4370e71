import Foundation
import MooseOAuth
import MooseOAuthSystem
import Testing

/// Issue 40 §3 and issue 42 §2: a login's plan is resolved in the library, field by field — what was
/// given, else the config file's profile, else what the last login kept, else the default — as a pure
/// function, tested here in-process (no binary, no server); and the config file can say every field.
struct PlanResolutionTests {
    typealias Settings = ProfileFile.ProfileSettings

    static let issuer = "https://id.example.com"

    static func kept(_ change: (inout SessionPlan) -> Void = { _ in }) -> SessionPlan {
        var plan = SessionPlan(
            name: "p", issuer: issuer, clientID: "app", scopes: ["kept-scope"],
            grant: .authorizationCode(loopbackPort: 53682), credential: .secretVariable("KEPT_SECRET", sending: .post))
        plan.audience = "kept-audience"
        plan.resource = "https://kept.example.com/api"
        plan.dpop = "EdDSA"
        plan.provider.caFile = "/kept/ca.pem"
        plan.provider.publicKeyPins = ["sha256//" + Data(repeating: 1, count: 32).base64EncodedString()]
        plan.provider.endpoints.deviceAuthorizationEndpoint = URL(string: "https://id.example.com/kept-device")
        change(&plan)
        return plan
    }

    /// The kept plan for one field's row: a private key's `kid` needs a kept private key to belong to.
    static func kept(for field: String) -> SessionPlan {
        kept {
            if field == "privateKeyID" { $0.client.credential = .privateKey(file: "/kept/key.pem", keyID: "kept-kid") }
        }
    }

    func resolve(_ given: Settings = Settings(), _ profile: Settings? = nil, kept: SessionPlan? = nil) throws
        -> SessionPlan
    {
        try SessionPlan.resolve(name: "p", given: given, profile: profile, kept: kept)
    }

    /// Each field: the given value wins over the profile's, the profile's over the kept one, the kept one
    /// over the default — one row per field, each layer set to a different value.
    @Test(arguments: [
        "scopes", "audience", "resource", "dpop", "caFile", "publicKeyPins", "clientAuth", "privateKeyID",
        "loopbackPort",
        "deviceEndpoint"
    ])
    func eachFieldIsGivenElseProfileElseKeptElseDefault(field: String) throws {
        let pin = { (byte: UInt8) in "sha256//" + Data(repeating: byte, count: 32).base64EncodedString() }
        func layer(_ tag: String, _ byte: UInt8) -> Settings {
            var settings = Settings()
            switch field {
            case "scopes": settings.scopes = ["\(tag)-scope"]
            case "audience": settings.audience = "\(tag)-audience"
            case "resource": settings.resource = "https://\(tag).example.com/api"
            case "dpop": settings.dpop = tag == "given" ? "ES256" : "RS256"
            case "caFile": settings.caFile = "/\(tag)/ca.pem"
            case "publicKeyPins": settings.publicKeyPins = [pin(byte)]
            case "clientAuth": settings.clientAuth = tag == "given" ? "post" : "basic"
            case "privateKeyID": settings.privateKeyID = "\(tag)-kid"
            case "loopbackPort": settings.loopbackPort = UInt16(50_000 + Int(byte))
            case "deviceEndpoint": settings.deviceEndpoint = "https://id.example.com/\(tag)-device"
            default: Issue.record("no such field \(field)")
            }
            return settings
        }
        func value(_ plan: SessionPlan) -> String {
            switch field {
            case "scopes": plan.scopes.joined(separator: " ")
            case "audience": plan.audience ?? "-"
            case "resource": plan.resource ?? "-"
            case "dpop": plan.dpop ?? "-"
            case "caFile": plan.provider.caFile ?? "-"
            case "publicKeyPins":
                plan.provider.publicKeyPins.isEmpty ? "-" : plan.provider.publicKeyPins.joined(separator: ",")
            case "clientAuth":
                switch plan.client.credential {
                case .secretFile(_, let sending), .secretVariable(_, let sending): sending.rawValue
                default: "-"
                }
            case "privateKeyID":
                switch plan.client.credential {
                case .privateKey(_, let keyID): keyID ?? "-"
                default: "-"
                }
            case "loopbackPort": plan.grant.loopbackPort.map(String.init) ?? "-"
            case "deviceEndpoint": plan.provider.endpoints.deviceAuthorizationEndpoint?.absoluteString ?? "-"
            default: "?"
            }
        }
        var identity = Settings()
        identity.issuer = Self.issuer
        identity.clientID = "app"
        func with(_ settings: Settings) -> Settings {
            var merged = settings
            merged.issuer = Self.issuer
            merged.clientID = "app"
            return merged
        }
        let keptPlan = Self.kept(for: field)
        let given = try resolve(with(layer("given", 2)), layer("profile", 3), kept: keptPlan)
        let profile = try resolve(identity, layer("profile", 3), kept: keptPlan)
        let kept = try resolve(identity, nil, kept: keptPlan)
        let none = try resolve(identity)
        // A key's `kid` and a secret's sending apply to the credential the plan ends up with (here the
        // kept one): without one, they say nothing.
        let credentialBound = field == "clientAuth" || field == "privateKeyID"
        let alone = credentialBound ? keptPlan : nil
        #expect(value(given) == value(try resolve(with(layer("given", 2)), nil, kept: alone)), "given wins")
        #expect(value(given) != value(profile) && value(profile) != value(kept), "\(field): three layers, three values")
        #expect(
            value(profile) == value(try resolve(identity, layer("profile", 3), kept: alone)),
            "the profile over the kept plan")
        #expect(value(kept) == value(keptPlan), "the kept plan over the default")
        let defaults: [String: String] = [
            "scopes": "openid profile email", "clientAuth": "-", "dpop": "-", "loopbackPort": "-"
        ]
        #expect(value(none) == defaults[field, default: "-"], "\(field)'s default")
    }

    @Test func theKeptPlanSpeaksForItsOwnProviderAndClientOnly() throws {
        var other = Settings()
        other.issuer = "https://elsewhere.example.com"
        let moved = try resolve(other, nil, kept: Self.kept())
        // A kept secret, trust and endpoints never go to another issuer.
        #expect(
            moved.client.credential == .none && moved.provider.caFile == nil && moved.provider.publicKeyPins.isEmpty)
        #expect(
            moved.provider.endpoints.deviceAuthorizationEndpoint == nil
                && moved.grant == .authorizationCode(loopbackPort: nil))
        #expect(moved.clientID == "app" && moved.scopes == ["kept-scope"], "the rest is the profile's still")
        let same = try resolve(Settings(), nil, kept: Self.kept())
        #expect(same.client.credential == .secretVariable("KEPT_SECRET", sending: .post))
        #expect(same.provider.caFile == "/kept/ca.pem" && same.grant == .authorizationCode(loopbackPort: 53682))
    }

    @Test func theFilesCredentialsAndTrustStayWithTheFilesProvider() throws {
        var file = Settings(issuer: Self.issuer, clientID: "app", caFile: "/file/ca.pem")
        file.privateKeyFile = "/file/key.pem"
        file.privateKeyID = "file-kid"
        var elsewhere = Settings()
        elsewhere.issuer = "https://elsewhere.example.com"
        let moved = try resolve(elsewhere, file)
        #expect(moved.client.credential == .none && moved.provider.caFile == nil, "\(moved)")
        let home = try resolve(Settings(), file)
        #expect(home.client.credential == .privateKey(file: "/file/key.pem", keyID: "file-kid"))
        #expect(home.provider.caFile == "/file/ca.pem")
        // A new key given without its kid does not inherit the kept key's.
        var newKey = Settings()
        newKey.privateKeyFile = "/keys/new.pem"
        let rotated = try resolve(
            newKey, nil, kept: Self.kept { $0.client.credential = .privateKey(file: "/keys/old.pem", keyID: "old") })
        #expect(rotated.client.credential == .privateKey(file: "/keys/new.pem", keyID: nil))
    }

    @Test func credentialsMoveTogetherFromTheFirstLayerThatNamesOne() throws {
        var file = Settings()
        file.privateKeyFile = "/keys/app.pem"
        let fromFile = try resolve(Settings(), file, kept: Self.kept())
        #expect(fromFile.client.credential == .privateKey(file: "/keys/app.pem", keyID: nil))
        var given = Settings()
        given.clientSecretFile = "relative/secret"
        let fromGiven = try resolve(given, file, kept: Self.kept())
        #expect(
            fromGiven.client.credential
                == .secretFile(FileManager.default.currentDirectoryPath + "/relative/secret", sending: .basic))
        given.clientSecretEnv = "TWO"
        #expect(throws: OAuthError.self) { try resolve(given, file, kept: Self.kept()) }
    }

    @Test func theGrantIsGivenElseTheFilesElseTheKeptOneForTheSameClient() throws {
        let device = Self.kept { $0.grant = .deviceCode }
        #expect(try resolve(Settings(), nil, kept: device).grant == .deviceCode)
        var file = Settings()
        file.grant = .clientCredentials
        let service = try resolve(Settings(), file, kept: device)
        #expect(service.grant == .clientCredentials && service.scopes == ["kept-scope"])
        var other = Settings()
        other.clientID = "other"
        #expect(try resolve(other, nil, kept: device).grant == .authorizationCode(loopbackPort: nil))
        // A service asks for no OpenID scopes by default; a person's login for openid profile email.
        var fresh = Settings()
        fresh.issuer = Self.issuer
        fresh.clientID = "svc"
        fresh.clientSecretEnv = "S"
        fresh.grant = .clientCredentials
        #expect(try resolve(fresh).scopes == [])
        fresh.grant = nil
        #expect(try resolve(fresh).scopes == SessionPlan.defaultScopes)
        // A workload: its source from the file, its audience and grant too.
        var workload = Settings()
        workload.issuer = Self.issuer
        workload.clientID = "ci"
        workload.workload = "file:token"
        workload.workloadGrant = "jwt-bearer"
        workload.subjectTokenType = "jwt"
        let ci = try resolve(Settings(), workload)
        #expect(
            ci.grant
                == .workload(
                    SessionPlan.Workload(
                        source: "file:" + FileManager.default.currentDirectoryPath + "/token", grant: .jwtBearer,
                        subjectTokenType: "urn:ietf:params:oauth:token-type:jwt")))
        // A kept workload's source, grant and token type, for the same client.
        let again = try resolve(Settings(), nil, kept: ci)
        #expect(again.grant == ci.grant)
    }

    @Test func whatCannotBeFollowedIsAConfigurationErrorNamingNoFlag() throws {
        var cases: [(Settings, String)] = []
        cases.append((Settings(), "needs an issuer and a client id"))
        var notURL = Settings(issuer: "id.example.com", clientID: "c")
        cases.append((notURL, "not an absolute https URL"))
        notURL = Settings(issuer: Self.issuer, clientID: "c")
        notURL.grant = .clientCredentials
        cases.append((notURL, "needs the client's credentials"))
        var badAuth = Settings(issuer: Self.issuer, clientID: "c")
        badAuth.clientAuth = "jwt"
        cases.append((badAuth, "client_auth is basic or post"))
        cases.append((Settings(issuer: Self.issuer, clientID: "c", dpop: "HS256"), "not a DPoP algorithm"))
        cases.append((Settings(issuer: Self.issuer, clientID: "c", publicKeyPins: ["sha256//short"]), "pins"))
        var noSource = Settings(issuer: Self.issuer, clientID: "c")
        noSource.grant = .workload
        cases.append((noSource, "identity source"))
        for (settings, words) in cases {
            do {
                _ = try resolve(settings)
                Issue.record("resolved: \(words)")
            } catch let error as OAuthError {
                #expect(error.code == OAuthError.invalidConfiguration && error.message.contains(words), "\(error)")
                #expect(!error.message.contains("--"), "a library error names no CLI flag: \(error.message)")
                // What is missing, also as a value a caller can name its own way.
                let missing: SessionPlan.Missing? =
                    words.contains("issuer and a client id")
                    ? .issuerAndClientID : words.contains("client's credentials") ? .clientCredentials : nil
                #expect(error.underlying as? SessionPlan.Missing == missing, "\(words)")
            }
        }
    }

    /// Issue 42 §2: every login option has a config key, read and written back.
    @Test func theConfigFileSaysEverythingALoginCan() throws {
        let text = """
            [profiles.svc]
            issuer = "https://id.example.com"
            client_id = "svc"
            grant = "client_credentials"
            client_secret_env = "SVC_SECRET"
            client_auth = "post"
            audience = "https://api.example.com"
            scopes = ["read"]
            dpop = "ES256"
            port = 53682
            device_endpoint = "https://id.example.com/device"

            [profiles.ci]
            issuer = "https://id.example.com"
            client_id = "ci"
            grant = "workload"
            workload = "github"
            workload_audience = "moose"
            workload_grant = "jwt-bearer"
            subject_token_type = "jwt"
            private_key = "/keys/ci.pem"
            key_id = "ci-1"
            """
        let file = try ProfileFile(parsing: Array(text.utf8))
        let svc = try #require(file.profiles["svc"])
        #expect(svc.grant == .clientCredentials && svc.clientSecretEnv == "SVC_SECRET" && svc.clientAuth == "post")
        #expect(svc.audience == "https://api.example.com" && svc.loopbackPort == 53682)
        let ci = try #require(file.profiles["ci"])
        #expect(ci.workload == "github" && ci.workloadGrant == "jwt-bearer" && ci.privateKeyID == "ci-1")
        #expect(try ProfileFile(parsing: Array(file.serialized.utf8)) == file, "written back as read")
        let plan = try SessionPlan.resolve(name: "svc", given: Settings(), profile: svc, kept: nil)
        #expect(plan.grant == .clientCredentials && plan.scopes == ["read"])
        #expect(plan.client.credential == .secretVariable("SVC_SECRET", sending: .post))
        for bad in ["grant = \"password\"", "port = 70000", "port = \"53682\""] {
            #expect(throws: ProfileFile.ParseError.self) {
                try ProfileFile(parsing: Array("[profiles.x]\n\(bad)\n".utf8))
            }
        }
    }
}
