#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// State behind a pthread mutex, for what plain threads share with Swift tasks (the loopback
/// listener's accept loop and connection queues, the coordinator's waiters). `Mutex` would do the
/// same job, but on Linux its futex is invisible to ThreadSanitizer, which then reports every access
/// from two threads as a race; a pthread mutex is what TSan intercepts, so its runs stay meaningful.
// unchecked: every access to `state` goes through `withLock`, under the pthread mutex.
package final class ThreadLocked<State>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var state: State

    package init(_ state: State) {
        self.state = state
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` on the state while holding the lock (never call out to unknown code from `body`).
    package func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }
}
