#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import HTTPTypes
import MooseCrypto
public import MooseHTTP
import MooseJWT
import Synchronization

/// An OAuth 2.0 / OpenID Connect provider in the test process: an `HTTPTransport` that answers as a
/// provider does — discovery, JWKS, authorization with PKCE, PAR, device, the token endpoint's grants,
/// revocation, introspection, UserInfo, logout and registration — with the checks real providers make,
/// faults on a script, and a record of every request. No sockets: hand it to `TokenManager` as its
/// transport. For other processes (`moose`, a browser, Python), serve it with `LoopbackHTTPServer`.
///
/// ```swift
/// let clock = TestClock()
/// let provider = TestProvider(clock: clock.read)
/// var configuration = RefreshCoordinator.Configuration()
/// configuration.clock = clock.read
/// let manager = TokenManager(
///     issuer: provider.issuer, clientID: TestProvider.Client.defaultPublic.id,
///     storage: InMemorySessionStorage(), transport: provider, configuration: configuration)
/// try await manager.login(with: .userAgent(provider.browser, redirectURI: TestProvider.Client.defaultRedirect))
/// clock.advance(by: 3600)                                  // the access token has expired
/// _ = try await manager.accessToken()                       // one refresh, the refresh token rotated
/// #expect(provider.requests(to: .token).count == 2)
/// ```
///
/// Where it differs from a real provider on purpose: there is no login form (the user is `user`, and
/// what they answer at the consent screen is `consent`), and nothing outlives the object.
public final class TestProvider: HTTPTransport, Sendable {
    /// The issuer identifier (no trailing slash); every endpoint is a path under it.
    public let issuer: String
    /// The provider's settings (lifetimes, rotation, PAR, DPoP nonces…), fixed at creation.
    public let configuration: Configuration
    /// The provider's clock (plus `clockSkew`): what `iat`, `exp` and every expiry are read against.
    let clock: @Sendable () -> Date
    let state: Mutex<State>

    /// A provider at `issuer` that knows `clients` and signs in `user`.
    ///
    /// - Parameters:
    ///   - issuer: its issuer identifier; default `https://provider.test` (in process, nothing resolves
    ///     it). Served on a loopback port: `LoopbackHTTPServer.baseURL`.
    ///   - clients: the registered clients; default: `Client.defaultPublic` (a public PKCE client with
    ///     `Client.defaultRedirect`), `Client.defaultConfidential` and `Client.defaultService`.
    ///   - user: who signs in at the authorization and device endpoints; default `User.alice`.
    ///   - configuration: lifetimes and policies; default `Configuration()`.
    ///   - clock: the provider's time; default the system's. Pass `TestClock.read`, and the same clock
    ///     to the app's `RefreshCoordinator.Configuration.clock`, to move both.
    public init(
        issuer: String = "https://provider.test",
        clients: [Client] = [.defaultPublic, .defaultConfidential, .defaultService],
        user: User = .alice, configuration: Configuration = Configuration(),
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        var trimmed = issuer
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        self.issuer = trimmed
        self.configuration = configuration
        self.clock = clock
        var state = State(user: user)
        for client in clients { state.clients[client.id] = client }
        self.state = Mutex(state)
        rotateKeys()
    }

    /// Answers `request` as the provider would (or as a scripted fault says), recording it first.
    public func send(_ request: APIRequest) async throws -> APIResponse {
        let endpoint = endpoint(of: request)
        let form = Self.form(of: request)
        let fault: Fault? = state.withLock { state in
            state.recorded.append(
                Recorded(
                    endpoint: endpoint, request: request, form: form,
                    grantType: form.first { $0.0 == "grant_type" }?.1))
            return state.takeFault(for: endpoint, grantType: form.first { $0.0 == "grant_type" }?.1)
        }
        if let fault {
            if let answer = try await answer(fault, to: request, at: endpoint, form: form) { return answer }
        }
        guard let endpoint else { return Self.notFound }
        return try await handle(request, at: endpoint, form: form)
    }

    // MARK: - The user and the clients

    /// What the user answers at the next consent screens (authorization and device): approve, deny,
    /// or close the browser. Default `.approve`; it stays until changed.
    public var consent: Consent {
        get { state.withLock { $0.consent } }
        set { state.withLock { $0.consent = newValue } }
    }

    /// The user who signs in.
    public var user: User {
        get { state.withLock { $0.user } }
        set { state.withLock { $0.user = newValue } }
    }

    /// Seconds added to the provider's clock (a provider running fast, or slow when negative): the
    /// `iat`, `exp` and `auth_time` it issues move with it. Default 0.
    public var clockSkew: TimeInterval {
        get { state.withLock { $0.clockSkew } }
        set { state.withLock { $0.clockSkew = newValue } }
    }

    /// Registers (or replaces) a client.
    public func register(_ client: Client) { state.withLock { $0.clients[client.id] = client } }

    /// The registered clients, those made by RFC 7591 registration included.
    public var clients: [Client] { state.withLock { Array($0.clients.values) } }

    /// An `ExternalUserAgent` that plays the user's browser: it sends the authorization request to
    /// this provider in process and returns where the provider redirects (with the code, or the error
    /// `consent` leads to). A request the provider refuses to redirect (an unknown client, a redirect
    /// URI that does not match) throws `BrowserStopped` carrying the page's status and text.
    public var browser: Browser { Browser(provider: self) }

    /// Approves (or, with `consent: .deny`, denies) a pending device authorization by its user code,
    /// as the user would at the verification page. Returns false when no pending code matches.
    @discardableResult
    public func enterUserCode(_ userCode: String, consent: Consent = .approve) -> Bool {
        state.withLock { state in
            guard let code = state.devices.first(where: { Self.same($0.value.userCode, userCode) })?.key,
                state.devices[code]?.status == .pending
            else { return false }
            let decided: DeviceStatus
            switch consent {
            case .approve: decided = .approved(subject: state.user.subject, authTime: now(state))
            case .deny, .closeBrowser: decided = .denied
            }
            state.devices[code]?.status = decided
            return true
        }
    }

    // MARK: - Keys

    /// The key ids the JWKS publishes now, the signing key's first.
    public var publishedKeyIDs: [String] {
        state.withLock { state in state.keys.filter(\.published).reversed().map(\.kid) }
    }

    /// Starts signing with a new key under a new kid; the old keys stay published (as a provider does
    /// during a rotation) until `withdrawKeys(except:)`.
    public func rotateKeys() {
        state.withLock { state in
            state.keyCounter += 1
            let kid = "key-\(state.keyCounter)"
            guard let key = Self.makeKey(kid: kid, algorithm: configuration.signingAlgorithm) else { return }
            for index in state.keys.indices { state.keys[index].signing = false }
            state.keys.append(key)
        }
    }

    /// Replaces the signing key's material under the same kid (what some providers do on a restart
    /// with new keys): tokens signed before no longer verify, and the kid alone does not say so.
    public func replaceSigningKeyKeepingKeyID() {
        state.withLock { state in
            guard let index = state.keys.lastIndex(where: \.signing),
                let key = Self.makeKey(kid: state.keys[index].kid, algorithm: configuration.signingAlgorithm)
            else { return }
            state.keys[index] = key
        }
    }

    /// Withdraws every published key but the signing one (or but those in `keep`): the JWKS stops listing
    /// them, so a verifier that follows the provider stops trusting what they signed.
    public func withdrawKeys(except keep: Set<String> = []) {
        state.withLock { state in
            for index in state.keys.indices where !state.keys[index].signing && !keep.contains(state.keys[index].kid) {
                state.keys[index].published = false
            }
        }
    }

    /// The JWKS document published now.
    public var jwks: String {
        state.withLock { state in
            JWKS(keys: state.keys.filter(\.published).reversed().map(\.publicJWK)).json
        }
    }

    // MARK: - Sessions

    /// Revokes every token issued to `subject` (every one, when `nil`): the next refresh is refused
    /// with `invalid_grant`, introspection answers `active: false` — an administrator ending sessions.
    public func revokeSessions(of subject: String? = nil) {
        state.withLock { state in
            for (id, family) in state.families where subject == nil || family.subject == subject {
                state.families[id]?.revoked = true
            }
        }
    }

    /// The refresh tokens issued so far, oldest first, with whether each is spent, still live or revoked.
    public var refreshTokens: [RefreshTokenRecord] {
        state.withLock { state in
            state.refreshTokens.values.sorted { $0.serial < $1.serial }.map { record in
                RefreshTokenRecord(
                    token: record.token, clientID: record.clientID, subject: record.subject,
                    spent: record.spentAt != nil, revoked: state.families[record.family]?.revoked ?? true)
            }
        }
    }

    // MARK: - Faults and the record

    /// Answers the next `count` requests to `endpoint` with `fault` instead of the provider's answer
    /// (`Int.max`: until `clearFaults()`). Faults queue: the earliest scheduled one that still has a
    /// count answers first.
    ///
    /// ```swift
    /// provider.inject(.status(400), at: .refresh)                 // Glewlwyd's bare 400
    /// provider.inject(.status(503), at: .jwks, count: .max)        // the keys are down
    /// ```
    public func inject(_ fault: Fault, at endpoint: Endpoint, count: Int = 1) {
        guard count > 0 else { return }
        state.withLock { $0.faults.append(ScheduledFault(endpoint: endpoint, fault: fault, remaining: count)) }
    }

    /// Drops every scheduled fault.
    public func clearFaults() { state.withLock { $0.faults.removeAll() } }

    /// Every request received so far, in order.
    public var requests: [Recorded] { state.withLock { $0.recorded } }

    /// The requests received at `endpoint` (`.refresh`: the token endpoint's refresh grants).
    public func requests(to endpoint: Endpoint) -> [Recorded] {
        requests.filter { recorded in
            switch endpoint {
            case .refresh: recorded.endpoint == .token && recorded.grantType == "refresh_token"
            default: recorded.endpoint == endpoint
            }
        }
    }

    /// Forgets the recorded requests.
    public func clearRecord() { state.withLock { $0.recorded.removeAll() } }

    // MARK: - Internals

    func now(_ state: State) -> Date { clock().addingTimeInterval(state.clockSkew) }

    /// The URL of `endpoint` under the issuer.
    public func url(of endpoint: Endpoint) -> String { issuer + endpoint.path }

    func endpoint(of request: APIRequest) -> Endpoint? {
        guard let url = request.url else { return nil }
        guard let base = URLComponents(string: issuer),
            let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            components.host == base.host, components.port == base.port
        else { return nil }
        let basePath = base.path
        let path = components.path
        // RFC 8414 §3.1: the well-known part goes between the host and the issuer's path.
        for wellKnown in [Endpoint.openIDConfiguration, .authorizationServerMetadata] {
            if path == basePath + wellKnown.path || (basePath.count > 0 && path == wellKnown.path + basePath) {
                return wellKnown
            }
        }
        guard path.hasPrefix(basePath) else { return nil }
        let rest = String(path.dropFirst(basePath.count))
        return Endpoint.allCases.first { $0.path == rest && $0 != .refresh }
    }

    /// The request's parameters: a POST's form body only (RFC 6749 §2.3.1: credentials never in the
    /// URI), any other method's query.
    static func form(of request: APIRequest) -> [(String, String)] {
        var fields: [(String, String)] = []
        if request.method != .post,
            let query = request.url.flatMap({
                URLComponents(url: $0, resolvingAgainstBaseURL: false)?.percentEncodedQuery
            })
        {
            fields += RequestBuilder.decodeForm(query)
        }
        if let body = request.body, body.count <= 1 << 20,
            request.headerFields[.contentType].map({ MIMEType($0) == .formURLEncoded }) ?? false
        {
            fields += RequestBuilder.decodeForm(String(decoding: body, as: UTF8.self))
        }
        return fields
    }

    /// Byte-for-byte equality (Swift's `==` on `String` equates canonically equivalent texts).
    static func same(_ lhs: String, _ rhs: String) -> Bool { lhs.utf8.elementsEqual(rhs.utf8) }

    static func makeKey(kid: String, algorithm: JWTAlgorithm) -> SigningKey? {
        let spec: PrivateKey.GenerationSpec
        switch algorithm {
        case .es256: spec = .ec(.p256)
        case .es384: spec = .ec(.p384)
        case .es512: spec = .ec(.p521)
        case .eddsa, .ed25519: spec = .ed25519
        default: spec = .rsa(bits: 2048)
        }
        do {
            let privateKey = try PrivateKey.generate(spec)
            let key = try JWTKey(privateKey: privateKey, keyID: kid, algorithm: algorithm)
            let jwk = try JWK(publicKey: try privateKey.publicKey(), keyID: kid, algorithm: algorithm)
            var fields = jwk.fields
            fields["use"] = "sig"
            return SigningKey(
                kid: kid, signer: try JWTSigner(key: key, algorithm: algorithm), publicJWK: try JWK(fields))
        } catch {
            return nil
        }
    }

    static let notFound = APIResponse(
        status: .notFound, headerFields: [.contentType: "text/plain"], body: Data("not found".utf8))
}
