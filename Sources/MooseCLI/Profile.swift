import MooseOAuth
import MooseHTTP
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A named CLI configuration: which provider, which client, which scopes, which grant. Kept in its
/// session's `attributes` (one row: tokens and profile land together), under
/// `OAuthSession.legacyProfileAttribute` — where Moose 0.1's embedded profile is carried over too.
struct Profile: Sendable, Codable, Hashable {
    /// The grant used to log in.
    enum Grant: String, Sendable, Codable {
        case authorizationCode = "authorization_code"
        case deviceCode = "device_code"
        case clientCredentials = "client_credentials"
        /// A workload's own identity token exchanged for tokens (`--workload`): renewed by exchanging again.
        case workload
    }

    /// The profile's name (`default`): the session's storage key.
    var name: String
    var issuer: String
    var clientID: String
    var scopes: [String]
    var grant: Grant
    /// A file holding the client secret (confidential clients); the secret itself is never stored here.
    var clientSecretFile: String?
    /// Endpoints configured by hand.
    var endpoints: EndpointOverrides
    /// The DPoP algorithm logins bind their tokens with (`ES256`, `EdDSA`, `RS256`), or nil for bearer tokens.
    var dpop: String? = nil
    /// The RFC 8707 resource (an MCP server, an API) the tokens are for, named on login and every refresh.
    var resource: String? = nil
    /// An environment variable holding the client secret (a service's login: nothing on disk).
    var clientSecretEnv: String? = nil
    /// How the client authenticates with its secret: `basic` (client_secret_basic, the default) or `post`.
    var clientAuth: String? = nil
    /// A private key file (PEM or JWK) for `private_key_jwt` (RFC 7523 §2.2), and the `kid` to name.
    var privateKeyFile: String? = nil
    var privateKeyID: String? = nil
    /// The `audience` a client-credentials grant names (providers such as Auth0 need it).
    var audience: String? = nil
    /// A PEM file of the CAs to trust for the provider (`--ca-file`: a provider behind a private CA),
    /// instead of the system's; `nil`: `$SSL_CERT_FILE`, else the system's.
    var caFile: String? = nil
    /// The provider's public-key pins (`--pin-public-key`, `public_key_pins`): `sha256//BASE64` digests
    /// of the server keys the issuer's host may present, checked with the certificate's verification;
    /// `nil`: nothing pinned.
    var publicKeyPins: [String]? = nil
    /// A workload login's identity source (`github`, `gitlab[:VAR]`, `env:VAR`, `file:PATH`,
    /// `command:CMD`), the audience asked of it, the grant (`token-exchange`, `jwt-bearer`) and the
    /// subject token type sent with an exchange.
    var workload: String? = nil
    var workloadAudience: String? = nil
    var workloadGrant: String? = nil
    var subjectTokenType: String? = nil

    init(name: String, issuer: String, clientID: String, scopes: [String], grant: Grant = .authorizationCode,
         clientSecretFile: String? = nil, endpoints: EndpointOverrides = EndpointOverrides()) {
        self.name = name
        self.issuer = issuer
        self.clientID = clientID
        self.scopes = scopes
        self.grant = grant
        self.clientSecretFile = clientSecretFile
        self.endpoints = endpoints
    }

    static let attribute = OAuthSession.legacyProfileAttribute

    /// The profile kept in `session` (or, without one, the least a session implies).
    static func of(_ session: OAuthSession, key: String) -> Profile {
        if let text = session.attributes[attribute], var profile = try? JSONDecoder().decode(Profile.self, from: Data(text.utf8)) {
            profile.name = key
            return profile
        }
        var profile = Profile(name: key, issuer: session.issuer, clientID: session.clientID, scopes: session.tokens.scopes)
        profile.resource = session.resource
        return profile
    }

    /// `attributes` with this profile written in.
    func stored(in attributes: [String: String] = [:]) -> [String: String] {
        var attributes = attributes
        if let data = try? JSONEncoder().encode(self) { attributes[Self.attribute] = String(decoding: data, as: UTF8.self) }
        return attributes
    }
}

extension CLITransport {
    /// The transport for `profile`'s provider when the profile has a CA file or pins (nil otherwise:
    /// the default transport serves): libcurl trusting the CA file (else `$SSL_CERT_FILE`), with the
    /// pins for the issuer's host. Hosts other than the issuer's (a token endpoint elsewhere) are not pinned.
    static func make(for profile: Profile) throws -> CurlTransport? {
        guard profile.caFile != nil || profile.publicKeyPins != nil else { return nil }
        var transport = make(caFile: profile.caFile)
        if let pins = profile.publicKeyPins, let host = URL(string: profile.issuer)?.host {
            do {
                transport.pins = try PublicKeyPins([host: pins])
            } catch {
                throw CLIError.usage("the public-key pins of profile \(profile.name) are not usable: \(error.message)")
            }
        }
        return transport
    }

    /// `pins` (`--pin-public-key`, or a profile's `public_key_pins`) checked for `issuer`'s host and
    /// written canonically (`sha256//BASE64`); nil when none are given.
    static func pins(_ pins: [String]?, issuer: String) throws -> [String]? {
        guard let pins, !pins.isEmpty else { return nil }
        guard let host = URL(string: issuer)?.host else { throw CLIError.usage("--pin-public-key needs an issuer URL with a host") }
        do {
            return try PublicKeyPins([host: pins]).pins(for: host)
        } catch {
            throw CLIError.usage("--pin-public-key: \(error.message) (a pin is sha256// and the base64 SHA-256 of the server's "
                                 + "SubjectPublicKeyInfo: openssl x509 -in server.pem -pubkey -noout | openssl pkey -pubin -outform DER "
                                 + "| openssl dgst -sha256 -binary | base64)")
        }
    }
}

extension LoginCommand {
    /// `--pin-public-key` pins the issuer's host, so a login that discovers its issuer from `--resource`
    /// alone refuses it rather than log in unpinned.
    func validate() throws {
        if !pinPublicKey.isEmpty, resource != nil, issuer == nil {
            throw ValidationError("--pin-public-key pins the issuer's host: give --issuer with it (a login by --resource alone is not pinned)")
        }
    }
}
