#if MooseCombine
import Synchronization

/// A subscription's state behind a lock. The state holds a subscriber, which is not `Sendable`, so
/// `Mutex` cannot carry it out; this box rests on one rule, kept here and only here: every access
/// goes through `withLock`.
// unchecked: the state holds a non-Sendable subscriber (Mutex cannot hand it out); every access is under `lock`
final class LockedState<State>: @unchecked Sendable {
    private let lock = Mutex(())
    private var state: State

    init(_ state: State) { self.state = state }

    /// Runs `body` on the state while holding the lock (never call out to a subscriber from `body`).
    func withLock<R>(_ body: (inout State) -> R) -> R {
        lock.withLock { _ in body(&state) }
    }
}
#endif
