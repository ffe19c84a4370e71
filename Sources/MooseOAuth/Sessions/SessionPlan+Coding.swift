#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The plan's JSON. Version 2 (written) nests the provider, the client and the grant:
//
//     {"version": 2, "name": "ci",
//      "provider": {"issuer": "https://id.example.com", "endpoints": {}, "caFile": "/ca.pem",
//                   "publicKeyPins": ["sha256//…"]},
//      "client": {"id": "ci-runner", "credential": {"type": "secret_file", "file": "/run/secret",
//                                                   "sending": "basic"}},
//      "grant": {"type": "workload", "source": "github", "identityAudience": "…",
//                "workloadGrant": "token-exchange", "subjectTokenType": "…"},
//      "scopes": ["deploy"], "audience": "…", "resource": "…", "dpop": "ES256"}
//
// Versions 0 (Moose 0.3's CLI profile, no `version`) and 1 hold the same as flat fields, still read.
// A plan is sealed with its session, but it is still read defensively: an unknown grant or credential
// type, or a missing issuer or client id, fails the decoding (the session then implies its plan).
extension SessionPlan {
    private enum Keys: String, CodingKey {
        case version, name, provider, client, grant, scopes, audience, resource, dpop
    }

    private enum ProviderKeys: String, CodingKey {
        case issuer, endpoints, caFile, publicKeyPins
    }

    private enum ClientKeys: String, CodingKey {
        case id, credential
    }

    private enum CredentialKeys: String, CodingKey {
        case type, file, variable, sending, keyID
    }

    private enum GrantKeys: String, CodingKey {
        case type, loopbackPort, source, identityAudience, workloadGrant, subjectTokenType
    }

    /// The credential types of version 2's `client.credential.type`.
    private enum CredentialType: String, CaseIterable {
        case none
        case secretFile = "secret_file"
        case secretVariable = "secret_variable"
        case privateKey = "private_key"
        case heldByApp = "held_by_app"
    }

    /// The fields of versions 0 and 1.
    private enum FlatKeys: String, CodingKey {
        case version, name, issuer, clientID, scopes, grant, clientSecretFile, endpoints, dpop, resource
        case clientSecretEnv, clientAuth, privateKeyFile, privateKeyID, audience, caFile, publicKeyPins, workload
        case workloadAudience, workloadGrant, subjectTokenType, authenticationHeldByApp, loopbackPort
    }

    /// Reads a plan of any version: 2's nested objects, or the flat fields of 1 and 0 (a missing
    /// `version` is Moose 0.3's, 0); a missing optional field is absent.
    ///
    /// - Throws: `DecodingError` for a missing issuer or client id, or a grant, credential, secret
    ///   sending or workload grant type it does not know (a version 0 or 1 plan's unknown
    ///   `workloadGrant` reads as token exchange, and its unknown `clientAuth` as `basic`, as before).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        let version = try container.decodeIfPresent(Int.self, forKey: .version) ?? 0
        guard version >= 2 else {
            try self.init(flat: decoder.container(keyedBy: FlatKeys.self), version: version)
            return
        }
        let provider = try container.nestedContainer(keyedBy: ProviderKeys.self, forKey: .provider)
        let client = try container.nestedContainer(keyedBy: ClientKeys.self, forKey: .client)
        let credential =
            try client.contains(.credential)
            ? Self.credential(client.nestedContainer(keyedBy: CredentialKeys.self, forKey: .credential)) : .none
        self.init(
            name: try container.decodeIfPresent(String.self, forKey: .name) ?? "",
            provider: Provider(
                issuer: try provider.decode(String.self, forKey: .issuer),
                endpoints: try provider.decodeIfPresent(EndpointOverrides.self, forKey: .endpoints)
                    ?? EndpointOverrides(),
                caFile: try provider.decodeIfPresent(String.self, forKey: .caFile),
                publicKeyPins: try provider.decodeIfPresent([String].self, forKey: .publicKeyPins) ?? []),
            client: Client(id: try client.decode(String.self, forKey: .id), credential: credential),
            grant: try Self.grant(container.nestedContainer(keyedBy: GrantKeys.self, forKey: .grant)),
            scopes: try container.decodeIfPresent([String].self, forKey: .scopes) ?? [],
            audience: try container.decodeIfPresent(String.self, forKey: .audience),
            resource: try container.decodeIfPresent(String.self, forKey: .resource),
            dpop: try container.decodeIfPresent(String.self, forKey: .dpop))
        self.version = version
    }

    private static func credential(_ container: KeyedDecodingContainer<CredentialKeys>) throws -> Credential {
        let name = try container.decode(String.self, forKey: .type)
        guard let type = CredentialType.allCases.first(where: { $0.rawValue.utf8.elementsEqual(name.utf8) }) else {
            throw DecodingError.dataCorruptedError(
                forKey: .type, in: container, debugDescription: "unknown client credential type")
        }
        func sending() throws -> SecretSending {
            try container.decodeIfPresent(SecretSending.self, forKey: .sending) ?? .basic
        }
        switch type {
        case .none: return .none
        case .heldByApp: return .heldByApp
        case .secretFile: return .secretFile(try container.decode(String.self, forKey: .file), sending: try sending())
        case .secretVariable:
            return .secretVariable(try container.decode(String.self, forKey: .variable), sending: try sending())
        case .privateKey:
            return .privateKey(
                file: try container.decode(String.self, forKey: .file),
                keyID: try container.decodeIfPresent(String.self, forKey: .keyID))
        }
    }

    private static func grant(_ container: KeyedDecodingContainer<GrantKeys>) throws -> Grant {
        let name = try container.decode(String.self, forKey: .type)
        guard let kind = Grant.Kind.exactly(name) else {
            throw DecodingError.dataCorruptedError(forKey: .type, in: container, debugDescription: "unknown grant type")
        }
        switch kind {
        case .authorizationCode:
            return .authorizationCode(loopbackPort: try container.decodeIfPresent(UInt16.self, forKey: .loopbackPort))
        case .deviceCode: return .deviceCode
        case .clientCredentials: return .clientCredentials
        case .workload:
            return .workload(
                Workload(
                    source: try container.decodeIfPresent(String.self, forKey: .source),
                    identityAudience: try container.decodeIfPresent(String.self, forKey: .identityAudience),
                    grant: try container.decodeIfPresent(WorkloadGrant.Grant.self, forKey: .workloadGrant)
                        ?? .tokenExchange,
                    subjectTokenType: try container.decodeIfPresent(String.self, forKey: .subjectTokenType)))
        }
    }

    /// Reads versions 0 and 1: the credential is the first reference of a private key, a secret file
    /// and a secret variable (the order their authentication chose), else the app's, else none; the
    /// port and the workload's fields count for their own grant only.
    private init(flat container: KeyedDecodingContainer<FlatKeys>, version: Int) throws {
        func string(_ key: FlatKeys) throws -> String? { try container.decodeIfPresent(String.self, forKey: key) }
        let post = try string(.clientAuth).map { $0.utf8.elementsEqual("post".utf8) } ?? false
        let sending: SecretSending = post ? .post : .basic
        let credential: Credential
        if let file = try string(.privateKeyFile) {
            credential = .privateKey(file: file, keyID: try string(.privateKeyID))
        } else if let file = try string(.clientSecretFile) {
            credential = .secretFile(file, sending: sending)
        } else if let variable = try string(.clientSecretEnv) {
            credential = .secretVariable(variable, sending: sending)
        } else if try container.decodeIfPresent(Bool.self, forKey: .authenticationHeldByApp) == true {
            credential = .heldByApp
        } else {
            credential = .none
        }
        var kind = Grant.Kind.authorizationCode
        if let name = try string(.grant) {
            guard let named = Grant.Kind.exactly(name) else {
                throw DecodingError.dataCorruptedError(forKey: .grant, in: container, debugDescription: "unknown grant")
            }
            kind = named
        }
        let grant: Grant
        switch kind {
        case .authorizationCode:
            grant = .authorizationCode(loopbackPort: try container.decodeIfPresent(UInt16.self, forKey: .loopbackPort))
        case .deviceCode: grant = .deviceCode
        case .clientCredentials: grant = .clientCredentials
        case .workload:
            let exchange = try string(.workloadGrant).flatMap { name in
                WorkloadGrant.Grant.allCases.first { $0.rawValue.utf8.elementsEqual(name.utf8) }
            }
            grant = .workload(
                Workload(
                    source: try string(.workload), identityAudience: try string(.workloadAudience),
                    grant: exchange ?? .tokenExchange, subjectTokenType: try string(.subjectTokenType)))
        }
        self.init(
            name: try string(.name) ?? "",
            provider: Provider(
                issuer: try container.decode(String.self, forKey: .issuer),
                endpoints: try container.decodeIfPresent(EndpointOverrides.self, forKey: .endpoints)
                    ?? EndpointOverrides(),
                caFile: try string(.caFile),
                publicKeyPins: try container.decodeIfPresent([String].self, forKey: .publicKeyPins) ?? []),
            client: Client(id: try container.decode(String.self, forKey: .clientID), credential: credential),
            grant: grant, scopes: try container.decodeIfPresent([String].self, forKey: .scopes) ?? [],
            audience: try string(.audience), resource: try string(.resource), dpop: try string(.dpop))
        self.version = version
    }

    /// Writes the plan as the current version (2, nested), whatever version it was read from; absent
    /// optional fields, an empty pin list and a public client's credential are left out.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(Self.currentVersion, forKey: .version)
        try container.encode(name, forKey: .name)
        var provider = container.nestedContainer(keyedBy: ProviderKeys.self, forKey: .provider)
        try provider.encode(self.provider.issuer, forKey: .issuer)
        try provider.encode(self.provider.endpoints, forKey: .endpoints)
        try provider.encodeIfPresent(self.provider.caFile, forKey: .caFile)
        if !self.provider.publicKeyPins.isEmpty {
            try provider.encode(self.provider.publicKeyPins, forKey: .publicKeyPins)
        }
        var client = container.nestedContainer(keyedBy: ClientKeys.self, forKey: .client)
        try client.encode(self.client.id, forKey: .id)
        if self.client.credential != .none {
            var credential = client.nestedContainer(keyedBy: CredentialKeys.self, forKey: .credential)
            switch self.client.credential {
            case .none: try credential.encode(CredentialType.none.rawValue, forKey: .type)
            case .heldByApp: try credential.encode(CredentialType.heldByApp.rawValue, forKey: .type)
            case .secretFile(let file, let sending):
                try credential.encode(CredentialType.secretFile.rawValue, forKey: .type)
                try credential.encode(file, forKey: .file)
                try credential.encode(sending, forKey: .sending)
            case .secretVariable(let variable, let sending):
                try credential.encode(CredentialType.secretVariable.rawValue, forKey: .type)
                try credential.encode(variable, forKey: .variable)
                try credential.encode(sending, forKey: .sending)
            case .privateKey(let file, let keyID):
                try credential.encode(CredentialType.privateKey.rawValue, forKey: .type)
                try credential.encode(file, forKey: .file)
                try credential.encodeIfPresent(keyID, forKey: .keyID)
            }
        }
        var grant = container.nestedContainer(keyedBy: GrantKeys.self, forKey: .grant)
        try grant.encode(self.grant.kind.rawValue, forKey: .type)
        switch self.grant {
        case .authorizationCode(let port): try grant.encodeIfPresent(port, forKey: .loopbackPort)
        case .deviceCode, .clientCredentials: break
        case .workload(let workload):
            try grant.encodeIfPresent(workload.source, forKey: .source)
            try grant.encodeIfPresent(workload.identityAudience, forKey: .identityAudience)
            try grant.encode(workload.grant, forKey: .workloadGrant)
            try grant.encodeIfPresent(workload.subjectTokenType, forKey: .subjectTokenType)
        }
        try container.encode(scopes, forKey: .scopes)
        try container.encodeIfPresent(audience, forKey: .audience)
        try container.encodeIfPresent(resource, forKey: .resource)
        try container.encodeIfPresent(dpop, forKey: .dpop)
    }
}
