#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import MooseCrypto
import MooseHTTP
import MooseJWT

// MARK: - State

extension TestProvider {
    struct SigningKey {
        let kid: String
        let signer: JWTSigner
        let publicJWK: JWK
        var published = true
        var signing = true
    }

    struct ScheduledFault {
        let endpoint: Endpoint
        let fault: Fault
        var remaining: Int
    }

    struct CodeGrant {
        let clientID: String
        let redirectURI: String
        let challenge: String
        let scopes: [String]
        let nonce: String?
        let subject: String
        let authTime: Date
        let resources: [String]
        let expiresAt: Date
        let dpopJKT: String?
        var used = false
        var family: String?
    }

    struct PushedRequest {
        let clientID: String
        let fields: [(String, String)]
        let expiresAt: Date
    }

    enum DeviceStatus: Equatable {
        case pending
        case approved(subject: String, authTime: Date)
        case denied
        case used
    }

    struct DeviceGrant {
        let userCode: String
        let clientID: String
        let scopes: [String]
        let resources: [String]
        let expiresAt: Date
        var status: DeviceStatus = .pending
        var lastPoll: Date?
        var interval: Int
    }

    struct Family {
        let subject: String
        let clientID: String
        var revoked = false
    }

    struct AccessRecord {
        let subject: String
        let clientID: String
        let scopes: [String]
        let expiresAt: Date
        let issuedAt: Date
        let family: String?
        let jkt: String?
        let audience: [String]
        var revoked = false
    }

    struct RefreshRecord {
        let token: String
        let family: String
        let serial: Int
        let clientID: String
        let subject: String
        let scopes: [String]
        let resources: [String]
        let jkt: String?
        let authTime: Date?
        var spentAt: Date?
    }

    struct State {
        var user: User
        var consent: Consent = .approve
        var clockSkew: TimeInterval = 0
        var clients: [String: Client] = [:]
        var keys: [SigningKey] = []
        var keyCounter = 0
        var faults: [ScheduledFault] = []
        var recorded: [Recorded] = []
        var codes: [String: CodeGrant] = [:]
        var pushed: [String: PushedRequest] = [:]
        var devices: [String: DeviceGrant] = [:]
        var families: [String: Family] = [:]
        var accessTokens: [String: AccessRecord] = [:]
        var refreshTokens: [String: RefreshRecord] = [:]
        var serial = 0
        var assertionIDs: Set<String> = []
        var dpopNonce = TestProvider.random(16)
        var registered = 0

        init(user: User) { self.user = user }

        mutating func takeFault(for endpoint: Endpoint?, grantType: String?) -> Fault? {
            guard let endpoint else { return nil }
            guard
                let index = faults.firstIndex(where: { scheduled in
                    scheduled.remaining > 0
                        && (scheduled.endpoint == endpoint
                            || (scheduled.endpoint == .refresh && endpoint == .token && grantType == "refresh_token"))
                })
            else { return nil }
            let fault = faults[index].fault
            if faults[index].remaining != Int.max { faults[index].remaining -= 1 }
            if faults[index].remaining == 0 { faults.remove(at: index) }
            return fault
        }

        var signingKey: SigningKey? { keys.last(where: \.signing) }
    }

    static func random(_ count: Int) -> String {
        Base64URL.encode((try? SecureRandom.bytes(count: count)) ?? (0..<count).map { _ in UInt8.random(in: 0...255) })
    }
}

// MARK: - Answers

extension TestProvider {
    static func json(_ object: JSONObject, status: Int = 200, headers: HTTPFields = [:]) -> APIResponse {
        var fields = headers
        fields[.contentType] = "application/json"
        fields[.cacheControl] = "no-store"
        return APIResponse(
            status: HTTPResponse.Status(code: status), headerFields: fields,
            body: Data(JSONValue.object(object).serialized().utf8))
    }

    static func oauthError(_ code: String, _ description: String, status: Int = 400, headers: HTTPFields = [:])
        -> APIResponse
    {
        json(["error": .string(code), "error_description": .string(description)], status: status, headers: headers)
    }

    /// An HTML page; `text` is escaped (it may quote a request's parameter name).
    static func page(_ status: Int, _ text: String) -> APIResponse {
        var escaped = ""
        for character in text.unicodeScalars {
            switch character {
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "&": escaped += "&amp;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return APIResponse(
            status: HTTPResponse.Status(code: status), headerFields: [.contentType: "text/html; charset=utf-8"],
            body: Data("<!doctype html><title>\(status)</title><p>\(escaped)</p>".utf8))
    }

    static func redirect(_ location: String) -> APIResponse {
        var fields = HTTPFields()
        fields[.location] = location
        fields[.cacheControl] = "no-store"
        return APIResponse(status: .found, headerFields: fields)
    }

    /// The scripted answer, or `nil` for a fault that lets the real answer through (possibly changed).
    func answer(_ fault: Fault, to request: APIRequest, at endpoint: Endpoint?, form: [(String, String)])
        async throws -> APIResponse?
    {
        switch fault {
        case .status(let code): return APIResponse(status: HTTPResponse.Status(code: code))
        case .htmlPage(let code): return Self.page(code, "Something went wrong. Please try again later.")
        case .tooManyRequests(let seconds):
            var fields = HTTPFields()
            fields[.retryAfter] = String(max(0, seconds))
            fields[.contentType] = "text/plain"
            return APIResponse(status: .tooManyRequests, headerFields: fields, body: Data("slow down".utf8))
        case .slow(let seconds):
            try await Task.sleep(nanoseconds: UInt64(max(0, min(seconds, 3600)) * 1_000_000_000))
            return nil
        case .dropConnection:
            throw HTTPRequestError(
                HTTPRequestError.transport, "the connection was dropped (TestProvider fault)", method: request.method,
                url: request.redactedURL)
        case .oauthError(let code, let status): return Self.oauthError(code, "scripted", status: status)
        case .withoutRefreshToken, .expiresIn, .discoveryIssuer:
            guard let endpoint else { return nil }
            let real = try await handle(request, at: endpoint, form: form)
            guard real.status.code == 200, var object = (try? JSONValue(parsing: Array(real.body)))?.objectValue
            else { return real }
            switch fault {
            case .withoutRefreshToken:
                // A provider that does not rotate: the presented refresh token stays live, none is issued.
                let issued = object["refresh_token"]?.stringValue
                let presented = form.first { $0.0 == "refresh_token" }?.1
                state.withLock { state in
                    if let issued { state.refreshTokens[issued] = nil }
                    if let presented { state.refreshTokens[presented]?.spentAt = nil }
                }
                object["refresh_token"] = nil
            case .expiresIn(let seconds): object["expires_in"] = seconds.map { .number(JSONNumber(Int64($0))) }
            case .discoveryIssuer(let other): object["issuer"] = .string(other)
            default: break
            }
            return Self.json(object, status: 200, headers: real.headerFields)
        }
    }

    func handle(_ request: APIRequest, at endpoint: Endpoint, form: [(String, String)]) async throws -> APIResponse {
        switch endpoint {
        case .openIDConfiguration, .authorizationServerMetadata:
            return request.method == .get ? Self.json(discoveryDocument) : Self.page(405, "GET only")
        case .jwks:
            var fields = HTTPFields()
            fields[.contentType] = "application/json"
            fields[.cacheControl] = "public, max-age=300"
            return APIResponse(status: .ok, headerFields: fields, body: Data(jwks.utf8))
        case .authorization: return authorize(form)
        case .pushedAuthorization: return postOnly(request) ?? pushAuthorization(request, form)
        case .deviceAuthorization: return postOnly(request) ?? startDevice(request, form)
        case .deviceVerification:
            guard let userCode = form.first(where: { $0.0 == "user_code" })?.1 else {
                return Self.page(200, "Enter the code shown on your device: ?user_code=XXXX-XXXX")
            }
            let consent = consent
            guard enterUserCode(userCode, consent: consent) else {
                return Self.page(400, "That code is unknown, expired or already answered.")
            }
            return Self.page(200, consent == .approve ? "Your device is signed in." : "The request was refused.")
        case .token, .refresh: return postOnly(request) ?? token(request, form)
        case .revocation: return postOnly(request) ?? revoke(request, form)
        case .introspection: return postOnly(request) ?? introspect(request, form)
        case .userInfo: return userInfo(request)
        case .endSession: return endSession(form)
        case .registration: return postOnly(request) ?? register(request)
        }
    }

    private func postOnly(_ request: APIRequest) -> APIResponse? {
        request.method == .post ? nil : Self.oauthError("invalid_request", "this endpoint takes POST", status: 405)
    }

    var discoveryDocument: JSONObject {
        let algorithm = JSONValue.string(configuration.signingAlgorithm.rawValue)
        var document: JSONObject = [
            "issuer": .string(issuer),
            "authorization_endpoint": .string(url(of: .authorization)),
            "token_endpoint": .string(url(of: .token)),
            "jwks_uri": .string(url(of: .jwks)),
            "userinfo_endpoint": .string(url(of: .userInfo)),
            "revocation_endpoint": .string(url(of: .revocation)),
            "introspection_endpoint": .string(url(of: .introspection)),
            "end_session_endpoint": .string(url(of: .endSession)),
            "registration_endpoint": .string(url(of: .registration)),
            "pushed_authorization_request_endpoint": .string(url(of: .pushedAuthorization)),
            "device_authorization_endpoint": .string(url(of: .deviceAuthorization)),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": [
                "authorization_code", "refresh_token", "client_credentials",
                "urn:ietf:params:oauth:grant-type:device_code", "urn:ietf:params:oauth:grant-type:token-exchange",
                "urn:ietf:params:oauth:grant-type:jwt-bearer"
            ],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": [
                "none", "client_secret_basic", "client_secret_post", "private_key_jwt"
            ],
            "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256", "PS256", "EdDSA"],
            "id_token_signing_alg_values_supported": .array([algorithm]),
            "dpop_signing_alg_values_supported": ["ES256", "RS256", "PS256", "EdDSA"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "subject_types_supported": ["public"],
            "claims_supported": ["sub", "name", "email", "email_verified", "preferred_username"],
            "authorization_response_iss_parameter_supported": true
        ]
        if configuration.requiresPushedAuthorization { document["require_pushed_authorization_requests"] = true }
        return document
    }

    // MARK: Client authentication

    enum Authenticated {
        case client(Client)
        case refused(APIResponse)
    }

    /// RFC 6749 §2.3: exactly one method — HTTP Basic, the form's secret, a private_key_jwt assertion,
    /// or (a public client) the client id alone.
    func authenticate(_ request: APIRequest, _ form: [(String, String)], audience: String, state: inout State)
        -> Authenticated
    {
        func field(_ name: String) -> String? { form.first { $0.0 == name }?.1 }
        func refuse(_ text: String, basic: Bool = false) -> Authenticated {
            var headers = HTTPFields()
            if basic { headers[.wwwAuthenticate] = "Basic realm=\"\(issuer)\"" }
            return .refused(Self.oauthError("invalid_client", text, status: 401, headers: headers))
        }
        var presented: [(id: String, secret: String?, assertion: String?)] = []
        if let header = request.headerFields[.authorization], header.lowercased().hasPrefix("basic ") {
            guard let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingASCIIWhitespace()),
                let text = String(validating: Array(decoded), as: UTF8.self), let colon = text.firstIndex(of: ":")
            else { return refuse("the Basic credentials are not base64 of id:secret", basic: true) }
            let id = RequestBuilder.decodeForm("a=" + String(text[..<colon])).first?.1 ?? ""
            let secret = RequestBuilder.decodeForm("a=" + String(text[text.index(after: colon)...])).first?.1 ?? ""
            presented.append((id, secret, nil))
        }
        if let secret = field("client_secret") { presented.append((field("client_id") ?? "", secret, nil)) }
        if let assertion = field("client_assertion") {
            guard field("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" else {
                return refuse("client_assertion_type must be urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
            }
            let subject = (try? JWT(compact: assertion))?.claims.subject ?? ""
            presented.append((subject, nil, assertion))
        }
        if presented.count > 1 {
            return .refused(Self.oauthError("invalid_request", "more than one client authentication method was used"))
        }
        guard let credential = presented.first else {
            guard let id = field("client_id"), let client = state.clients[id] else {
                return refuse("unknown client")
            }
            guard case .none = client.authentication else { return refuse("this client must authenticate") }
            return .client(client)
        }
        if let id = field("client_id"), !Self.same(id, credential.id) {
            return .refused(Self.oauthError("invalid_request", "client_id does not match the authenticated client"))
        }
        guard let client = state.clients[credential.id] else {
            return refuse("unknown client", basic: credential.secret != nil)
        }
        switch client.authentication {
        case .none: return refuse("a public client has no secret")
        case .secret(let expected):
            guard let secret = credential.secret,
                ConstantTime.equals(Array(secret.utf8), Array(expected.utf8))
            else { return refuse("wrong client secret", basic: credential.secret != nil) }
            return .client(client)
        case .privateKeyJWT(let jwk):
            guard let assertion = credential.assertion, let key = try? jwk.verificationKey() else {
                return refuse("this client authenticates with private_key_jwt")
            }
            let now = now(state)
            let verifier = JWTVerifier(
                keys: [key], allowedAlgorithms: DPoPProofVerifier.asymmetricAlgorithms,
                // OIDC Core §9: the token endpoint's URL (or the issuer) is the audience, at every endpoint.
                validation: ClaimValidation(
                    issuer: client.id, audiences: [issuer, audience, url(of: .token)], leeway: 5,
                    requiredClaims: ["exp", "jti"],
                    clock: { now }))
            guard let jwt = try? verifier.verify(assertion), let subject = jwt.claims.subject,
                Self.same(subject, client.id), let jti = jwt.claims.jwtID
            else { return refuse("the client assertion does not verify") }
            guard state.assertionIDs.insert(client.id + " " + jti).inserted else {
                return refuse("the client assertion was used before (jti)")
            }
            return .client(client)
        }
    }

    // MARK: Authorization

    func authorize(_ query: [(String, String)]) -> APIResponse {
        state.withLock { state in
            var fields = query
            func field(_ name: String) -> String? { fields.first { $0.0 == name }?.1 }
            if let repeated = Self.repeatedParameter(query) {
                return Self.page(400, "\(repeated) appears more than once (RFC 6749 §3.1)")
            }
            if let requestURI = field("request_uri") {
                guard let pushed = state.pushed.removeValue(forKey: requestURI), pushed.expiresAt > now(state),
                    let clientID = field("client_id"), Self.same(clientID, pushed.clientID)
                else { return Self.page(400, "request_uri is unknown, expired, used or another client's") }
                fields = pushed.fields
            } else if configuration.requiresPushedAuthorization {
                return Self.page(400, "this provider requires pushed authorization requests (RFC 9126)")
            }
            guard let clientID = field("client_id"), let client = state.clients[clientID] else {
                return Self.page(400, "unknown client_id")
            }
            guard let redirect = field("redirect_uri"), Self.matches(redirect, client.redirectURIs) else {
                return Self.page(400, "redirect_uri is not registered for this client")
            }
            let stateValue = field("state")
            func back(_ items: [(String, String)]) -> APIResponse {
                var all = items
                if let stateValue { all.append(("state", stateValue)) }
                all.append(("iss", issuer))
                let query = RequestBuilder.encodeForm(all)
                return Self.redirect(redirect + (redirect.contains("?") ? "&" : "?") + query)
            }
            guard field("response_type") == "code" else {
                return back([("error", "unsupported_response_type"), ("error_description", "only code")])
            }
            guard let challenge = field("code_challenge"), field("code_challenge_method") == "S256",
                challenge.utf8.count == 43
            else {
                return back([("error", "invalid_request"), ("error_description", "PKCE with S256 is required")])
            }
            switch state.consent {
            case .deny: return back([("error", "access_denied"), ("error_description", "the user said no")])
            case .closeBrowser: return Self.page(499, "the user closed the browser")
            case .approve: break
            }
            let code = Self.random(24)
            state.codes[code] = CodeGrant(
                clientID: client.id, redirectURI: redirect, challenge: challenge,
                scopes: Self.scopes(field("scope")), nonce: field("nonce"), subject: state.user.subject,
                authTime: now(state), resources: fields.filter { $0.0 == "resource" }.map(\.1),
                expiresAt: now(state).addingTimeInterval(configuration.authorizationCodeLifetime),
                dpopJKT: field("dpop_jkt"))
            return back([("code", code)])
        }
    }

    /// A parameter other than `resource` and `audience` that appears twice (RFC 6749 §3.1: MUST NOT).
    static func repeatedParameter(_ form: [(String, String)]) -> String? {
        var seen: Set<String> = []
        for (name, _) in form where name != "resource" && name != "audience" {
            if !seen.insert(name).inserted { return name }
        }
        return nil
    }

    /// Exact, byte for byte; a registered loopback URI without a port matches any port (RFC 8252 §7.3).
    static func matches(_ redirect: String, _ registered: [String]) -> Bool {
        for candidate in registered {
            if same(candidate, redirect) { return true }
            guard let wanted = URLComponents(string: candidate), wanted.port == nil, wanted.scheme == "http",
                ["127.0.0.1", "[::1]", "::1"].contains(wanted.host ?? ""),
                var given = URLComponents(string: redirect), given.port != nil
            else { continue }
            given.port = nil
            if let text = given.string, same(text, candidate) { return true }
        }
        return false
    }

    static func scopes(_ text: String?) -> [String] {
        (text ?? "").split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    }

    func pushAuthorization(_ request: APIRequest, _ form: [(String, String)]) -> APIResponse {
        state.withLock { state in
            let client: Client
            switch authenticate(request, form, audience: url(of: .pushedAuthorization), state: &state) {
            case .refused(let answer): return answer
            case .client(let known): client = known
            }
            if form.contains(where: { $0.0 == "request_uri" }) {
                return Self.oauthError("invalid_request", "request_uri is not allowed in a pushed request")
            }
            guard let redirect = form.first(where: { $0.0 == "redirect_uri" })?.1,
                Self.matches(redirect, client.redirectURIs)
            else { return Self.oauthError("invalid_request", "redirect_uri is not registered for this client") }
            let uri = "urn:ietf:params:oauth:request_uri:" + Self.random(16)
            let kept = form.filter { !["client_secret", "client_assertion", "client_assertion_type"].contains($0.0) }
            state.pushed[uri] = PushedRequest(
                clientID: client.id, fields: kept + [("client_id", client.id)],
                expiresAt: now(state).addingTimeInterval(60))
            return Self.json(["request_uri": .string(uri), "expires_in": 60], status: 201)
        }
    }

    func startDevice(_ request: APIRequest, _ form: [(String, String)]) -> APIResponse {
        state.withLock { state in
            let client: Client
            switch authenticate(request, form, audience: url(of: .deviceAuthorization), state: &state) {
            case .refused(let answer): return answer
            case .client(let known): client = known
            }
            let deviceCode = Self.random(24)
            let letters = Array("BCDFGHJKLMNPQRSTVWXZ")
            let userCode = String((0..<8).map { _ in letters[Int.random(in: 0..<letters.count)] })
            let shown = String(userCode.prefix(4)) + "-" + String(userCode.suffix(4))
            state.devices[deviceCode] = DeviceGrant(
                userCode: shown, clientID: client.id, scopes: Self.scopes(form.first { $0.0 == "scope" }?.1),
                resources: form.filter { $0.0 == "resource" }.map(\.1),
                expiresAt: now(state).addingTimeInterval(TimeInterval(configuration.deviceCodeLifetime)),
                interval: configuration.deviceInterval)
            let verification = url(of: .deviceVerification)
            return Self.json([
                "device_code": .string(deviceCode), "user_code": .string(shown),
                "verification_uri": .string(verification),
                "verification_uri_complete": .string(verification + "?user_code=" + shown),
                "expires_in": .number(JSONNumber(Int64(configuration.deviceCodeLifetime))),
                "interval": .number(JSONNumber(Int64(configuration.deviceInterval)))
            ])
        }
    }
}
