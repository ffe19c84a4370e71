#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP

/// What logging out did. Local secrets are always wiped (a kept plan holds none); revocation is best
/// effort and reported.
public struct LogoutResult: Sendable {
    /// Whether the refresh token was revoked at the server (nil: there was none, or no endpoint).
    public var refreshTokenRevoked: Bool?
    /// Whether the access token was revoked at the server (nil: no endpoint).
    public var accessTokenRevoked: Bool?
    /// The RP-initiated logout URL to open in a browser, when the provider has an `end_session_endpoint`.
    public var endSessionURL: URL?
    /// Why a revocation failed, if one did.
    public var revocationError: OAuthError?
    /// Whether there was a stored session to log out of (`SessionEngine.logout`).
    public var hadSession = false
    /// Why the local session could not be wiped, if it could not (`SessionEngine.logout`): the
    /// storage refused the delete; the secrets are still there.
    public var wipeError: OAuthError?

    /// Whether the session's plan was kept under its key (a logout asked to keep it, `keepingPlan:`):
    /// a row with the plan and no tokens, so the next login of the key, in any process sharing the
    /// storage, logs in the same way again.
    public var planKept = false

    /// An empty result (nothing revoked yet).
    public init() {}
}
