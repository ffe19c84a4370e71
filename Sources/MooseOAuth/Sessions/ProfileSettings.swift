/// One profile's settings — everything a login can be told (all optional: flags, the settings an
/// earlier login kept and the defaults fill the rest; `SessionPlan.resolve(name:given:profile:kept:)`).
/// The same value carries what a command line gave, one layer above the file's.
///
/// A value, read from nowhere: the config file's parser (`ProfileFile`, in MooseOAuthSystem) makes
/// one per `[profiles.NAME]` table, and a command line makes the layer above it.
public struct ProfileSettings: Sendable, Equatable {
    /// `issuer`: the provider's issuer URL.
    public var issuer: String?
    /// `client_id`: the client's id there.
    public var clientID: String?
    /// `scopes`: what logins and renewals ask for.
    public var scopes: [String]?
    /// `resource`: the RFC 8707 resource the tokens are for.
    public var resource: String?
    /// `store`: the store (a file path or a `postgres://` URL).
    public var store: String?
    /// `dpop`: the DPoP algorithm (`ES256`, `EdDSA`, `RS256`).
    public var dpop: String?
    /// `client_secret_file`: a file holding the client secret.
    public var clientSecretFile: String?
    /// A PEM file of the CAs to trust for this profile's provider (a private CA).
    public var caFile: String?
    /// The provider's public-key pins (`public_key_pins = ["sha256//…", "sha256//…"]`), for the issuer's host.
    public var publicKeyPins: [String]?
    /// `grant`: `authorization_code` (a browser), `device_code`, `client_credentials` or `workload`.
    public var grant: SessionPlan.Grant.Kind?
    /// `client_secret_env`: an environment variable holding the client secret.
    public var clientSecretEnv: String?
    /// `client_auth`: how the secret is sent, `basic` or `post`.
    public var clientAuth: String?
    /// `private_key`: a private key file (PEM or JWK) for `private_key_jwt`.
    public var privateKeyFile: String?
    /// `key_id`: the `kid` the client assertion names.
    public var privateKeyID: String?
    /// `audience`: the audience a client-credentials or workload grant names.
    public var audience: String?
    /// `workload`: a workload's identity source (`github`, `gitlab`, `env:VAR`, `file:PATH`, `command:…`).
    public var workload: String?
    /// `workload_audience`: the audience asked of the workload's identity source.
    public var workloadAudience: String?
    /// `workload_grant`: `token-exchange` or `jwt-bearer`.
    public var workloadGrant: String?
    /// `subject_token_type`: the token type a token exchange names for the workload's token.
    public var subjectTokenType: String?
    /// `port`: the loopback redirect's port, for a provider that registered one exact redirect URI.
    public var loopbackPort: UInt16?
    /// `device_endpoint`: the device authorization endpoint, for a provider whose discovery lacks it.
    public var deviceEndpoint: String?

    /// Settings with those given set (none: nothing set; flags and stored sessions fill the rest).
    public init(
        issuer: String? = nil, clientID: String? = nil, scopes: [String]? = nil, resource: String? = nil,
        store: String? = nil, dpop: String? = nil, clientSecretFile: String? = nil, caFile: String? = nil,
        publicKeyPins: [String]? = nil
    ) {
        self.issuer = issuer
        self.clientID = clientID
        self.scopes = scopes
        self.resource = resource
        self.store = store
        self.dpop = dpop
        self.clientSecretFile = clientSecretFile
        self.caFile = caFile
        self.publicKeyPins = publicKeyPins
    }
}
