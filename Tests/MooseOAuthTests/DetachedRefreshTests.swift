import Foundation
import MooseOAuth
import MooseOAuthSystem
import Testing

/// The library's `DetachedRefresh` (issue "One session, whatever made it": a refresh survives its
/// caller for any program, not only `moose`): real child processes through `/bin/sh`. `moose`'s own
/// use — a caller killed mid-refresh loses nothing — is `RefreshSurvivesItsCallerTests`.
struct DetachedRefreshTests {
    @Test func anOutcomeCarriesTheErrorAcrossTheProcessBoundary() throws {
        let error = OAuthError(
            OAuthError.invalidGrant, "the refresh token was refused", oauthError: "invalid_grant",
            errorDescription: "token revoked", status: 400)
        let line = try JSONEncoder().encode(DetachedRefresh.Outcome(error, cause: "store.sqlite is read-only"))
        let outcome = try JSONDecoder().decode(DetachedRefresh.Outcome.self, from: line)
        let back = try #require(outcome.error)
        #expect(!outcome.ok && back.code == OAuthError.invalidGrant && back.message == error.message)
        #expect(back.oauthError == "invalid_grant" && back.errorDescription == "token revoked" && back.status == 400)
        #expect((back.underlying as? DetachedRefresh.Cause)?.text == "store.sqlite is read-only")
        #expect(
            DetachedRefresh.Outcome(failure: "usage", exit: 2).error == nil, "not an OAuthError: the caller maps it")
        #expect(DetachedRefresh.Outcome.success.error == nil)
        // What the caller throws: the OAuthError, else a Failure with the exit status (defaults for a line
        // that says neither), nothing for success.
        #expect((outcome.failure as? OAuthError)?.code == OAuthError.invalidGrant)
        #expect(
            DetachedRefresh.Outcome(failure: "usage", exit: 2).failure as? DetachedRefresh.Failure
                == DetachedRefresh.Failure(message: "usage", exit: 2))
        let bare = try JSONDecoder().decode(DetachedRefresh.Outcome.self, from: Data(#"{"ok":false}"#.utf8))
        #expect(
            bare.failure as? DetachedRefresh.Failure == DetachedRefresh.Failure(message: "the refresh failed", exit: 1))
        #expect(DetachedRefresh.Outcome.success.failure == nil)
    }

    @Test func theChildGetsTheRequestAndAnswersOneLine() throws {
        // The child echoes the mode it was sent, and runs in a session of its own (its pid is its sid).
        let script = #"""
            request=$(cat); set -- $(cut -d' ' -f1,6 /proc/$$/stat)
            case "$request" in *refresh-now*) mode=refresh-now;; *) mode=other;; esac
            printf '{"ok":false,"message":"%s %s %s","exit":7}\n' "$mode" "$1" "$2"
            """#
        let answer = DetachedRefresh.run(.init(mode: .refreshNow), arguments: ["/bin/sh", "-c", script])
        guard case .answered(let outcome) = answer else {
            Issue.record("no answer: \(answer)")
            return
        }
        let words = (outcome.message ?? "").split(separator: " ").map(String.init)
        #expect(outcome.exit == 7 && words.count == 3 && words.first == "refresh-now", "\(outcome)")
        #expect(words.count == 3 && words[1] == words[2], "the child is not the leader of its own session: \(words)")
    }

    @Test func aChildWithoutAnAnswerOrAProgramThatIsNotThereIsSaid() {
        guard
            case .noAnswer(let status) = DetachedRefresh.run(
                .init(mode: .accessToken), arguments: ["/bin/sh", "-c", "cat >/dev/null; exit 3"])
        else {
            Issue.record("an answer from a child that gave none")
            return
        }
        #expect(status >> 8 == 3)
        guard case .notStarted = DetachedRefresh.run(.init(mode: .accessToken), arguments: ["/nonexistent/moose"])
        else {
            Issue.record("a program that does not exist was started")
            return
        }
    }
}
