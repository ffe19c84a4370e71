#if MoosePostgres
import Synchronization

/// Wakes lease waiters in this process when a NOTIFY says a lease was released. A waiter notes the
/// name's epoch *before* its attempt, then waits until the epoch moves or its timeout passes — so a
/// notification that arrives between a failed attempt and the wait is never missed. Timeouts are
/// the polling fallback for notifications that never come (a pooler, a reconnect, a lapse).
final class LeaseSignals: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var epochs: [String: UInt64] = [:]
        var waiters: [String: [Waiter]] = [:]
        var nextID: UInt64 = 0
        /// Bumped by `signalAll` (a reconnected listener may have missed notifications).
        var globalEpoch: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The current epoch of `name` (combined with the global one).
    func epoch(_ name: String) -> UInt64 {
        state.withLock { ($0.epochs[name] ?? 0) &+ $0.globalEpoch }
    }

    /// A release of `name` was announced: wake its waiters.
    func signal(_ name: String) {
        let woken: [Waiter] = state.withLock { state in
            state.epochs[name, default: 0] &+= 1
            return state.waiters.removeValue(forKey: name) ?? []
        }
        for waiter in woken { waiter.continuation.resume() }
    }

    /// Wake everyone (after the listener reconnected: notifications may have been missed).
    func signalAll() {
        let woken: [Waiter] = state.withLock { state in
            state.globalEpoch &+= 1
            let all = state.waiters.values.flatMap { $0 }
            state.waiters.removeAll()
            return all
        }
        for waiter in woken { waiter.continuation.resume() }
    }

    /// Returns when `name`'s epoch differs from `seen`, after `timeout` seconds, or on cancellation.
    func wait(_ name: String, since seen: UInt64, timeout: Double) async {
        guard timeout > 0, !Task.isCancelled else { return }
        let id: UInt64 = state.withLock { state in
            state.nextID &+= 1
            return state.nextID
        }
        let nanoseconds = UInt64(min(max(timeout, 0), 3600) * 1_000_000_000)
        let timer = Task { [weak self] in
            try? await Task.sleep(nanoseconds: nanoseconds)
            self?.remove(name, id: id)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow: Bool = state.withLock { state in
                    if ((state.epochs[name] ?? 0) &+ state.globalEpoch) != seen || Task.isCancelled { return true }
                    state.waiters[name, default: []].append(Waiter(id: id, continuation: continuation))
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            self.remove(name, id: id)
        }
        timer.cancel()
    }

    /// Removes and resumes one waiter, if it is still waiting (whoever removes it resumes it: once).
    private func remove(_ name: String, id: UInt64) {
        let waiter: Waiter? = state.withLock { state in
            guard var list = state.waiters[name], let index = list.firstIndex(where: { $0.id == id }) else {
                return nil
            }
            let waiter = list.remove(at: index)
            state.waiters[name] = list.isEmpty ? nil : list
            return waiter
        }
        waiter?.continuation.resume()
    }
}
#endif
