import Foundation
import MooseOAuth
import MooseTestSupport
import Testing

/// A refresh interrupted between sending and committing (issue "A refresh survives its caller", §2):
/// the coordinator records the rotation in flight before it sends the refresh token, so the next
/// refresher — after the provider has rotated the token and, seeing the old one again, refuses it —
/// says plainly what happened instead of a bare "needs a new login". At the real provider
/// (django-oauth-toolkit, rotation with reuse detection and no grace period).
struct InterruptedRefreshTests {
    struct Killed: Error {}

    @Test func theNextRefresherNamesARotationThatNeverCommitted() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        let client = fixture.client
        // The "process" sends the refresh, the provider rotates the token, and the answer dies with it.
        let dying = RefreshCoordinator(key: "default", storage: fixture.sessions) { old in
            _ = try await client.refresh(old)
            throw Killed()
        }
        await #expect(throws: Killed.self) { _ = try await dying.accessToken() }
        #expect(fixture.spy.tokenCalls == 1)
        let record = try #require(
            try fixture.sessions.loadNow("default")?.session.attributes[RefreshCoordinator.rotationAttribute])
        #expect(
            !record.contains(fixture.original.refreshToken ?? "-"), "the record holds a fingerprint, never the token")

        var refused: OAuthError?
        do { _ = try await fixture.coordinator().accessToken() } catch { refused = error as? OAuthError }
        #expect(refused?.code == OAuthError.invalidGrant, "\(String(describing: refused))")
        #expect(
            refused?.message.contains("interrupted after the provider rotated the token") == true,
            "\(String(describing: refused))")
        let stored = try #require(try fixture.sessions.loadNow("default")?.session)
        #expect(
            stored.state == .needsReauthentication && stored.attributes[RefreshCoordinator.rotationAttribute] == nil)
    }

    /// A refresh that commits leaves no record; a refusal whose answer came back clears it, and the
    /// next refusal is an ordinary one.
    @Test func aCommittedRefreshLeavesNoRecord() async throws {
        let fixture = try await CoordinatorFixture()
        defer { fixture.cleanUp() }
        _ = try await fixture.coordinator().accessToken()
        let stored = try #require(try fixture.sessions.loadNow("default")?.session)
        #expect(
            stored.attributes[RefreshCoordinator.rotationAttribute] == nil
                && stored.tokens.refreshToken != fixture.original.refreshToken)
    }
}
