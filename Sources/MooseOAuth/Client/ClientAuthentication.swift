#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
public import MooseJWT

/// How the client proves its identity at the token endpoint (RFC 6749 §2.3, RFC 7523).
public enum ClientAuthentication: Sendable {
    /// A public client: `client_id` in the body, no secret (native apps, CLIs — with PKCE).
    case none
    /// `client_secret_basic`: HTTP Basic with the form-encoded id and secret (RFC 6749 §2.3.1).
    case clientSecretBasic(String)
    /// `client_secret_post`: id and secret in the body.
    case clientSecretPost(String)
    /// `private_key_jwt`: a signed assertion (RFC 7523 §2.2) made with this key and algorithm.
    case privateKeyJWT(JWTKey, JWTAlgorithm)

    /// Whether this is a public client (`.none`): no secret or key to give.
    var isNone: Bool { if case .none = self { true } else { false } }
}
