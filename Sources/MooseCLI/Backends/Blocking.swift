import Dispatch
import Synchronization

/// Runs async work from the synchronous CLI and waits for it. (`moose` keeps a synchronous `main`
/// so that commands without network never start the concurrency runtime's threads.)
public enum CLIBlocking {
    final class Box<T: Sendable>: Sendable {
        let result = Mutex<Result<T, any Error>?>(nil)
        /// The work, until the task takes it.
        let work: Mutex<(@Sendable () async throws -> T)?>

        init(_ work: @escaping @Sendable () async throws -> T) { self.work = Mutex(work) }
    }

    /// Runs `body` in a detached task and blocks this thread until it has finished; its result or error.
    ///
    /// `body` (and whatever it captured: a store, a manager) is released in the task before this thread
    /// goes on, so what the command releases afterwards is released for good before the process exits
    /// (an SQLite store closes, and removes its write-ahead log, when its last reference goes).
    public static func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let box = Box<T>(body)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let result = await Self.result(of: box.work.withLock { $0.take() })
            box.result.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        guard let result = box.result.withLock({ $0 }) else { throw CLIError.failed("internal error: no result") }
        return try result.get()
    }

    /// What `body` returned or threw; `body` is released when this returns.
    private static func result<T: Sendable>(of body: (@Sendable () async throws -> T)?) async -> Result<T, any Error> {
        guard let body else { return .failure(CLIError.failed("internal error: no work")) }
        do { return .success(try await body()) } catch { return .failure(error) }
    }
}
