#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Rotated tokens a failed store write left in memory: written before any further refresh, retried
/// in the background, and on demand (`persistPendingWrite`) before a process exits.
extension RefreshCoordinator {
    /// Writes the tokens a failed write left in memory; `true` once nothing is pending. A
    /// compare-and-set on the generation they were refreshed from: a newer session in the storage
    /// wins, and a session wiped meanwhile (a logout) stays wiped.
    func flushPendingWrite() async -> Bool {
        let pending = pendingWrite
        if let pending, let expected = pending.expectedGeneration {
            do {
                try await storage.save(pending.session, key: key, expectedGeneration: expected, lease: nil)
            } catch let error as OAuthError where error.code == OAuthError.storageConflict {
                // Superseded (a newer session, or none): nothing of ours to write any more.
            } catch {
                return false
            }
        }
        // Tokens left pending by a refresh that ran while this write was on its way are not dropped.
        guard Self.same(pendingWrite?.session.tokens.accessToken, pending?.session.tokens.accessToken) else {
            return false
        }
        pendingWrite = nil
        writeRetry = nil // the retry task, which holds this coordinator, ends with nothing pending
        return true
    }

    /// `true` when rotated tokens are waiting in memory for the storage to take them.
    public var hasPendingWrite: Bool { pendingWrite != nil }

    /// Tries to write tokens a failed write left in memory, for up to `timeout` seconds; `true` once
    /// nothing is pending. A process about to exit (a CLI) calls this: its background retry dies with it.
    ///
    /// - Parameter timeout: seconds to keep trying (clamped to 0…3600; default 5), on the configured clock.
    /// - Returns: `true` when nothing is pending any more (written, or superseded by a newer session
    ///   or a logout); `false` when the storage still refuses the write at the deadline.
    public func persistPendingWrite(timeout: TimeInterval = 5) async -> Bool {
        let deadline = now().addingTimeInterval(min(max(timeout, 0), 3600))
        var delay = 0.05
        while true {
            if await flushPendingWrite() { return true }
            guard now() < deadline else { return false }
            try? await sleeper(delay)
            delay = min(delay * 2, 1)
        }
    }

    /// Retries the pending write in the background (one retry task at a time), backing off from
    /// ¼ s to 30 s, until it is written or superseded. The task holds the coordinator: an app that
    /// lets go of it meanwhile does not drop the rotated refresh token with it (the coordinator is
    /// released once the write is done).
    func scheduleWriteRetry() {
        guard writeRetry == nil else { return }
        let sleep = sleeper
        writeRetry = Task { [self] in
            var delay = 0.25
            while !Task.isCancelled {
                try? await sleep(delay)
                if await flushPendingWrite() { return }
                delay = min(delay * 2, 30)
            }
        }
    }
}
