#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension SessionPlan.Grant.Kind {
    /// The grant a config file or a command line names: its raw value, or a short name (`code`,
    /// `browser`, `device`, `service`), in any case; `nil` for anything else.
    public init?(named name: String) {
        let name = name.lowercased()
        if let kind = Self.exactly(name) {
            self = kind
            return
        }
        switch name {
        case "code", "browser": self = .authorizationCode
        case "device": self = .deviceCode
        case "service": self = .clientCredentials
        default: return nil
        }
    }
}

extension SessionPlan {
    /// What a plan still lacks where `resolve` found nothing in any layer: the `underlying` error of the
    /// `invalidConfiguration` it throws, so that a caller can say how to give it in its own terms (a
    /// command's options, an app's settings screen) without reading the message.
    public enum Missing: Error, Sendable, Equatable {
        /// The issuer and the client id (a profile's first login, with neither given nor kept).
        case issuerAndClientID
        /// The client's credentials for a client-credentials login: a secret file, a secret variable or
        /// a private key.
        case clientCredentials
    }

    /// The scopes a person's login asks for when nothing says otherwise.
    public static let defaultScopes = ["openid", "profile", "email"]

    /// The plan of a new login of profile `name`, field by field: what was `given` (a command line),
    /// else the `profile`'s settings (a config file), else what the profile's last login `kept`, else
    /// the default — one small rule per field, a pure function (no file, no network; relative paths
    /// are made absolute against the current directory, since a plan is used from any directory later).
    ///
    /// The grouped fields move together: a layer that names any client credential (a secret file, a
    /// secret variable, a private key) replaces the credentials of the layers below it. What was kept
    /// of the provider and the client — endpoints, CA file, pins, credentials, grant, port, workload
    /// source — counts only for the same issuer and client (compared byte for byte): a kept secret
    /// never goes to another issuer.
    ///
    /// ```swift
    /// var given = ProfileSettings()
    /// given.scopes = ["read"]
    /// let plan = try SessionPlan.resolve(name: "ci", given: given, profile: config.profiles["ci"], kept: nil)
    /// ```
    ///
    /// - Parameters:
    ///   - name: the profile (the session's key).
    ///   - given: the settings given now (a command line); every field optional.
    ///   - profile: the profile's settings in a config file, if any.
    ///   - kept: the plan the profile's last login used (its session's, or one kept after a logout).
    /// - Returns: a plan ready for `TokenManager(plan:…)`.
    /// - Throws: `OAuthError.invalidConfiguration` naming what is missing or wrong (what is missing also
    ///   as its `underlying` `Missing`, for a caller that names its own way to give it): no issuer or client
    ///   id anywhere, an issuer that breaks `IssuerRule`, two credentials in one layer, a
    ///   client-credentials grant without credentials, a workload grant without a source, an unknown
    ///   `client_auth`, `workload_grant`, `subject_token_type` or DPoP algorithm, unusable pins, a
    ///   resource or device endpoint that is not a URL.
    public static func resolve(
        name: String, given: ProfileSettings, profile: ProfileSettings?, kept: SessionPlan?
    ) throws -> SessionPlan {
        var file = profile ?? ProfileSettings()
        func fail(_ message: String) -> OAuthError { OAuthError(OAuthError.invalidConfiguration, message) }
        guard let issuer = given.issuer ?? file.issuer ?? kept?.issuer,
            let clientID = given.clientID ?? file.clientID ?? kept?.clientID
        else {
            throw OAuthError(
                OAuthError.invalidConfiguration, "the first login of profile \(name) needs an issuer and a client id",
                underlying: Missing.issuerAndClientID)
        }
        // The one issuer rule (`IssuerRule`), as discovery asks it: a usage error now, not an outage later.
        if let problem = IssuerRule.problem(issuer) { throw fail("the issuer \(issuer) \(problem.predicate)") }
        guard let url = URL(string: issuer) else { throw fail("the issuer \(issuer) is not a URL") }
        // What the last login kept of the provider and the client (endpoints, trust, credentials, grant,
        // port) speaks for that provider and client only: a kept secret never goes to another issuer.
        let same = kept.flatMap { kept in
            kept.issuer.utf8.elementsEqual(issuer.utf8) && kept.clientID.utf8.elementsEqual(clientID.utf8) ? kept : nil
        }
        // The same for the file's own provider and client: a given issuer or client id other than the
        // file's takes none of the file's credentials, trust, endpoint or port with it.
        let fileIsForThem =
            (file.issuer.map { $0.utf8.elementsEqual(issuer.utf8) } ?? true)
            && (file.clientID.map { $0.utf8.elementsEqual(clientID.utf8) } ?? true)
        if !fileIsForThem {
            file.clientSecretFile = nil
            file.clientSecretEnv = nil
            file.privateKeyFile = nil
            file.privateKeyID = nil
            file.clientAuth = nil
            file.caFile = nil
            file.publicKeyPins = nil
            file.deviceEndpoint = nil
            file.loopbackPort = nil
        }

        let kind = try resolvedGrant(given: given, file: file, kept: same)
        var plan = SessionPlan(
            name: name, issuer: issuer, clientID: clientID,
            scopes: given.scopes ?? file.scopes ?? kept?.scopes ?? (kind.renewsWithoutAPerson ? [] : defaultScopes),
            grant: Grant(kind), endpoints: same?.provider.endpoints ?? EndpointOverrides())
        if let device = given.deviceEndpoint ?? file.deviceEndpoint {
            guard let endpoint = URL(string: device), endpoint.scheme != nil else {
                throw fail("the device authorization endpoint \(device) is not a URL")
            }
            plan.provider.endpoints.deviceAuthorizationEndpoint = endpoint
        }
        try plan.resolveCredentials(given: given, file: file, kept: same)
        plan.audience = given.audience ?? file.audience ?? kept?.audience
        plan.provider.caFile = (given.caFile ?? file.caFile).map(absolute) ?? same?.provider.caFile
        if let pins = given.publicKeyPins ?? file.publicKeyPins, !pins.isEmpty {
            plan.provider.publicKeyPins = pins
            plan.provider.publicKeyPins = try plan.trust()?.pins.pins(for: url.host ?? "") ?? []
        } else {
            plan.provider.publicKeyPins = same?.provider.publicKeyPins ?? []
        }
        plan.dpop = given.dpop ?? file.dpop ?? kept?.dpop
        _ = try plan.dpopAlgorithm()
        if let resource = given.resource ?? file.resource {
            do { plan.resource = try ResourceIdentifier.canonical(resource) } catch {
                throw OAuthError(
                    OAuthError.invalidConfiguration, "the resource \(resource) is not usable: \(error)",
                    underlying: error)
            }
        } else {
            plan.resource = kept?.resource
        }
        if kind == .authorizationCode {
            plan.grant = .authorizationCode(
                loopbackPort: given.loopbackPort ?? file.loopbackPort ?? same?.grant.loopbackPort)
        }
        try plan.resolveWorkload(given: given, file: file, kept: same)
        return plan
    }

    /// The grant: given, else the file's, else — for the same provider and client — the kept one
    /// (a kept workload grant only with its source), else a browser login.
    private static func resolvedGrant(
        given: ProfileSettings, file: ProfileSettings, kept: SessionPlan?
    ) throws -> Grant.Kind {
        if let grant = given.grant ?? file.grant { return grant }
        if given.workload != nil || file.workload != nil { return .workload }
        guard let kept else { return .authorizationCode }
        if case .workload(let workload) = kept.grant, workload.source == nil { return .authorizationCode }
        return kept.grant.kind
    }

    /// The client's authentication (by reference) from the first layer that names any; the key's `kid`
    /// and how a secret is sent from that layer, unless given (even given or in the file without a
    /// credential of their own: they apply to the credential this ends up with).
    private mutating func resolveCredentials(
        given: ProfileSettings, file: ProfileSettings, kept: SessionPlan?
    ) throws {
        func names(_ layer: ProfileSettings) throws -> Bool {
            let count = [layer.clientSecretFile, layer.clientSecretEnv, layer.privateKeyFile].compactMap { $0 }.count
            guard count <= 1 else {
                throw OAuthError(
                    OAuthError.invalidConfiguration,
                    "give one client credential: a secret file, a secret variable or a private key (\(count) given)")
            }
            return count == 1
        }
        // The key's `kid` and how a secret is sent belong with the credential: from its layer, unless given.
        let reference: Credential
        let keyID: String?
        let clientAuth: String?
        if try names(given) {
            reference = Self.reference(given)
            keyID = given.privateKeyID
            clientAuth = given.clientAuth
        } else if try names(file) {
            reference = Self.reference(file)
            keyID = given.privateKeyID ?? file.privateKeyID
            clientAuth = given.clientAuth ?? file.clientAuth
        } else if let kept {
            // Credentials the app that made the kept session held are not the next login's.
            reference = kept.client.credential == .heldByApp ? .none : kept.client.credential
            let keptKeyID: String?
            let keptSending: SecretSending?
            switch kept.client.credential {
            case .privateKey(_, let id): (keptKeyID, keptSending) = (id, nil)
            case .secretFile(_, let sending), .secretVariable(_, let sending): (keptKeyID, keptSending) = (nil, sending)
            case .none, .heldByApp: (keptKeyID, keptSending) = (nil, nil)
            }
            keyID = given.privateKeyID ?? file.privateKeyID ?? keptKeyID
            clientAuth = given.clientAuth ?? file.clientAuth ?? keptSending?.rawValue
        } else {
            reference = .none
            keyID = given.privateKeyID ?? file.privateKeyID
            clientAuth = given.clientAuth ?? file.clientAuth
        }
        var sending = SecretSending.basic
        if let clientAuth {
            guard
                let named = [SecretSending.basic, .post].first(where: {
                    $0.rawValue.utf8.elementsEqual(clientAuth.utf8)
                })
            else {
                throw OAuthError(OAuthError.invalidConfiguration, "client_auth is basic or post, not \(clientAuth)")
            }
            sending = named
        }
        switch reference {
        case .secretFile(let path, _): client.credential = .secretFile(path, sending: sending)
        case .secretVariable(let variable, _): client.credential = .secretVariable(variable, sending: sending)
        case .privateKey(let path, _): client.credential = .privateKey(file: path, keyID: keyID)
        case .none, .heldByApp: client.credential = .none
        }
        if grant.kind == .clientCredentials, client.credential == .none {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "a client-credentials login needs the client's credentials: a secret file, a secret variable or a private key",
                underlying: Missing.clientCredentials)
        }
    }

    /// The credential `layer` names (one at most, checked before), paths made absolute; its `kid` and
    /// secret sending are set by `resolveCredentials`.
    private static func reference(_ layer: ProfileSettings) -> Credential {
        if let path = layer.privateKeyFile { return .privateKey(file: absolute(path), keyID: nil) }
        if let path = layer.clientSecretFile { return .secretFile(absolute(path), sending: .basic) }
        if let variable = layer.clientSecretEnv { return .secretVariable(variable, sending: .basic) }
        return .none
    }

    /// A workload's source, audience, grant and token type: given, else the file's, else the kept ones.
    private mutating func resolveWorkload(
        given: ProfileSettings, file: ProfileSettings, kept: SessionPlan?
    ) throws {
        guard grant.kind == .workload else { return }
        let kept = kept?.grant.workload
        guard let source = (given.workload ?? file.workload).map(Self.absoluteWorkload) ?? kept?.source else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "a workload login needs its identity source (github, gitlab, env:VAR, file:PATH or command:PROGRAM)")
        }
        var workload = Workload(
            source: source, identityAudience: given.workloadAudience ?? file.workloadAudience ?? kept?.identityAudience,
            grant: kept?.grant ?? .tokenExchange)
        if let name = given.workloadGrant ?? file.workloadGrant {
            guard let named = WorkloadGrant.Grant.allCases.first(where: { $0.rawValue.utf8.elementsEqual(name.utf8) })
            else {
                throw OAuthError(
                    OAuthError.invalidConfiguration, "workload_grant is token-exchange or jwt-bearer, not \(name)")
            }
            workload.grant = named
        }
        if let type = given.subjectTokenType ?? file.subjectTokenType {
            guard let uri = ExchangeToken.type(named: type) else {
                throw OAuthError(
                    OAuthError.invalidConfiguration,
                    "subject_token_type is id_token, jwt, access_token, refresh_token or a URI, not \(type)")
            }
            workload.subjectTokenType = uri
        } else {
            workload.subjectTokenType = kept?.subjectTokenType
        }
        grant = .workload(workload)
    }

    /// `path` made absolute against the current directory.
    package static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    /// A `file:` workload source with its path made absolute.
    package static func absoluteWorkload(_ spec: String) -> String {
        guard spec.utf8.starts(with: "file:".utf8), spec.count > 5 else { return spec }
        return "file:" + absolute(String(spec.dropFirst(5)))
    }
}
