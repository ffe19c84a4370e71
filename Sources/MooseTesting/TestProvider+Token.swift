#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import HTTPTypes
import MooseCrypto
import MooseHTTP
import MooseJWT
public import MooseOAuth

// MARK: - The token endpoint

extension TestProvider {
    static let deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"
    static let exchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
    static let bearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    /// A grant's outcome: tokens to issue, or the refusal to answer with.
    enum Decision {
        case issue(Issue)
        case refused(APIResponse)
    }

    /// What one grant decided: who, for which client, with which scopes and resources.
    struct Issue {
        var client: Client
        var subject: String
        var scopes: [String]
        var resources: [String]
        /// The refresh token's scopes and resources when they differ from the access token's (a narrowed refresh).
        var refreshScopes: [String]? = nil
        var refreshResources: [String]? = nil
        var family: String?
        var withRefresh: Bool
        var nonce: String? = nil
        var authTime: Date? = nil
        var exchanged = false
    }

    func token(_ request: APIRequest, _ form: [(String, String)]) -> APIResponse {
        state.withLock { state in
            func field(_ name: String) -> String? { form.first { $0.0 == name }?.1 }
            if let repeated = Self.repeatedParameter(form) {
                return Self.oauthError("invalid_request", "\(repeated) appears more than once (RFC 6749 §3.2)")
            }
            let client: Client
            switch authenticate(request, form, audience: url(of: .token), state: &state) {
            case .refused(let answer): return answer
            case .client(let known): client = known
            }
            // DPoP (RFC 9449 §5): one proof, for POST at the token endpoint, with the nonce when one is asked.
            var jkt: String? = nil
            let proofs = request.headerFields[values: HTTPField.Name("DPoP") ?? .authorization]
            if proofs.count > 1 { return Self.oauthError("invalid_dpop_proof", "more than one DPoP header") }
            if let proof = proofs.first {
                let now = now(state)
                let verifier = DPoPProofVerifier(clock: { now })
                let checked: DPoPProof
                do {
                    checked = try verifier.verify(proof, method: "POST", url: url(of: .token))
                } catch let error as JWTError {
                    return Self.oauthError("invalid_dpop_proof", "the DPoP proof does not verify: \(error.message)")
                } catch {
                    return Self.oauthError("invalid_dpop_proof", "the DPoP proof does not verify")
                }
                if configuration.requiresDPoPNonce,
                    !(checked.nonce.map { Self.same($0, state.dpopNonce) } ?? false)
                {
                    var headers = HTTPFields()
                    headers[HTTPField.Name("DPoP-Nonce") ?? .cacheControl] = state.dpopNonce
                    return Self.oauthError("use_dpop_nonce", "a DPoP nonce is required", headers: headers)
                }
                jkt = checked.thumbprint
            }
            let decided: Decision
            switch field("grant_type") ?? "" {
            case "authorization_code": decided = redeemCode(client, form, jkt: jkt, state: &state)
            case "refresh_token": decided = refresh(client, form, jkt: jkt, state: &state)
            case "client_credentials":
                guard client.authentication != .none else {
                    return Self.oauthError("unauthorized_client", "a public client cannot use client_credentials")
                }
                var resources = form.filter { $0.0 == "resource" }.map(\.1)
                if let audience = field("audience") { resources.append(audience) }
                decided = .issue(
                    Issue(
                        client: client, subject: client.id, scopes: Self.scopes(field("scope")), resources: resources,
                        withRefresh: configuration.refreshTokenForClientCredentials))
            case Self.deviceGrant: decided = pollDevice(client, form, state: &state)
            case Self.exchangeGrant, Self.bearerGrant: decided = assertionGrant(client, form, state: &state)
            default: return Self.oauthError("unsupported_grant_type", "grant_type \(field("grant_type") ?? "(none)")")
            }
            switch decided {
            case .refused(let answer): return answer
            case .issue(let issue): return mint(issue, jkt: jkt, state: &state)
            }
        }
    }

    private func redeemCode(_ client: Client, _ form: [(String, String)], jkt: String?, state: inout State)
        -> Decision
    {
        func field(_ name: String) -> String? { form.first { $0.0 == name }?.1 }
        guard let code = field("code"), var grant = state.codes[code] else {
            return .refused(Self.oauthError("invalid_grant", "unknown authorization code"))
        }
        guard !grant.used else {
            // RFC 6749 §4.1.2: a code used twice revokes what it gave.
            if let family = grant.family { state.families[family]?.revoked = true }
            return .refused(Self.oauthError("invalid_grant", "the authorization code was already used"))
        }
        guard grant.expiresAt > now(state) else {
            return .refused(Self.oauthError("invalid_grant", "the authorization code expired"))
        }
        guard Self.same(grant.clientID, client.id) else {
            return .refused(Self.oauthError("invalid_grant", "the code was issued to another client"))
        }
        guard let redirect = field("redirect_uri"), Self.same(redirect, grant.redirectURI) else {
            return .refused(Self.oauthError("invalid_grant", "redirect_uri differs from the authorization request's"))
        }
        guard let verifier = field("code_verifier"),
            Self.same(Base64URL.encode(DigestAlgorithm.sha256.hash(Array(verifier.utf8))), grant.challenge)
        else { return .refused(Self.oauthError("invalid_grant", "PKCE verification failed")) }
        // RFC 8707 §2.2: the token request may name the resources authorized, or some of them, never others.
        let asked = form.filter { $0.0 == "resource" }.map(\.1)
        guard asked.allSatisfy({ wanted in grant.resources.contains { Self.same($0, wanted) } }) else {
            return .refused(Self.oauthError("invalid_target", "a resource the authorization did not name"))
        }
        if let bound = grant.dpopJKT, !(jkt.map { Self.same($0, bound) } ?? false) {
            return .refused(Self.oauthError("invalid_dpop_proof", "the proof's key is not the one dpop_jkt named"))
        }
        let family = Self.random(12)
        state.families[family] = Family(subject: grant.subject, clientID: client.id)
        grant.used = true
        grant.family = family
        state.codes[code] = grant
        return .issue(
            Issue(
                client: client, subject: grant.subject, scopes: grant.scopes,
                resources: asked.isEmpty ? grant.resources : asked, refreshResources: grant.resources, family: family,
                withRefresh: true, nonce: grant.nonce, authTime: grant.authTime))
    }

    private func refresh(_ client: Client, _ form: [(String, String)], jkt: String?, state: inout State)
        -> Decision
    {
        func field(_ name: String) -> String? { form.first { $0.0 == name }?.1 }
        guard let token = field("refresh_token"), let record = state.refreshTokens[token] else {
            return .refused(Self.oauthError("invalid_grant", "unknown refresh token"))
        }
        guard Self.same(record.clientID, client.id) else {
            return .refused(Self.oauthError("invalid_grant", "the refresh token was issued to another client"))
        }
        guard state.families[record.family]?.revoked == false else {
            return .refused(Self.oauthError("invalid_grant", "the refresh token was revoked"))
        }
        let now = now(state)
        if let spent = record.spentAt,
            !(configuration.reuseGraceWindow > 0 && now.timeIntervalSince(spent) <= configuration.reuseGraceWindow)
        {
            // Reuse of a rotated token: the family is revoked, the thief's and the owner's tokens alike.
            state.families[record.family]?.revoked = true
            return .refused(
                Self.oauthError("invalid_grant", "the refresh token was already used; the session is revoked"))
        }
        if let bound = record.jkt, client.authentication == .none, !(jkt.map { Self.same($0, bound) } ?? false) {
            return .refused(Self.oauthError("invalid_dpop_proof", "the refresh token is bound to another DPoP key"))
        }
        var scopes = record.scopes
        if let asked = field("scope") {
            let wanted = Self.scopes(asked)
            guard wanted.allSatisfy(record.scopes.contains) else {
                return .refused(Self.oauthError("invalid_scope", "a refresh cannot widen the scopes"))
            }
            scopes = wanted
        }
        if configuration.rotatesRefreshTokens, record.spentAt == nil { state.refreshTokens[token]?.spentAt = now }
        let resources = form.filter { $0.0 == "resource" }.map(\.1)
        guard resources.allSatisfy({ wanted in record.resources.contains { Self.same($0, wanted) } }) else {
            return .refused(Self.oauthError("invalid_target", "a resource the refresh token was not granted for"))
        }
        return .issue(
            Issue(
                client: client, subject: record.subject, scopes: scopes,
                resources: resources.isEmpty ? record.resources : resources, refreshScopes: record.scopes,
                refreshResources: record.resources, family: record.family,
                withRefresh: configuration.rotatesRefreshTokens, authTime: record.authTime))
    }

    private func pollDevice(_ client: Client, _ form: [(String, String)], state: inout State)
        -> Decision
    {
        guard let code = form.first(where: { $0.0 == "device_code" })?.1, var grant = state.devices[code],
            Self.same(grant.clientID, client.id)
        else { return .refused(Self.oauthError("invalid_grant", "unknown device code")) }
        let now = now(state)
        defer { state.devices[code] = grant }
        guard grant.expiresAt > now else {
            return .refused(Self.oauthError("expired_token", "the device code expired"))
        }
        if let last = grant.lastPoll, now.timeIntervalSince(last) < TimeInterval(grant.interval) - 0.05 {
            grant.interval += 5
            grant.lastPoll = now
            return .refused(Self.oauthError("slow_down", "polled faster than the interval"))
        }
        grant.lastPoll = now
        switch grant.status {
        case .pending: return .refused(Self.oauthError("authorization_pending", "the user has not answered yet"))
        case .denied: return .refused(Self.oauthError("access_denied", "the user said no"))
        case .used: return .refused(Self.oauthError("invalid_grant", "the device code was already used"))
        case .approved(let subject, let authTime):
            grant.status = .used
            let family = Self.random(12)
            state.families[family] = Family(subject: subject, clientID: client.id)
            return .issue(
                Issue(
                    client: client, subject: subject, scopes: grant.scopes, resources: grant.resources,
                    family: family, withRefresh: true, authTime: authTime))
        }
    }

    /// RFC 8693 token exchange and RFC 7523 JWT bearer: the subject token (or assertion) must be one of
    /// this provider's live access tokens, or a JWT signed by `trustedAssertionKeys` for this issuer.
    private func assertionGrant(_ client: Client, _ form: [(String, String)], state: inout State)
        -> Decision
    {
        func field(_ name: String) -> String? { form.first { $0.0 == name }?.1 }
        let exchange = field("grant_type") == Self.exchangeGrant
        guard let token = exchange ? field("subject_token") : field("assertion") else {
            return .refused(
                Self.oauthError("invalid_request", exchange ? "subject_token is missing" : "assertion is missing"))
        }
        if exchange, field("subject_token_type") == nil {
            return .refused(Self.oauthError("invalid_request", "subject_token_type is missing"))
        }
        let now = now(state)
        var subject: String? = nil
        if let record = state.accessTokens[token], !record.revoked, record.expiresAt > now,
            state.families[record.family ?? ""]?.revoked != true
        {
            subject = record.subject
        } else if !configuration.trustedAssertionKeys.isEmpty {
            let verifier = JWTVerifier(
                keys: configuration.trustedAssertionKeys, allowedAlgorithms: DPoPProofVerifier.asymmetricAlgorithms,
                validation: ClaimValidation(
                    audiences: [issuer, url(of: .token)], leeway: 5, acceptsAnyAudience: exchange,
                    requiredClaims: ["exp", "sub"], clock: { now }))
            subject = (try? verifier.verify(token))?.claims.subject
        }
        guard let subject else {
            return .refused(Self.oauthError("invalid_grant", "the subject token is not one this provider trusts"))
        }
        var resources = form.filter { $0.0 == "resource" }.map(\.1)
        resources += form.filter { $0.0 == "audience" }.map(\.1)
        var issue = Issue(
            client: client, subject: subject, scopes: Self.scopes(field("scope")), resources: resources,
            withRefresh: false)
        issue.exchanged = exchange
        return .issue(issue)
    }

    /// The token response for a decided grant: an access token (RFC 9068 JWT or opaque), a refresh
    /// token in the grant's family, and an ID token with `nonce`, `at_hash` and `auth_time` for `openid`.
    func mint(_ issue: Issue, jkt: String?, state: inout State) -> APIResponse {
        let now = now(state)
        let lifetime = configuration.accessTokenLifetime
        let expiresAt = now.addingTimeInterval(TimeInterval(lifetime))
        let audience = issue.resources.isEmpty ? [configuration.defaultAudience ?? issue.client.id] : issue.resources
        guard let key = state.signingKey else { return Self.oauthError("server_error", "no signing key", status: 500) }
        let accessToken: String
        switch configuration.accessTokenFormat {
        case .opaque: accessToken = Self.random(32)
        case .jwt:
            var claims: JSONObject = [
                "iss": .string(issuer), "sub": .string(issue.subject),
                "aud": audience.count == 1 ? .string(audience[0]) : .array(audience.map { .string($0) }),
                "exp": Self.seconds(expiresAt), "iat": Self.seconds(now), "jti": .string(Self.random(12)),
                "client_id": .string(issue.client.id)
            ]
            if !issue.scopes.isEmpty { claims["scope"] = .string(issue.scopes.joined(separator: " ")) }
            if let authTime = issue.authTime { claims["auth_time"] = Self.seconds(authTime) }
            if let jkt { claims["cnf"] = .object(["jkt": .string(jkt)]) }
            for member in issue.client.extraClaims where claims[member.key] == nil { claims[member.key] = member.value }
            guard let signed = try? key.signer.sign(claims, extraHeader: ["typ": "at+jwt"]) else {
                return Self.oauthError("server_error", "signing failed", status: 500)
            }
            accessToken = signed
        }
        state.accessTokens[accessToken] = AccessRecord(
            subject: issue.subject, clientID: issue.client.id, scopes: issue.scopes, expiresAt: expiresAt,
            issuedAt: now,
            family: issue.family, jkt: jkt, audience: audience)
        var response: JSONObject = [
            "access_token": .string(accessToken), "token_type": .string(jkt == nil ? "Bearer" : "DPoP"),
            "expires_in": .number(JSONNumber(Int64(lifetime)))
        ]
        if !issue.scopes.isEmpty { response["scope"] = .string(issue.scopes.joined(separator: " ")) }
        if issue.exchanged { response["issued_token_type"] = "urn:ietf:params:oauth:token-type:access_token" }
        if issue.withRefresh {
            let family = issue.family ?? Self.random(12)
            if state.families[family] == nil {
                state.families[family] = Family(subject: issue.subject, clientID: issue.client.id)
            }
            let refreshToken = Self.random(32)
            state.serial += 1
            state.refreshTokens[refreshToken] = RefreshRecord(
                token: refreshToken, family: family, serial: state.serial, clientID: issue.client.id,
                subject: issue.subject, scopes: issue.refreshScopes ?? issue.scopes,
                resources: issue.refreshResources ?? issue.resources, jkt: jkt,
                authTime: issue.authTime)
            response["refresh_token"] = .string(refreshToken)
        }
        if issue.scopes.contains("openid"), issue.subject != issue.client.id {
            var claims: JSONObject = [
                "iss": .string(issuer), "sub": .string(issue.subject), "aud": .string(issue.client.id),
                "exp": Self.seconds(now.addingTimeInterval(TimeInterval(configuration.idTokenLifetime))),
                "iat": Self.seconds(now), "azp": .string(issue.client.id),
                "at_hash": .string(Self.leftHalfHash(accessToken, algorithm: key.signer.algorithm))
            ]
            if let nonce = issue.nonce { claims["nonce"] = .string(nonce) }
            if let authTime = issue.authTime { claims["auth_time"] = Self.seconds(authTime) }
            for member in state.user.claims where issue.subject == state.user.subject && claims[member.key] == nil {
                claims[member.key] = member.value
            }
            if let idToken = try? key.signer.sign(claims) { response["id_token"] = .string(idToken) }
        }
        return Self.json(response)
    }

    static func seconds(_ date: Date) -> JSONValue {
        .number(JSONNumber(Int64(date.timeIntervalSince1970.rounded(.down))))
    }

    /// OIDC Core §3.1.3.6: the left half of the access token's hash, by the ID token's algorithm's hash.
    static func leftHalfHash(_ token: String, algorithm: JWTAlgorithm) -> String {
        let digest: DigestAlgorithm
        switch algorithm {
        case .rs384, .ps384, .es384, .hs384: digest = .sha384
        case .rs512, .ps512, .es512, .hs512, .eddsa, .ed25519: digest = .sha512
        default: digest = .sha256
        }
        let hash = digest.hash(Array(token.utf8))
        return Base64URL.encode(hash.prefix(hash.count / 2))
    }

    // MARK: - Revocation, introspection, UserInfo, logout, registration

    func revoke(_ request: APIRequest, _ form: [(String, String)]) -> APIResponse {
        state.withLock { state in
            let client: Client
            switch authenticate(request, form, audience: url(of: .revocation), state: &state) {
            case .refused(let answer): return answer
            case .client(let known): client = known
            }
            guard let token = form.first(where: { $0.0 == "token" })?.1 else {
                return Self.oauthError("invalid_request", "token is missing")
            }
            // RFC 7009 §2.1: another client's token is refused; §2.2: an unknown one is answered 200.
            if let record = state.refreshTokens[token] {
                guard Self.same(record.clientID, client.id) else {
                    return Self.oauthError("invalid_request", "the token was issued to another client")
                }
                state.families[record.family]?.revoked = true
            } else if let record = state.accessTokens[token] {
                guard Self.same(record.clientID, client.id) else {
                    return Self.oauthError("invalid_request", "the token was issued to another client")
                }
                state.accessTokens[token]?.revoked = true
            }
            return APIResponse(status: .ok)
        }
    }

    func introspect(_ request: APIRequest, _ form: [(String, String)]) -> APIResponse {
        state.withLock { state in
            switch authenticate(request, form, audience: url(of: .introspection), state: &state) {
            case .refused(let answer): return answer
            case .client(let client) where client.authentication == .none:
                return Self.oauthError("invalid_client", "introspection needs an authenticated client", status: 401)
            case .client: break
            }
            guard let token = form.first(where: { $0.0 == "token" })?.1 else {
                return Self.oauthError("invalid_request", "token is missing")
            }
            let now = now(state)
            if let record = state.accessTokens[token], !record.revoked, record.expiresAt > now,
                state.families[record.family ?? ""]?.revoked != true
            {
                var answer: JSONObject = [
                    "active": true, "iss": .string(issuer), "sub": .string(record.subject),
                    "client_id": .string(record.clientID), "exp": Self.seconds(record.expiresAt),
                    "iat": Self.seconds(record.issuedAt), "token_type": .string(record.jkt == nil ? "Bearer" : "DPoP"),
                    "aud": .array(record.audience.map { .string($0) })
                ]
                if !record.scopes.isEmpty { answer["scope"] = .string(record.scopes.joined(separator: " ")) }
                if let jkt = record.jkt { answer["cnf"] = .object(["jkt": .string(jkt)]) }
                return Self.json(answer)
            }
            if let record = state.refreshTokens[token], record.spentAt == nil,
                state.families[record.family]?.revoked == false
            {
                return Self.json([
                    "active": true, "sub": .string(record.subject), "client_id": .string(record.clientID),
                    "token_type": "refresh_token"
                ])
            }
            return Self.json(["active": false])
        }
    }

    func userInfo(_ request: APIRequest) -> APIResponse {
        state.withLock { state in
            func refuse(_ text: String) -> APIResponse {
                var headers = HTTPFields()
                headers[.wwwAuthenticate] = "Bearer error=\"invalid_token\", error_description=\"\(text)\""
                headers[.contentType] = "text/plain"
                return APIResponse(status: .unauthorized, headerFields: headers)
            }
            guard let header = request.headerFields[.authorization], let space = header.firstIndex(of: " ") else {
                var headers = HTTPFields()
                headers[.wwwAuthenticate] = "Bearer realm=\"\(issuer)\""
                return APIResponse(status: .unauthorized, headerFields: headers)
            }
            let scheme = header[..<space].lowercased()
            let token = String(header[header.index(after: space)...]).trimmingASCIIWhitespace()
            guard let record = state.accessTokens[token], !record.revoked, record.expiresAt > now(state),
                state.families[record.family ?? ""]?.revoked != true
            else { return refuse("the access token is unknown, expired or revoked") }
            if let jkt = record.jkt {
                let now = now(state)
                guard scheme == "dpop", let proof = request.headerFields[HTTPField.Name("DPoP") ?? .authorization],
                    let checked = try? DPoPProofVerifier(clock: { now }).verify(
                        proof, method: request.method.rawValue, url: url(of: .userInfo), accessToken: token),
                    Self.same(checked.thumbprint, jkt)
                else { return refuse("a DPoP-bound token needs its proof") }
            } else if scheme != "bearer" {
                return refuse("unsupported scheme")
            }
            // OIDC Core §5.3: UserInfo answers tokens issued for `openid` only.
            guard record.scopes.contains("openid") else {
                var headers = HTTPFields()
                headers[.wwwAuthenticate] = "Bearer error=\"insufficient_scope\", scope=\"openid\""
                return APIResponse(status: .forbidden, headerFields: headers)
            }
            var claims: JSONObject = ["sub": .string(record.subject)]
            if record.subject == state.user.subject {
                for member in state.user.claims { claims[member.key] = member.value }
            }
            return Self.json(claims)
        }
    }

    func endSession(_ query: [(String, String)]) -> APIResponse {
        state.withLock { state in
            func field(_ name: String) -> String? { query.first { $0.0 == name }?.1 }
            guard let target = field("post_logout_redirect_uri") else { return Self.page(200, "You are signed out.") }
            // Registered redirect URIs of the client named (by client_id or the ID token's aud) only.
            var clientID = field("client_id")
            if clientID == nil, let hint = field("id_token_hint"), let jwt = try? JWT(compact: hint) {
                clientID = jwt.claims.audience?.first
            }
            guard let clientID, let client = state.clients[clientID], Self.matches(target, client.redirectURIs) else {
                return Self.page(400, "post_logout_redirect_uri is not registered for this client")
            }
            var location = target
            if let value = field("state") {
                location += (target.contains("?") ? "&" : "?") + RequestBuilder.encodeForm([("state", value)])
            }
            return Self.redirect(location)
        }
    }

    func register(_ request: APIRequest) -> APIResponse {
        guard let body = request.body, body.count <= 64 * 1024,
            let metadata = (try? JSONValue(parsing: Array(body)))?.objectValue
        else { return Self.oauthError("invalid_client_metadata", "the body is not a JSON object") }
        var redirects: [String] = []
        if let list = metadata["redirect_uris"] {
            guard let items = list.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else {
                return Self.oauthError("invalid_redirect_uri", "redirect_uris must be an array of strings")
            }
            redirects = items.compactMap(\.stringValue)
            for redirect in redirects {
                guard let parts = URLComponents(string: redirect), parts.scheme != nil, parts.fragment == nil else {
                    return Self.oauthError("invalid_redirect_uri", "not an absolute URI without a fragment")
                }
            }
        }
        let method = metadata["token_endpoint_auth_method"]?.stringValue ?? "client_secret_basic"
        guard ["none", "client_secret_basic", "client_secret_post"].contains(method) else {
            return Self.oauthError("invalid_client_metadata", "token_endpoint_auth_method \(method) is not offered")
        }
        return state.withLock { state in
            state.registered += 1
            let id = "registered-\(state.registered)-" + Self.random(6)
            let secret = method == "none" ? nil : Self.random(24)
            let client = Client(
                id: id, authentication: secret.map { .secret($0) } ?? .none, redirectURIs: redirects)
            state.clients[id] = client
            var answer = metadata
            answer["client_id"] = .string(id)
            answer["client_id_issued_at"] = Self.seconds(now(state))
            answer["token_endpoint_auth_method"] = .string(method)
            answer["redirect_uris"] = .array(redirects.map { .string($0) })
            if let secret {
                answer["client_secret"] = .string(secret)
                answer["client_secret_expires_at"] = 0
            }
            return Self.json(answer, status: 201)
        }
    }
}

extension TestProvider {
    /// The user's browser for `TestProvider.browser`: sends the authorization request to the provider
    /// in process and returns the redirect it answers with.
    public struct Browser: ExternalUserAgent, Sendable {
        let provider: TestProvider

        /// Visits `url` (the authorization request), signs in as the provider's `user` and answers as
        /// its `consent` says; returns the redirect to `redirectURI`.
        public func authorize(url: URL, redirectURI: URL) async throws -> URL {
            let response = try await provider.send(APIRequest(url: url))
            if response.status.code == 499 { throw CancellationError() }
            guard response.status.code == 302, let location = response.headerFields[.location],
                let target = URL(string: location)
            else {
                throw BrowserStopped(
                    status: response.status.code, page: String(decoding: response.body.prefix(512), as: UTF8.self))
            }
            return target
        }

        /// For a loopback login (`TokenManager.LoginMethod.loopback(open:)`): visits the authorization
        /// URL, then delivers the redirect to the app's loopback listener over a real connection.
        public func open(_ url: URL) async throws {
            let target = try await authorize(url: url, redirectURI: url)
            _ = try await CurlTransport().send(APIRequest(url: target, timeout: 10))
        }
    }
}
