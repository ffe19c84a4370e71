#if MoosePostgres
import Synchronization

/// Thrown by `Deadline.run` when the work did not finish in time.
struct DeadlineExceeded: Error {}

/// Runs work with a deadline that holds even when the work cannot be cancelled (a query already
/// sent on a connection whose peer went silent): the caller gets `DeadlineExceeded` on time, and
/// the work finishes (or fails) in the background, its result dropped.
enum Deadline {
    final class Once<T: Sendable>: Sendable {
        private let state = Mutex<(continuation: CheckedContinuation<T, any Error>?, early: Result<T, any Error>?)>(
            (nil, nil))

        func install(_ continuation: CheckedContinuation<T, any Error>) {
            let early: Result<T, any Error>? = state.withLock { state in
                if let early = state.early { return early }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(with: early) }
        }

        func resume(with result: Result<T, any Error>) {
            let continuation: CheckedContinuation<T, any Error>? = state.withLock { state in
                if let continuation = state.continuation {
                    state.continuation = nil
                    state.early = result // marks it resumed
                    return continuation
                }
                if state.early == nil { state.early = result }
                return nil
            }
            continuation?.resume(with: result)
        }
    }

    static func run<T: Sendable>(within duration: Duration, _ body: @escaping @Sendable () async throws -> T)
        async throws -> T
    {
        let once = Once<T>()
        let work = Task {
            do { once.resume(with: .success(try await body())) } catch { once.resume(with: .failure(error)) }
        }
        let timer = Task {
            do {
                try await Task.sleep(for: duration)
                once.resume(with: .failure(DeadlineExceeded()))
                work.cancel()
            } catch {}
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                once.install(continuation)
            }
        } onCancel: {
            once.resume(with: .failure(CancellationError()))
            work.cancel()
        }
    }
}
#endif
