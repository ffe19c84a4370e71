#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization
import MooseHTTP

/// Keeps a lease alive while a refresh runs: renews it every third of its ttl (waiting with the
/// coordinator's `sleep`) until stopped. A
/// lease found lost stops the renewals (the fenced commit then fails safely); a storage that could
/// not be reached (a database restarting) is tried again at the next turn — the lease may still be ours.
actor LeaseRenewal {
    private var task: Task<Void, Never>?

    init(
        storage: any SessionStorage, lease: SessionLease, ttl: TimeInterval,
        sleep: @escaping @Sendable (TimeInterval) async throws -> Void
    ) {
        let interval = max(ttl / 3, 0.05)
        task = Task {
            var current = lease
            while !Task.isCancelled {
                try? await sleep(interval)
                if Task.isCancelled { return }
                do {
                    current = try await storage.renewLease(current, ttl: ttl)
                } catch let error as OAuthError where error.code == OAuthError.leaseLost {
                    return
                } catch {
                    continue
                }
            }
        }
    }

    func stop() {
        task?.cancel()
        task = nil
    }
}

/// One waiter's continuation, resumed exactly once (by the result or by cancellation).
final class ContinuationBox: Sendable {
    private let state = ThreadLocked<
        (continuation: CheckedContinuation<AccessToken, any Error>?, early: Result<AccessToken, any Error>?)
    >((nil, nil))

    func install(_ continuation: CheckedContinuation<AccessToken, any Error>) {
        let resumeNow: Result<AccessToken, any Error>? = state.withLock { state in
            if let early = state.early { return early }
            state.continuation = continuation
            return nil
        }
        if let resumeNow { continuation.resume(with: resumeNow) }
    }

    func resume(with result: Result<AccessToken, any Error>) {
        let continuation: CheckedContinuation<AccessToken, any Error>? = state.withLock { state in
            guard let current = state.continuation else {
                if state.early == nil { state.early = result }
                return nil
            }
            state.continuation = nil
            return current
        }
        continuation?.resume(with: result)
    }
}

/// The coordinator's event listeners: each `events` (or `activity`) stream gets every event.
final class EventListeners<Event: Sendable>: Sendable {
    private let listeners = Mutex<(next: Int, continuations: [Int: AsyncStream<Event>.Continuation])>((0, [:]))
    /// What each listener keeps when it reads slower than events come.
    private let buffering: AsyncStream<Event>.Continuation.BufferingPolicy

    /// `buffering`: the newest 32 for state a UI shows; unbounded where every event counts (metrics).
    init(buffering: AsyncStream<Event>.Continuation.BufferingPolicy = .bufferingNewest(32)) {
        self.buffering = buffering
    }

    func listen() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: buffering)
        let id = listeners.withLock { state in
            state.next += 1
            state.continuations[state.next] = continuation
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.listeners.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    func yield(_ event: Event) {
        for continuation in listeners.withLock({ Array($0.continuations.values) }) { continuation.yield(event) }
    }

    deinit { for continuation in listeners.withLock({ Array($0.continuations.values) }) { continuation.finish() } }
}
