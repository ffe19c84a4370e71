#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension SessionPlan.Grant {
    /// The grant a config file or a command line names: its raw value, or a short name (`code`,
    /// `browser`, `device`, `service`); `nil` for anything else.
    public init?(named name: String) {
        switch name.lowercased() {
        case "authorization_code", "code", "browser": self = .authorizationCode
        case "device_code", "device": self = .deviceCode
        case "client_credentials", "service": self = .clientCredentials
        case "workload": self = .workload
        default: return nil
        }
    }
}

extension SessionPlan {
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
    /// - Throws: `OAuthError.invalidConfiguration` naming what is missing or wrong: no issuer or client
    ///   id anywhere, an issuer that is not an absolute http(s) URL, two credentials in one layer, a
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
        else { throw fail("the first login of profile \(name) needs an issuer and a client id") }
        guard let url = URL(string: issuer), let scheme = url.scheme?.lowercased(),
            scheme == "https" || scheme == "http", url.host != nil
        else { throw fail("the issuer \(issuer) is not an absolute https URL (like https://id.example.com)") }
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

        let grant = try resolvedGrant(given: given, file: file, kept: same)
        let isService = grant == .clientCredentials || grant == .workload
        var plan = SessionPlan(
            name: name, issuer: issuer, clientID: clientID,
            scopes: given.scopes ?? file.scopes ?? kept?.scopes ?? (isService ? [] : defaultScopes), grant: grant,
            endpoints: same?.endpoints ?? EndpointOverrides())
        if let device = given.deviceEndpoint ?? file.deviceEndpoint {
            guard let endpoint = URL(string: device), endpoint.scheme != nil else {
                throw fail("the device authorization endpoint \(device) is not a URL")
            }
            plan.endpoints.deviceAuthorizationEndpoint = endpoint
        }
        try plan.resolveCredentials(given: given, file: file, kept: same)
        plan.audience = given.audience ?? file.audience ?? kept?.audience
        plan.caFile = (given.caFile ?? file.caFile).map(absolute) ?? same?.caFile
        if let pins = given.publicKeyPins ?? file.publicKeyPins, !pins.isEmpty {
            plan.publicKeyPins = pins
            plan.publicKeyPins = try plan.trust()?.pins.pins(for: url.host ?? "")
        } else {
            plan.publicKeyPins = same?.publicKeyPins
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
        plan.loopbackPort =
            grant == .authorizationCode ? given.loopbackPort ?? file.loopbackPort ?? same?.loopbackPort : nil
        try plan.resolveWorkload(given: given, file: file, kept: same)
        return plan
    }

    /// The grant: given, else the file's, else — for the same provider and client — the kept one
    /// (a kept workload grant only with its source), else a browser login.
    private static func resolvedGrant(
        given: ProfileSettings, file: ProfileSettings, kept: SessionPlan?
    ) throws -> Grant {
        if let grant = given.grant ?? file.grant { return grant }
        if given.workload != nil || file.workload != nil { return .workload }
        guard let kept else { return .authorizationCode }
        if kept.grant == .workload, kept.workload == nil { return .authorizationCode }
        return kept.grant
    }

    /// The client's authentication (by reference) from the first layer that names any.
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
        if try names(given) {
            take(given)
            privateKeyID = given.privateKeyID
            clientAuth = given.clientAuth
        } else if try names(file) {
            take(file)
            privateKeyID = given.privateKeyID ?? file.privateKeyID
            clientAuth = given.clientAuth ?? file.clientAuth
        } else if let kept {
            clientSecretFile = kept.clientSecretFile
            clientSecretEnv = kept.clientSecretEnv
            privateKeyFile = kept.privateKeyFile
            privateKeyID = given.privateKeyID ?? file.privateKeyID ?? kept.privateKeyID
            clientAuth = given.clientAuth ?? file.clientAuth ?? kept.clientAuth
        } else {
            privateKeyID = given.privateKeyID ?? file.privateKeyID
            clientAuth = given.clientAuth ?? file.clientAuth
        }
        if let clientAuth, clientAuth != "basic", clientAuth != "post" {
            throw OAuthError(OAuthError.invalidConfiguration, "client_auth is basic or post, not \(clientAuth)")
        }
        if grant == .clientCredentials, clientSecretFile == nil, clientSecretEnv == nil, privateKeyFile == nil {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "a client-credentials login needs the client's credentials: a secret file, a secret variable or a private key"
            )
        }
    }

    private mutating func take(_ layer: ProfileSettings) {
        clientSecretFile = layer.clientSecretFile.map(Self.absolute)
        clientSecretEnv = layer.clientSecretEnv
        privateKeyFile = layer.privateKeyFile.map(Self.absolute)
    }

    /// A workload's source, audience, grant and token type: given, else the file's, else the kept ones.
    private mutating func resolveWorkload(
        given: ProfileSettings, file: ProfileSettings, kept: SessionPlan?
    ) throws {
        guard grant == .workload else { return }
        workload = (given.workload ?? file.workload).map(Self.absoluteWorkload) ?? kept?.workload
        guard workload != nil else {
            throw OAuthError(
                OAuthError.invalidConfiguration,
                "a workload login needs its identity source (github, gitlab, env:VAR, file:PATH or command:PROGRAM)")
        }
        workloadAudience = given.workloadAudience ?? file.workloadAudience ?? kept?.workloadAudience
        workloadGrant = given.workloadGrant ?? file.workloadGrant ?? kept?.workloadGrant
        if let name = workloadGrant, WorkloadGrant.Grant(rawValue: name) == nil {
            throw OAuthError(
                OAuthError.invalidConfiguration, "workload_grant is token-exchange or jwt-bearer, not \(name)")
        }
        if let type = given.subjectTokenType ?? file.subjectTokenType {
            guard let uri = ExchangeToken.type(named: type) else {
                throw OAuthError(
                    OAuthError.invalidConfiguration,
                    "subject_token_type is id_token, jwt, access_token, refresh_token or a URI, not \(type)")
            }
            subjectTokenType = uri
        } else {
            subjectTokenType = kept?.subjectTokenType
        }
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
