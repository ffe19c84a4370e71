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

/// One step of a coordinator's single flight (`RefreshCoordinator.activity`): how a caller that
/// found no valid cached token got one. Finer than `RefreshEvent`, for metrics.
public enum CoordinatorActivity: Sendable, Hashable {
    /// The caller waited for a refresh this process was already running (one grant for many callers).
    case joined
    /// The storage held a token that answers (another process or machine refreshed it, or an earlier
    /// run stored it): used without a grant.
    case read
    /// This process made the grant at the provider, holding the refresh lease.
    case granted
}
