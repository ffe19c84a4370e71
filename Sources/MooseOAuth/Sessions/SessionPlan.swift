#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseHTTP
public import MooseJWT
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a session was obtained and how it is renewed — its plan, sealed in the session's row with its
/// tokens, so any process on any surface (an app's `TokenManager`, `moose`, a fleet on PostgreSQL)
/// that opens the session by its key renews it the same way (`TokenManager.open(key:storage:transport:)`).
///
/// The plan holds the provider and what to trust there (`Provider`: issuer, endpoints set by hand, a
/// CA file, public-key pins), the client (`Client`: its id and its credential by *reference* — a secret
/// file, an environment variable, a private key file and its `kid`; never the secret itself), the
/// grant with what it needs (`Grant`: a loopback port, a workload's identity source), the scopes,
/// audience and resource, and the DPoP algorithm. Secrets are read from their source when a
/// `TokenManager` is made from the plan and again whenever it makes the client (every login, refresh,
/// renewal and logout: a rotated secret file or key is picked up), and are never stored.
///
/// Versioned: written under `SessionPlan.attribute` as version 1's flat JSON fields, onto which the
/// typed values map one to one (so a Moose from before the typed plan reads it in full); a session
/// written by Moose 0.3 (whose CLI kept the same settings as a "profile" under
/// `OAuthSession.legacyProfileAttribute`) opens as version 0, and a session with neither implies the
/// least plan (its issuer, client and scopes).
///
/// ```swift
/// let plan = SessionPlan(
///     name: "ci", issuer: "https://id.example.com", clientID: "ci-runner", scopes: ["deploy"],
///     grant: .workload(SessionPlan.Workload(source: "file:/var/run/secrets/tokens/moose")))
/// let manager = try TokenManager(plan: plan, storage: storage, key: "ci", transport: transport)
/// try await manager.login(with: .workload)            // stores the plan with the session
/// // Elsewhere, later, in another process:
/// let same = try await TokenManager.open(key: "ci", storage: storage, transport: transport)
/// let token = try await same.accessToken()            // renewed as the plan says
/// ```
public struct SessionPlan: Sendable, Codable, Hashable {
    /// Where a session logs in, and what it trusts there.
    public struct Provider: Sendable, Hashable {
        /// The provider's issuer URL (discovered from on first use).
        public var issuer: String
        /// Endpoints configured by hand, each replacing the discovered one (a provider without discovery).
        public var endpoints: EndpointOverrides
        /// A PEM file of the CAs to trust for the provider, for the caller's transport (`nil`: the system's).
        public var caFile: String?
        /// Public-key pins (`sha256//BASE64`) for the issuer's host, for the caller's transport; empty: none.
        public var publicKeyPins: [String]

        /// The provider at `issuer`, with the endpoints and trust given (none by default).
        ///
        /// - Parameters:
        ///   - issuer: the provider's issuer URL.
        ///   - endpoints: endpoints set by hand; default: none, everything discovered.
        ///   - caFile: a PEM file of CAs trusted instead of the system's; `nil` (the default): the system's.
        ///   - publicKeyPins: `sha256//BASE64` pins for the issuer's host; default: none.
        public init(
            issuer: String, endpoints: EndpointOverrides = EndpointOverrides(), caFile: String? = nil,
            publicKeyPins: [String] = []
        ) {
            self.issuer = issuer
            self.endpoints = endpoints
            self.caFile = caFile
            self.publicKeyPins = publicKeyPins
        }
    }

    /// The client at the provider: its id and where its credential is read from.
    public struct Client: Sendable, Hashable {
        /// The client's id at the provider.
        public var id: String
        /// How the client authenticates — a reference to the credential, read at every use.
        public var credential: Credential

        /// The client `id`, authenticating with `credential` (default: none, a public client).
        public init(id: String, credential: Credential = .none) {
            self.id = id
            self.credential = credential
        }
    }

    /// Where the client's credential is read from, at every use of the client (never the secret itself).
    public enum Credential: Sendable, Hashable {
        /// None: a public client.
        case none
        /// A file holding the client secret (line ends around it are dropped), read at every use,
        /// sent as `sending` says.
        case secretFile(String, sending: SecretSending)
        /// An environment variable holding the client secret, read at every use, sent as `sending` says.
        case secretVariable(String, sending: SecretSending)
        /// A private key file (PEM or a private JWK) for `private_key_jwt` (RFC 7523 §2.2), read at
        /// every use; `keyID` is the `kid` the client assertion names (`nil`: a JWK's own `kid`).
        case privateKey(file: String, keyID: String?)
        /// Credentials held by the app that made the session (a `ClientAuthentication` value given to
        /// `TokenManager`), not a reference stored here: another process cannot renew the session
        /// without them.
        case heldByApp
    }

    /// How a client secret is sent to the token endpoint.
    public enum SecretSending: String, Sendable, Codable {
        /// In the `Authorization` header (`client_secret_basic`, the default).
        case basic
        /// In the request body (`client_secret_post`).
        case post
    }

    /// The grant a session's login used, with what it needs (and, without a refresh token, how the
    /// session is renewed).
    public enum Grant: Sendable, Hashable {
        /// Authorization code with PKCE (a person in a browser); renewed with the refresh token.
        /// `loopbackPort`: the redirect's port, for a provider that registered one exact redirect URI
        /// (`moose login --port`); `nil`: any free port.
        case authorizationCode(loopbackPort: UInt16?)
        /// The device authorization grant (RFC 8628); renewed with the refresh token.
        case deviceCode
        /// The client credentials grant: renewed by a new grant.
        case clientCredentials
        /// A workload's own identity token exchanged for tokens: renewed by a new exchange of a fresh
        /// identity token from the workload's source.
        case workload(Workload)

        /// The name of a grant, without its data — what a config file, a command line and the JSON of a
        /// plan name (its raw value).
        public enum Kind: String, Sendable, Codable, CaseIterable {
            /// `authorization_code`: a person in a browser.
            case authorizationCode = "authorization_code"
            /// `device_code`: RFC 8628.
            case deviceCode = "device_code"
            /// `client_credentials`: the client acts for itself.
            case clientCredentials = "client_credentials"
            /// `workload`: a workload's identity token exchanged.
            case workload

            /// Whether a session of this grant is renewed by a new grant of its own (client
            /// credentials, a workload's exchange) instead of a refresh token: no person takes part.
            public var renewsWithoutAPerson: Bool { self == .clientCredentials || self == .workload }

            /// The kind whose raw value is `name`, compared byte for byte; `nil` for any other.
            static func exactly(_ name: String) -> Kind? {
                allCases.first { $0.rawValue.utf8.elementsEqual(name.utf8) }
            }
        }

        /// The grant of `kind` with nothing more: an authorization code at any free port, a workload
        /// whose source is the app's own `WorkloadGrant` (not stored).
        public init(_ kind: Kind) {
            switch kind {
            case .authorizationCode: self = .authorizationCode(loopbackPort: nil)
            case .deviceCode: self = .deviceCode
            case .clientCredentials: self = .clientCredentials
            case .workload: self = .workload(Workload(source: nil))
            }
        }

        /// The grant's name, without its data.
        public var kind: Kind {
            switch self {
            case .authorizationCode: .authorizationCode
            case .deviceCode: .deviceCode
            case .clientCredentials: .clientCredentials
            case .workload: .workload
            }
        }

        /// The fixed loopback port of an authorization-code grant; `nil` for any free port or another grant.
        public var loopbackPort: UInt16? {
            if case .authorizationCode(let port) = self { return port }
            return nil
        }

        /// The workload of a workload grant; `nil` for another grant.
        public var workload: Workload? {
            if case .workload(let workload) = self { return workload }
            return nil
        }
    }

    /// How a workload obtains and exchanges its identity token.
    public struct Workload: Sendable, Hashable {
        /// The identity source: `github`, `gitlab` (the variable `MOOSE_ID_TOKEN`), `gitlab:VARIABLE`,
        /// `env:VARIABLE`, `file:PATH` or `command:PROGRAM ARG…` (run without a shell); `nil`: the app's
        /// own `WorkloadGrant`, not stored (another process cannot renew the session).
        public var source: String?
        /// The audience asked of the identity source; `nil`: the provider's issuer.
        public var identityAudience: String?
        /// How the identity token is exchanged: token exchange (RFC 8693, the default) or the JWT bearer grant.
        public var grant: WorkloadGrant.Grant
        /// The subject token type a token exchange names; `nil`: an ID token's.
        public var subjectTokenType: String?

        /// A workload reading its identity token from `source`.
        ///
        /// - Parameters:
        ///   - source: the identity source (see `source`); `nil`: the app's own `WorkloadGrant`.
        ///   - identityAudience: the audience asked of the source; `nil` (the default): the issuer.
        ///   - grant: how the token is exchanged; default: token exchange.
        ///   - subjectTokenType: the token type a token exchange names; `nil` (the default): an ID token's.
        public init(
            source: String?, identityAudience: String? = nil, grant: WorkloadGrant.Grant = .tokenExchange,
            subjectTokenType: String? = nil
        ) {
            self.source = source
            self.identityAudience = identityAudience
            self.grant = grant
            self.subjectTokenType = subjectTokenType
        }
    }

    /// The plan format this version of Moose writes.
    public static let currentVersion = 1
    /// The session attribute the plan is written under (JSON, sealed with the session).
    public static let attribute = "moose.plan"

    /// The plan format it was read from: `currentVersion`, or 0 for a session written by Moose 0.3.
    public var version: Int
    /// The storage key the session lives under (set from the key whenever a plan is read).
    public var name: String
    /// Where to log in, and what to trust there.
    public var provider: Provider
    /// The client's id and its credential, by reference.
    public var client: Client
    /// The login's grant, carrying what it needs.
    public var grant: Grant
    /// What logins and renewals ask for.
    public var scopes: [String]
    /// The `audience` parameter logins name (Auth0 and others need it): a client-credentials or
    /// workload grant names it on every renewal too.
    public var audience: String?
    /// The RFC 8707 resource the tokens are for, named on login and every renewal.
    public var resource: String?
    /// The DPoP algorithm logins bind their tokens with (`ES256`, `EdDSA`, `RS256`); `nil`: bearer tokens.
    public var dpop: String?

    /// The provider's issuer URL (`provider.issuer`).
    public var issuer: String {
        get { provider.issuer }
        set { provider.issuer = newValue }
    }

    /// The client's id at the provider (`client.id`).
    public var clientID: String {
        get { client.id }
        set { client.id = newValue }
    }

    /// A plan for `client` at `provider`, stored under `name`.
    ///
    /// - Parameters:
    ///   - name: the storage key the session will live under (replaced by the key whenever a plan is read).
    ///   - provider: the provider and what to trust there.
    ///   - client: the client's id and credential.
    ///   - grant: the login's grant (default: authorization code at any free port).
    ///   - scopes: what logins and renewals ask for (empty: the provider's default scopes).
    ///   - audience: the `audience` logins name; `nil` (the default): none.
    ///   - resource: the RFC 8707 resource; `nil` (the default): none.
    ///   - dpop: the DPoP algorithm; `nil` (the default): bearer tokens.
    public init(
        name: String, provider: Provider, client: Client, grant: Grant = .authorizationCode(loopbackPort: nil),
        scopes: [String], audience: String? = nil, resource: String? = nil, dpop: String? = nil
    ) {
        version = Self.currentVersion
        self.name = name
        self.provider = provider
        self.client = client
        self.grant = grant
        self.scopes = scopes
        self.audience = audience
        self.resource = resource
        self.dpop = dpop
    }

    /// A plan for `clientID` at `issuer`, stored under `name`.
    ///
    /// - Parameters:
    ///   - name: the storage key the session will live under (replaced by the key whenever a plan is read).
    ///   - issuer: the provider's issuer URL (discovered from on first use).
    ///   - clientID: the client's id there.
    ///   - scopes: what logins and renewals ask for (empty: the provider's default scopes).
    ///   - grant: the login's grant (default: authorization code at any free port).
    ///   - credential: where the client's credential is read from; default: none (a public client).
    ///   - endpoints: endpoints configured by hand, replacing discovered ones; default: none.
    public init(
        name: String, issuer: String, clientID: String, scopes: [String],
        grant: Grant = .authorizationCode(loopbackPort: nil), credential: Credential = .none,
        endpoints: EndpointOverrides = EndpointOverrides()
    ) {
        self.init(
            name: name, provider: Provider(issuer: issuer, endpoints: endpoints),
            client: Client(id: clientID, credential: credential), grant: grant, scopes: scopes)
    }

    // MARK: - With the session

    /// The plan stored in `session` (version 1, else Moose 0.3's profile), named `key`; without one,
    /// the least the session implies: its issuer, client, scopes and resource (`stored(in:key:)` is `nil`).
    ///
    /// - Parameters:
    ///   - session: the stored session.
    ///   - key: its storage key, which becomes the plan's `name`.
    public static func of(_ session: OAuthSession, key: String) -> SessionPlan {
        stored(in: session, key: key) ?? implied(by: session, key: key)
    }

    /// The plan stored in `session`, if it has one that can be read.
    ///
    /// - Returns: the plan (version 1, else Moose 0.3's profile as version 0) named `key`, or
    ///   `nil` when neither attribute holds a plan that decodes (an unknown grant, a missing issuer or
    ///   client id).
    public static func stored(in session: OAuthSession, key: String) -> SessionPlan? {
        for attribute in [attribute, OAuthSession.legacyProfileAttribute] {
            if let text = session.attributes[attribute],
                var plan = try? JSONDecoder().decode(SessionPlan.self, from: Data(text.utf8))
            {
                plan.name = key
                return plan
            }
        }
        return nil
    }

    /// The least plan `session` implies: its issuer, client, scopes and resource; a public client.
    /// Without a refresh token, the grant its login recorded for renewal (`SessionEngine.grantAttribute`:
    /// client credentials, or a workload's whose source was its app's own) and that grant's audience
    /// (`SessionEngine.audienceAttribute`) — the one place those attributes are read, for sessions
    /// written without a plan.
    public static func implied(by session: OAuthSession, key: String) -> SessionPlan {
        var plan = SessionPlan(
            name: key, issuer: session.issuer, clientID: session.clientID, scopes: session.tokens.scopes)
        plan.resource = session.resource
        if session.tokens.refreshToken == nil,
            let kind = session.attributes[SessionEngine.grantAttribute].flatMap(Grant.Kind.exactly),
            kind.renewsWithoutAPerson
        {
            plan.grant = Grant(kind)
        }
        plan.audience = session.attributes[SessionEngine.audienceAttribute]
        return plan
    }

    /// `attributes` with this plan written in (as the current version; an older copy removed).
    ///
    /// - Parameter attributes: the session attributes to add the plan to; default: none.
    /// - Returns: `attributes` with the plan's JSON under `SessionPlan.attribute` and no legacy profile.
    public func stored(in attributes: [String: String] = [:]) -> [String: String] {
        var attributes = attributes
        var current = self
        current.version = Self.currentVersion
        if let data = try? JSONEncoder().encode(current) {
            attributes[Self.attribute] = String(decoding: data, as: UTF8.self)
            attributes[OAuthSession.legacyProfileAttribute] = nil
        }
        return attributes
    }

    // MARK: - Renewing

    /// How the client authenticates, read from its sources now: `private_key_jwt` with the key file,
    /// else the secret from its file or environment variable (`client_secret_basic`, or `_post`), else
    /// none (a public client). A source that cannot be read is `invalidConfiguration`, naming it.
    ///
    /// - Throws: `OAuthError.invalidConfiguration` for an unreadable or oversized file, an unset or
    ///   empty variable, a key file that is not a private key able to sign RS256, ES256 or EdDSA, or
    ///   credentials held by the app that made the session (`Credential.heldByApp`, no source here).
    public func clientAuthentication() throws -> ClientAuthentication {
        let secret: String
        let sending: SecretSending
        switch client.credential {
        case .none:
            return .none
        case .heldByApp:
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the client credentials of the session under \(name) are held by the app that made it (not stored with it): "
                    + "open it with them, TokenManager(issuer:clientID:authentication:storage:key:…)")
        case .privateKey(let path, let keyID):
            return try privateKeyAuthentication(path, keyID: keyID)
        case .secretFile(let file, let how):
            // Line ends around the secret are the file's, not the secret's.
            let bytes = try Self.readFile(file, what: "client secret file", limit: 4096)
            let isLineEnd: (UInt8) -> Bool = { $0 == 0x0A || $0 == 0x0D }
            secret = String(
                decoding: bytes.drop(while: isLineEnd).reversed().drop(while: isLineEnd).reversed(), as: UTF8.self)
            sending = how
        case .secretVariable(let variable, let how):
            guard let value = getenv(variable).map({ String(cString: $0) }), !value.isEmpty else {
                throw OAuthError(
                    OAuthError.invalidConfiguration,
                    "the environment variable \(variable) (the client secret of profile \(name)) is not set")
            }
            secret = value
            sending = how
        }
        switch sending {
        case .basic: return .clientSecretBasic(secret)
        case .post: return .clientSecretPost(secret)
        }
    }

    private func privateKeyAuthentication(_ path: String, keyID privateKeyID: String?) throws -> ClientAuthentication {
        let signing: JWTKey
        let text = String(decoding: try Self.readFile(path, what: "key file"), as: UTF8.self)
        do {
            if text.trimmingASCIIWhitespace().hasPrefix("{") {
                // A private JWK: its kid names the key unless the plan's `keyID` does.
                var fields = try JWK(json: text).fields
                if let privateKeyID { fields["kid"] = .string(privateKeyID) }
                signing = try JWK(fields).signingKey()
            } else {
                signing = try JWTKey(pem: text, keyID: privateKeyID)
            }
        } catch {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the private key \(path) must be a private key in PEM or a private JWK (RS256, ES256 or EdDSA): \(error)"
            )
        }
        // The algorithms the key can sign with (a JWK's `alg` pins one), then the first of ES256,
        // EdDSA and RS256 among them.
        var candidates: Set<JWTAlgorithm> = []
        if let pinned = signing.pinnedAlgorithm {
            if let algorithm = JWTAlgorithm(rawValue: pinned) {
                candidates = algorithm.keyFamily == .okp ? [.eddsa] : [algorithm]
            }
        } else {
            switch signing.family {
            case .rsa: candidates = [.rs256]
            case .okp: candidates = [.eddsa]
            case .ec:
                if case .ec(let curve) = signing.publicKey?.type, curve == JWTAlgorithm.es256.curve {
                    candidates = [.es256]
                }
            case .hmac: break
            }
        }
        guard let algorithm = [JWTAlgorithm.es256, .eddsa, .rs256].first(where: candidates.contains) else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the private key \(path): private_key_jwt signs with RS256, ES256 or EdDSA, not this key type")
        }
        return .privateKeyJWT(signing, algorithm)
    }

    /// The client this plan names at the provider `metadata` describes — the one way a session's client
    /// is made for a refresh, a renewal or a logout, by `TokenManager` and the `moose` CLI alike.
    ///
    /// Its authentication, in order: `authentication` (credentials the app holds itself); else the
    /// client registration kept with the session (RFC 7591: its own secret) when it is this plan's client
    /// at this issuer, compared byte for byte; else the plan's references read now
    /// (`clientAuthentication()`), so a rotated secret file, variable or key file is picked up at the
    /// next call. The plan's resource and DPoP algorithm are set on the client.
    ///
    /// - Parameters:
    ///   - metadata: the provider's discovered metadata (with the plan's `provider.endpoints` applied).
    ///   - transport: what sends the client's requests.
    ///   - registration: the registration kept with the session, if any (`OAuthSession.registration`).
    ///   - authentication: the app's own credentials for this client; `nil` (the default): the
    ///     registration's or the plan's references.
    /// - Returns: a client ready for the token, revocation and end-session endpoints.
    /// - Throws: `OAuthError.invalidConfiguration` when a reference cannot be read (see
    ///   `clientAuthentication()`) or the plan names an unknown DPoP algorithm;
    ///   `OAuthError.needsLogin` when the registration's secret has expired
    ///   (`RegisteredClient.secretHasExpired(at:)`): a new login registers anew.
    public func client(
        metadata: ProviderMetadata, transport: any HTTPTransport, registration: RegisteredClient? = nil,
        authentication: ClientAuthentication? = nil
    ) throws -> OAuthClient {
        let chosen: ClientAuthentication
        if let authentication {
            chosen = authentication
        } else if let registration, registration.clientID.utf8.elementsEqual(clientID.utf8),
            registration.issuer.utf8.elementsEqual(metadata.issuer.utf8)
        {
            chosen = try registration.renewalAuthentication()
        } else {
            chosen = try clientAuthentication()
        }
        var client = OAuthClient(metadata: metadata, clientID: clientID, authentication: chosen, transport: transport)
        client.resource = resource
        client.dpop = try dpopAlgorithm()
        return client
    }

    /// What the plan trusts for its provider: its CA file (instead of the system's CAs) and its
    /// public-key pins for the issuer's host; `nil` when it names neither.
    ///
    /// - Throws: `OAuthError.invalidConfiguration` when pins are named but the issuer has no host, or a
    ///   pin is not `sha256//` and the base64 SHA-256 of a SubjectPublicKeyInfo.
    public func trust() throws -> TransportTrust? {
        var pins = PublicKeyPins()
        let list = provider.publicKeyPins
        if !list.isEmpty {
            guard let host = URL(string: issuer)?.host, !host.isEmpty else {
                throw OAuthError(
                    OAuthError.invalidConfiguration,
                    "the session plan \(name) pins public keys, but its issuer \(issuer) names no host to pin")
            }
            do {
                pins = try PublicKeyPins([host: list])
            } catch {
                throw OAuthError(
                    OAuthError.invalidConfiguration,
                    "the public-key pins of the session plan \(name) are not usable: \(error.message)",
                    underlying: error)
            }
        }
        let trust = TransportTrust(caFile: provider.caFile, pins: pins)
        return trust.isEmpty ? nil : trust
    }

    /// `base` made to apply this plan's trust (`trust()`): the one way a session's requests get their
    /// transport, so a plan's CA file and pins hold wherever the session is logged in, renewed or
    /// logged out — never an unpinned renewal of a pinned session.
    ///
    /// - Parameter base: the app's transport; a plan with a CA file or pins needs a
    ///   `TrustConfigurableTransport` (such as `CurlTransport`).
    /// - Returns: `base` itself for a plan that names no CA file and no pins; otherwise a copy of `base`
    ///   trusting the plan's CA file and checking its pins.
    /// - Throws: `OAuthError.invalidConfiguration` when the plan has a CA file or pins and `base` cannot
    ///   apply them (it is not a `TrustConfigurableTransport`, or it cannot check pins), or when the
    ///   pins are not usable.
    public func transport(over base: any HTTPTransport) throws -> any HTTPTransport {
        guard let trust = try trust() else { return base }
        let what = trust.pins.isEmpty ? "trusts the CA file \(trust.caFile ?? "")" : "pins its provider's public key"
        guard let configurable = base as? any TrustConfigurableTransport else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the session \(name) \(what), and the transport given (\(type(of: base))) cannot apply that: "
                    + "give a TrustConfigurableTransport (CurlTransport is one) so the session is never renewed "
                    + "without it")
        }
        do {
            return try configurable.trusting(trust)
        } catch {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the session \(name) \(what), and the transport given cannot apply that: \(error.message)",
                underlying: error)
        }
    }

    /// The plan's DPoP algorithm (`dpop`), `nil` for bearer tokens.
    ///
    /// - Throws: `OAuthError.invalidConfiguration` for a name that is not one of
    ///   `DPoPKey.supportedAlgorithms` (an HMAC algorithm cannot sign a proof).
    public func dpopAlgorithm() throws -> JWTAlgorithm? {
        guard let name = dpop else { return nil }
        guard let algorithm = JWTAlgorithm(rawValue: name), DPoPKey.supportedAlgorithms.contains(algorithm) else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the session plan names \(name), not a DPoP algorithm (ES256, EdDSA or RS256)")
        }
        return algorithm
    }

    /// The workload grant a workload plan's source names (`Workload.source`), or `nil` for a plan of
    /// another grant or a workload whose source is the app's own; an unreadable spec is
    /// `invalidConfiguration`. `transport` is for GitHub Actions' token request.
    ///
    /// - Parameters:
    ///   - transport: what asks GitHub Actions for its token (the other sources read a file, a
    ///     variable or a command, not the network).
    ///   - commands: what runs a `command:` source (`identity(_:transport:commands:)`).
    /// - Throws: `OAuthError.invalidConfiguration` for a source `identity(_:transport:commands:)` cannot make.
    public func workloadGrant(
        transport: any HTTPTransport, commands: WorkloadIdentity.Commands? = nil
    ) throws -> WorkloadGrant? {
        guard case .workload(let workload) = grant, let spec = workload.source else { return nil }
        return WorkloadGrant(
            identity: try Self.identity(spec, transport: transport, commands: commands),
            grant: workload.grant,
            identityAudience: workload.identityAudience ?? issuer,
            subjectTokenType: workload.subjectTokenType ?? ExchangeToken.idTokenType,
            audiences: audience.map { [$0] } ?? [])
    }

    /// The identity source `spec` names (see `Workload.source`).
    ///
    /// - Parameters:
    ///   - spec: `github`, `gitlab`, `gitlab:VARIABLE`, `env:VARIABLE`, `file:PATH` or
    ///     `command:PROGRAM ARG…` (split on spaces, run without a shell).
    ///   - transport: what asks GitHub Actions for its token (used by `github` only).
    ///   - commands: what runs a `command:` source: MooseOAuthSystem's `WorkloadIdentity.command`
    ///     (MooseOAuth starts no process, so that it builds where none can be started); `nil` (the
    ///     default): a `command:` spec is `invalidConfiguration`, saying so.
    /// - Throws: `OAuthError.invalidConfiguration` for any other spec (an empty variable, path or command
    ///   included), and for a `command:` spec without `commands`.
    public static func identity(
        _ spec: String, transport: any HTTPTransport, commands: WorkloadIdentity.Commands? = nil
    ) throws -> WorkloadIdentity {
        func after(_ prefix: String) -> String? {
            spec.utf8.starts(with: prefix.utf8) ? String(spec.dropFirst(prefix.count)) : nil
        }
        if spec == "github" { return .githubActions(transport: transport) }
        if spec == "gitlab" { return .environmentVariable("MOOSE_ID_TOKEN") }
        if let variable = after("gitlab:"), !variable.isEmpty { return .environmentVariable(variable) }
        if let variable = after("env:"), !variable.isEmpty {
            return .environmentVariable(variable, platform: "the environment")
        }
        if let path = after("file:"), !path.isEmpty { return .file(path) }
        if let command = after("command:") {
            let words = command.split(separator: " ").map(String.init)
            if !words.isEmpty {
                guard let commands else {
                    throw OAuthError(
                        OAuthError.invalidConfiguration,
                        "the workload source runs a command (\(words[0])), and nothing here runs commands: "
                            + "give commands: WorkloadIdentity.command (MooseOAuthSystem)")
                }
                return commands(words)
            }
        }
        throw OAuthError(
            OAuthError.invalidConfiguration,
            "a workload source is github, gitlab[:VARIABLE], env:VARIABLE, file:PATH or command:PROGRAM [ARG…]")
    }

    /// Reads a whole file with `open`/`read`, at most `limit` + 1 bytes (a FIFO works; an endless one
    /// is cut off at the limit); `invalidConfiguration` naming `what` and `path` when it cannot.
    package static func readFile(_ path: String, what: String, limit: Int = 1 << 20) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "cannot read \(what) \(path): \(errno == ENOENT ? "no such file" : "permission denied or unreadable")")
        }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(limit + 1, 64 << 10))
        while bytes.count <= limit {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw OAuthError(
                    OAuthError.invalidConfiguration, "cannot read \(what) \(path): permission denied or unreadable")
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
        }
        throw OAuthError(OAuthError.invalidConfiguration, "\(what) \(path) is larger than \(limit) bytes")
    }
}
