// Whether a stored session may be renewed, as its plan says (`SessionPlan`): here, beside the plan,
// since the storage layer knows rows, not how they were obtained.
extension OAuthSession {
    /// Whether the session is renewed by a grant that needs no person — a client-credentials or a
    /// workload session: no refresh token, and its plan's grant is one of those
    /// (`SessionPlan.of(_:key:)`; never a row a logout kept, `isLoggedOut`). The provider refusing
    /// such a renewal (a stale workload token, a rotated secret) fails that attempt
    /// (`OAuthError.renewalRefused`, `invalidClient`); it never ends the session.
    public var renewsWithoutAPerson: Bool {
        tokens.refreshToken == nil && !isLoggedOut && SessionPlan.of(self, key: "").grant.kind.renewsWithoutAPerson
    }

    /// Whether a renewal may be attempted: an active session, or one that renews without a person
    /// (even when an earlier version marked it `needsReauthentication` after one refused attempt).
    public var canRenew: Bool { state == .active || renewsWithoutAPerson }
}
