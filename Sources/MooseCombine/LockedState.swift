#if MooseCombine
import Synchronization

/// A subscription's state behind a lock. The state holds a subscriber, which is not `Sendable`, so
/// `Mutex` cannot carry it; this box is `@unchecked Sendable` on one rule, kept here and only here:
/// every access goes through `withLock`.
final class LockedState<State>: @unchecked Sendable {
    private let lock = Mutex(())
    nonisolated(unsafe) private var state: State

    init(_ state: State) { self.state = state }

    /// Runs `body` on the state while holding the lock (never call out to a subscriber from `body`).
    func withLock<R>(_ body: (inout State) -> R) -> R {
        lock.withLock { _ in body(&state) }
    }
}
#endif
