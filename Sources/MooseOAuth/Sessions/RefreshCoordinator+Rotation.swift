#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseCrypto
import MooseHTTP

/// A rotation in flight, recorded in the session before the refresh token is sent: a process killed
/// between sending a refresh and committing its answer (an OOM kill, a cancelled job) leaves the
/// record behind, so the next refresher knows the provider may already have rotated that refresh
/// token — and says so plainly if the provider now refuses it, instead of a bare "needs a new login".
/// A provider with a reuse grace period (Amazon Cognito's `RetryGracePeriodSeconds`, Connect2id's
/// `rotatedReuseGracePeriod`, django-oauth-toolkit's `REFRESH_TOKEN_GRACE_PERIOD_SECONDS`) accepts the
/// old refresh token again within its window, and the retry simply succeeds.
///
/// The record is a fingerprint of the refresh token (16 bytes of its SHA-256, never the token) and the
/// time it was sent, in the session's attributes, sealed with it; it is removed by the commit of the
/// answer, or when the provider answered without rotating (a refusal, an error known to precede
/// processing). Writing it is the refresh's first write: a storage that cannot be written fails
/// here, before the refresh token is spent.
extension RefreshCoordinator {
    /// The session attribute holding the record of a refresh sent and not yet committed:
    /// `<fingerprint> <seconds since 1970>` (a storage of an app's own stores it like any attribute).
    public static let rotationAttribute = "moose.rotation-in-flight"

    /// 16 bytes of SHA-256 of `refreshToken`, in hex.
    static func rotationFingerprint(_ refreshToken: String) -> String {
        DigestAlgorithm.sha256.hash(Array(refreshToken.utf8)).prefix(16).map { byte in
            (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }.joined()
    }

    /// When the refresh of `session`'s current refresh token recorded in it was sent, if one was and
    /// never committed (the fingerprint compared byte for byte). A record with no readable time counts
    /// as sent long ago.
    static func interruptedRotation(of session: OAuthSession) -> Date? {
        guard let refreshToken = session.tokens.refreshToken, let record = session.attributes[rotationAttribute] else {
            return nil
        }
        let parts = record.split(separator: " ", maxSplits: 1)
        guard let recorded = parts.first, recorded.utf8.elementsEqual(rotationFingerprint(refreshToken).utf8) else {
            return nil
        }
        // Bounded before conversion: a year-3000 cap, nothing negative.
        guard parts.count == 2, parts[1].utf8.count <= 12, let seconds = Int64(parts[1]),
            (0...32_503_680_000).contains(seconds)
        else {
            return Date(timeIntervalSince1970: 0)
        }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// How long after another refresher sent a refresh token its answer may still be on its way to
    /// the store: a refresher whose own refresh of that token is refused waits this long for the
    /// other's commit before it gives the session up.
    static let inFlightHorizon: TimeInterval = 10

    /// The tokens that replaced `spent` in the store, waiting (until `horizon` after `otherSentAt`)
    /// for another refresher that sent the same refresh token and may still commit its answer. `nil`:
    /// no successor came.
    func successor(of spent: TokenSet, otherSentAt: Date?) async throws -> TokenSet? {
        let deadline = otherSentAt.map { $0.addingTimeInterval(Self.inFlightHorizon) } ?? .distantPast
        while true {
            if let again = try await loadSession(), again.session.state == .active,
                !Self.same(again.session.tokens.refreshToken, spent.refreshToken)
            {
                return again.session.tokens
            }
            guard now() < deadline else { return nil }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
    }

    /// Records the refresh about to be sent (only for a refresh token: other grants rotate nothing) and
    /// returns the session as written and its new generation. Fenced by the lease.
    func recordRotation(
        of session: OAuthSession, generation: Int64,
        lease: SessionLease
    ) async throws -> (OAuthSession, Int64) {
        guard let refreshToken = session.tokens.refreshToken else { return (session, generation) }
        var marked = session
        let sent = Int64(saturating: now().timeIntervalSince1970)
        marked.attributes[Self.rotationAttribute] = Self.rotationFingerprint(refreshToken) + " " + String(sent)
        do {
            let written = try await storage.save(marked, key: key, expectedGeneration: generation, lease: lease)
            return (marked, written)
        } catch let error as OAuthError
            where error.code == OAuthError.leaseLost || error.code == OAuthError.storageConflict
        {
            throw OAuthError(
                OAuthError.transient,
                "the refresh lease of \(key) was lost before the refresh was sent; nothing was spent",
                underlying: error)
        } catch {
            throw OAuthError(
                OAuthError.storeUnavailable, "the storage cannot be written; no refresh token was spent",
                underlying: error)
        }
    }

    /// Removes the record after a failure whose answer came back (the token was not rotated), best
    /// effort; a timed-out request may have been processed, so its record stays.
    func clearRotationRecord(of session: OAuthSession, generation: Int64, lease: SessionLease, after error: OAuthError)
        async
    {
        guard session.attributes[Self.rotationAttribute] != nil,
            (error.underlying as? HTTPRequestError)?.code != HTTPRequestError.timedOut
        else { return }
        var cleared = session
        cleared.attributes[Self.rotationAttribute] = nil
        _ = try? await storage.save(cleared, key: key, expectedGeneration: generation, lease: lease)
    }

    /// `invalid_grant` for a refresh token whose earlier refresh was interrupted after it was sent.
    static func refusedAfterInterruption(_ error: OAuthError, key: String) -> OAuthError {
        OAuthError(
            OAuthError.invalidGrant,
            "a refresh of \(key) was interrupted after the provider rotated the token (the process sending it was stopped "
                + "before it could store the answer), and the provider does not take the previous refresh token again: log in again",
            oauthError: error.oauthError, errorDescription: error.errorDescription, errorURI: error.errorURI,
            status: error.status, underlying: error)
    }
}
