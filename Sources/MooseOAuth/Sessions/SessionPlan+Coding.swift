#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The plan's JSON: version 1's flat fields, which the typed plan maps onto one to one, so a Moose
// before the typed plan reads every plan this one writes in full — its credential reference, CA file,
// pins and workload source included (a rolling upgrade of a fleet sharing a store never renews a
// pinned session unpinned, and an older process's logout keeps the whole plan):
//
//     {"version": 1, "name": "ci", "issuer": "https://id.example.com", "clientID": "ci-runner",
//      "scopes": ["deploy"], "grant": "workload", "endpoints": {}, "privateKeyFile": "/keys/ci.pem",
//      "privateKeyID": "ci-1", "workload": "github", "workloadGrant": "token-exchange", "caFile": "/ca.pem"}
//
// Version 0 (Moose 0.3's CLI profile, no `version`) holds the same fields. A plan is sealed with its
// session, but it is still read defensively: an unknown grant, or a missing issuer or client id, fails
// the decoding (the session then implies its plan).
extension SessionPlan {
    /// The fields of versions 0 and 1.
    private enum FlatKeys: String, CodingKey {
        case version, name, issuer, clientID, scopes, grant, clientSecretFile, endpoints, dpop, resource
        case clientSecretEnv, clientAuth, privateKeyFile, privateKeyID, audience, caFile, publicKeyPins, workload
        case workloadAudience, workloadGrant, subjectTokenType, authenticationHeldByApp, loopbackPort
    }

    /// Reads a plan of version 1 or 0 (a missing `version` is Moose 0.3's); a missing optional field
    /// is absent.
    ///
    /// - Throws: `DecodingError` for a missing issuer or client id, or a grant it does not know (an
    ///   unknown `workloadGrant` reads as token exchange, and an unknown `clientAuth` as `basic`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: FlatKeys.self)
        try self.init(flat: container, version: try container.decodeIfPresent(Int.self, forKey: .version) ?? 0)
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

    /// Writes the plan as version 1's flat fields, whatever version it was read from: one reference
    /// field for the credential (`privateKeyFile` and its `privateKeyID`, `clientSecretFile` or
    /// `clientSecretEnv` with `clientAuth`, or `authenticationHeldByApp`), the grant's name and its data
    /// (`loopbackPort`; `workload`, `workloadAudience`, `workloadGrant`, `subjectTokenType`); absent
    /// optional fields and an empty pin list are left out.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: FlatKeys.self)
        try container.encode(Self.currentVersion, forKey: .version)
        try container.encode(name, forKey: .name)
        try container.encode(provider.issuer, forKey: .issuer)
        try container.encode(client.id, forKey: .clientID)
        try container.encode(scopes, forKey: .scopes)
        try container.encode(grant.kind.rawValue, forKey: .grant)
        try container.encode(provider.endpoints, forKey: .endpoints)
        try container.encodeIfPresent(provider.caFile, forKey: .caFile)
        if !provider.publicKeyPins.isEmpty { try container.encode(provider.publicKeyPins, forKey: .publicKeyPins) }
        switch client.credential {
        case .none: break
        case .heldByApp: try container.encode(true, forKey: .authenticationHeldByApp)
        case .secretFile(let file, let sending):
            try container.encode(file, forKey: .clientSecretFile)
            try container.encode(sending.rawValue, forKey: .clientAuth)
        case .secretVariable(let variable, let sending):
            try container.encode(variable, forKey: .clientSecretEnv)
            try container.encode(sending.rawValue, forKey: .clientAuth)
        case .privateKey(let file, let keyID):
            try container.encode(file, forKey: .privateKeyFile)
            try container.encodeIfPresent(keyID, forKey: .privateKeyID)
        }
        switch grant {
        case .authorizationCode(let port): try container.encodeIfPresent(port, forKey: .loopbackPort)
        case .deviceCode, .clientCredentials: break
        case .workload(let workload):
            try container.encodeIfPresent(workload.source, forKey: .workload)
            try container.encodeIfPresent(workload.identityAudience, forKey: .workloadAudience)
            try container.encode(workload.grant.rawValue, forKey: .workloadGrant)
            try container.encodeIfPresent(workload.subjectTokenType, forKey: .subjectTokenType)
        }
        try container.encodeIfPresent(audience, forKey: .audience)
        try container.encodeIfPresent(resource, forKey: .resource)
        try container.encodeIfPresent(dpop, forKey: .dpop)
    }
}
