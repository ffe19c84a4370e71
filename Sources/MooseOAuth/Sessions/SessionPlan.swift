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
/// The plan holds the provider (issuer, endpoints set by hand, a CA file, public-key pins), the client
/// (its id and how it authenticates — by *reference*: a secret file, an environment variable, a private
/// key file and its `kid`; never the secret itself), the grant, the scopes, audience and resource, the
/// DPoP algorithm, and a workload's identity source. Secrets are read from their source when a
/// `TokenManager` is made from the plan and again whenever it makes the client (every login, refresh,
/// renewal and logout: a rotated secret file or key is picked up), and are never stored.
///
/// Versioned: version 1 is written under `SessionPlan.attribute`; a session written by Moose 0.3 (whose
/// CLI kept the same settings as a "profile" under `OAuthSession.legacyProfileAttribute`) opens as
/// version 0, and a session with neither implies the least plan (its issuer, client and scopes).
///
/// ```swift
/// var plan = SessionPlan(name: "ci", issuer: "https://id.example.com", clientID: "ci-runner",
///                        scopes: ["deploy"], grant: .workload)
/// plan.workload = "file:/var/run/secrets/tokens/moose"
/// let manager = try TokenManager(plan: plan, storage: storage, key: "ci", transport: transport)
/// try await manager.login(with: .workload)            // stores the plan with the session
/// // Elsewhere, later, in another process:
/// let same = try await TokenManager.open(key: "ci", storage: storage, transport: transport)
/// let token = try await same.accessToken()            // renewed as the plan says
/// ```
public struct SessionPlan: Sendable, Codable, Hashable {
    /// The grant a session's login used (and, without a refresh token, how it is renewed).
    public enum Grant: String, Sendable, Codable {
        /// Authorization code with PKCE (a person in a browser); renewed with the refresh token.
        case authorizationCode = "authorization_code"
        /// The device authorization grant (RFC 8628); renewed with the refresh token.
        case deviceCode = "device_code"
        /// The client credentials grant: renewed by a new grant.
        case clientCredentials = "client_credentials"
        /// A workload's own identity token exchanged for tokens: renewed by a new exchange of a fresh
        /// identity token from `workload`.
        case workload
    }

    /// The plan format this version of Moose writes.
    public static let currentVersion = 1
    /// The session attribute the plan is written under (JSON, sealed with the session).
    public static let attribute = "moose.plan"

    /// The plan format it was read from: `currentVersion`, or 0 for a session written by Moose 0.3.
    public var version: Int
    /// The storage key the session lives under (set from the key whenever a plan is read).
    public var name: String
    /// The provider's issuer URL.
    public var issuer: String
    /// The client's id at the provider.
    public var clientID: String
    /// What logins and renewals ask for.
    public var scopes: [String]
    /// The grant of the login.
    public var grant: Grant
    /// A file holding the client secret (read at every use of the client; the secret is never in the plan).
    public var clientSecretFile: String?
    /// Endpoints configured by hand (a provider without discovery).
    public var endpoints: EndpointOverrides
    /// The DPoP algorithm logins bind their tokens with (`ES256`, `EdDSA`, `RS256`); `nil`: bearer tokens.
    public var dpop: String?
    /// The RFC 8707 resource the tokens are for, named on login and every renewal.
    public var resource: String?
    /// An environment variable holding the client secret (read at every use of the client).
    public var clientSecretEnv: String?
    /// How the client sends its secret: `basic` (`client_secret_basic`, the default) or `post`.
    public var clientAuth: String?
    /// A private key file (PEM or a private JWK) for `private_key_jwt` (RFC 7523 §2.2), read at every use of the client.
    public var privateKeyFile: String?
    /// The `kid` the client assertion names (a JWK's own `kid` otherwise).
    public var privateKeyID: String?
    /// The `audience` a client-credentials or workload grant names (Auth0 and others need it).
    public var audience: String?
    /// A PEM file of the CAs to trust for the provider, for the caller's transport (`nil`: the system's).
    public var caFile: String?
    /// Public-key pins (`sha256//BASE64`) for the issuer's host, for the caller's transport.
    public var publicKeyPins: [String]?
    /// A workload's identity source: `github`, `gitlab` (the variable `MOOSE_ID_TOKEN`),
    /// `gitlab:VARIABLE`, `env:VARIABLE`, `file:PATH` or `command:PROGRAM ARG…` (run without a shell).
    public var workload: String?
    /// The audience asked of the workload's identity source (default: the issuer).
    public var workloadAudience: String?
    /// The workload grant: `token-exchange` (RFC 8693, the default) or `jwt-bearer` (RFC 7523).
    public var workloadGrant: String?
    /// The subject token type a token exchange names (default: an ID token's).
    public var subjectTokenType: String?
    /// Whether the client's credentials are held by the app that made the session (a
    /// `ClientAuthentication` value given to `TokenManager`), not by a reference stored here: another
    /// process cannot renew the session without them.
    public var authenticationHeldByApp: Bool = false
    /// The loopback port of an authorization-code login's redirect, for a provider that registered one
    /// exact redirect URI (`moose login --port`); `nil`: any free port.
    public var loopbackPort: UInt16?

    /// A plan for `clientID` at `issuer`, stored under `name`.
    ///
    /// - Parameters:
    ///   - name: the storage key the session will live under (replaced by the key whenever a plan is read).
    ///   - issuer: the provider's issuer URL (discovered from on first use).
    ///   - clientID: the client's id there.
    ///   - scopes: what logins and renewals ask for (empty: the provider's default scopes).
    ///   - grant: the login's grant (default: authorization code).
    ///   - clientSecretFile: a path to a file holding the client secret, read at every use; `nil` (the
    ///     default): no secret file (a public client, or another source set afterwards).
    ///   - endpoints: endpoints configured by hand, replacing discovered ones; default: none.
    public init(
        name: String, issuer: String, clientID: String, scopes: [String], grant: Grant = .authorizationCode,
        clientSecretFile: String? = nil, endpoints: EndpointOverrides = EndpointOverrides()
    ) {
        version = Self.currentVersion
        self.name = name
        self.issuer = issuer
        self.clientID = clientID
        self.scopes = scopes
        self.grant = grant
        self.clientSecretFile = clientSecretFile
        self.endpoints = endpoints
    }

    enum CodingKeys: String, CodingKey {
        case version, name, issuer, clientID, scopes, grant, clientSecretFile, endpoints, dpop, resource,
            clientSecretEnv
        case clientAuth, privateKeyFile, privateKeyID, audience, caFile, publicKeyPins, workload, workloadAudience
        case workloadGrant, subjectTokenType, authenticationHeldByApp, loopbackPort
    }

    /// Reads a plan; a missing optional field is absent, a missing `version` is Moose 0.3's (0).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decodeIfPresent(Int.self, forKey: .version) ?? 0
        name = try container.decodeIfPresent(String.self, forKey: .name) ?? ""
        issuer = try container.decode(String.self, forKey: .issuer)
        clientID = try container.decode(String.self, forKey: .clientID)
        scopes = try container.decodeIfPresent([String].self, forKey: .scopes) ?? []
        grant = try container.decodeIfPresent(Grant.self, forKey: .grant) ?? .authorizationCode
        clientSecretFile = try container.decodeIfPresent(String.self, forKey: .clientSecretFile)
        endpoints = try container.decodeIfPresent(EndpointOverrides.self, forKey: .endpoints) ?? EndpointOverrides()
        dpop = try container.decodeIfPresent(String.self, forKey: .dpop)
        resource = try container.decodeIfPresent(String.self, forKey: .resource)
        clientSecretEnv = try container.decodeIfPresent(String.self, forKey: .clientSecretEnv)
        clientAuth = try container.decodeIfPresent(String.self, forKey: .clientAuth)
        privateKeyFile = try container.decodeIfPresent(String.self, forKey: .privateKeyFile)
        privateKeyID = try container.decodeIfPresent(String.self, forKey: .privateKeyID)
        audience = try container.decodeIfPresent(String.self, forKey: .audience)
        caFile = try container.decodeIfPresent(String.self, forKey: .caFile)
        publicKeyPins = try container.decodeIfPresent([String].self, forKey: .publicKeyPins)
        workload = try container.decodeIfPresent(String.self, forKey: .workload)
        workloadAudience = try container.decodeIfPresent(String.self, forKey: .workloadAudience)
        workloadGrant = try container.decodeIfPresent(String.self, forKey: .workloadGrant)
        subjectTokenType = try container.decodeIfPresent(String.self, forKey: .subjectTokenType)
        authenticationHeldByApp = try container.decodeIfPresent(Bool.self, forKey: .authenticationHeldByApp) ?? false
        loopbackPort = try container.decodeIfPresent(UInt16.self, forKey: .loopbackPort)
    }

    /// Writes the plan; `authenticationHeldByApp` only when set.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(name, forKey: .name)
        try container.encode(issuer, forKey: .issuer)
        try container.encode(clientID, forKey: .clientID)
        try container.encode(scopes, forKey: .scopes)
        try container.encode(grant, forKey: .grant)
        try container.encodeIfPresent(clientSecretFile, forKey: .clientSecretFile)
        try container.encode(endpoints, forKey: .endpoints)
        try container.encodeIfPresent(dpop, forKey: .dpop)
        try container.encodeIfPresent(resource, forKey: .resource)
        try container.encodeIfPresent(clientSecretEnv, forKey: .clientSecretEnv)
        try container.encodeIfPresent(clientAuth, forKey: .clientAuth)
        try container.encodeIfPresent(privateKeyFile, forKey: .privateKeyFile)
        try container.encodeIfPresent(privateKeyID, forKey: .privateKeyID)
        try container.encodeIfPresent(audience, forKey: .audience)
        try container.encodeIfPresent(caFile, forKey: .caFile)
        try container.encodeIfPresent(publicKeyPins, forKey: .publicKeyPins)
        try container.encodeIfPresent(workload, forKey: .workload)
        try container.encodeIfPresent(workloadAudience, forKey: .workloadAudience)
        try container.encodeIfPresent(workloadGrant, forKey: .workloadGrant)
        try container.encodeIfPresent(subjectTokenType, forKey: .subjectTokenType)
        if authenticationHeldByApp { try container.encode(true, forKey: .authenticationHeldByApp) }
        try container.encodeIfPresent(loopbackPort, forKey: .loopbackPort)
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
    /// - Returns: the plan (version 1, else Moose 0.3's profile as version 0) named `key`, or `nil`
    ///   when neither attribute holds a plan that decodes.
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
    public static func implied(by session: OAuthSession, key: String) -> SessionPlan {
        var plan = SessionPlan(
            name: key, issuer: session.issuer, clientID: session.clientID, scopes: session.tokens.scopes)
        plan.resource = session.resource
        if session.tokens.refreshToken == nil, let grant = session.attributes[SessionEngine.grantAttribute] {
            if grant.utf8.elementsEqual("client_credentials".utf8) { plan.grant = .clientCredentials }
            if grant.utf8.elementsEqual(WorkloadGrant.sessionGrant.utf8) { plan.grant = .workload }
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
    ///   credentials held by the app that made the session (`authenticationHeldByApp`, no source here).
    public func clientAuthentication() throws -> ClientAuthentication {
        if authenticationHeldByApp, privateKeyFile == nil, clientSecretFile == nil, clientSecretEnv == nil {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "the client credentials of the session under \(name) are held by the app that made it (not stored with it): "
                    + "open it with them, TokenManager(issuer:clientID:authentication:storage:key:…)")
        }
        if let path = privateKeyFile { return try privateKeyAuthentication(path) }
        var secret: String? = nil
        if let file = clientSecretFile {
            // Line ends around the secret are the file's, not the secret's.
            let bytes = try Self.readFile(file, what: "client secret file", limit: 4096)
            let isLineEnd: (UInt8) -> Bool = { $0 == 0x0A || $0 == 0x0D }
            secret = String(
                decoding: bytes.drop(while: isLineEnd).reversed().drop(while: isLineEnd).reversed(), as: UTF8.self)
        } else if let variable = clientSecretEnv {
            guard let value = getenv(variable).map({ String(cString: $0) }), !value.isEmpty else {
                throw OAuthError(
                    OAuthError.invalidConfiguration,
                    "the environment variable \(variable) (the client secret of profile \(name)) is not set")
            }
            secret = value
        }
        guard let secret else { return .none }
        return clientAuth == "post" ? .clientSecretPost(secret) : .clientSecretBasic(secret)
    }

    private func privateKeyAuthentication(_ path: String) throws -> ClientAuthentication {
        let signing: JWTKey
        let text = String(decoding: try Self.readFile(path, what: "key file"), as: UTF8.self)
        do {
            if text.trimmingASCIIWhitespace().hasPrefix("{") {
                // A private JWK: its kid names the key unless the plan's `privateKeyID` does.
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
    ///   - metadata: the provider's discovered metadata (with the plan's `endpoints` applied).
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
        if let list = publicKeyPins, !list.isEmpty {
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
        let trust = TransportTrust(caFile: caFile, pins: pins)
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

    /// The workload grant the plan's `workload` source names, or `nil` for a plan without one; an
    /// unreadable spec is `invalidConfiguration`. `transport` is for GitHub Actions' token request.
    ///
    /// - Parameter transport: what asks GitHub Actions for its token (the other sources read a file, a
    ///   variable or a command, not the network).
    /// - Throws: `OAuthError.invalidConfiguration` for a `workload` spec `identity(_:transport:)` does
    ///   not know; an unknown `workloadGrant` name is read as token exchange.
    public func workloadGrant(transport: any HTTPTransport) throws -> WorkloadGrant? {
        guard let spec = workload else { return nil }
        return WorkloadGrant(
            identity: try Self.identity(spec, transport: transport),
            grant: workloadGrant.flatMap(WorkloadGrant.Grant.init(rawValue:)) ?? .tokenExchange,
            identityAudience: workloadAudience ?? issuer,
            subjectTokenType: subjectTokenType ?? ExchangeToken.idTokenType,
            audiences: audience.map { [$0] } ?? [])
    }

    /// The identity source `spec` names (see `workload`).
    ///
    /// - Parameters:
    ///   - spec: `github`, `gitlab`, `gitlab:VARIABLE`, `env:VARIABLE`, `file:PATH` or
    ///     `command:PROGRAM ARG…` (split on spaces, run without a shell).
    ///   - transport: what asks GitHub Actions for its token (used by `github` only).
    /// - Throws: `OAuthError.invalidConfiguration` for any other spec (an empty variable, path or command included).
    public static func identity(_ spec: String, transport: any HTTPTransport) throws -> WorkloadIdentity {
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
            if !words.isEmpty { return .command(words) }
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
