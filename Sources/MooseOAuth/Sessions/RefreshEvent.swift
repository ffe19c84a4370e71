#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// What a coordinator tells the app (for a UI that shows "signed in" / "please sign in again").
public enum RefreshEvent: Sendable {
    /// A refresh succeeded (or tokens refreshed by another process were adopted).
    case refreshed(generation: Int64, expiresAt: Date?)
    /// A refresh failed; tokens are kept (transient) unless the next event says otherwise.
    case refreshFailed(OAuthError)
    /// The refresh token was refused: only a new login helps. Persisted; never retried.
    case needsReauthentication
    /// The session was logged out.
    case loggedOut
}
