import Dispatch
import Synchronization

/// Runs async work from the synchronous CLI and waits for it. (`moose` keeps a synchronous `main`
/// so that commands without network never start the concurrency runtime's threads.)
public enum CLIBlocking {
    final class Box<T: Sendable>: Sendable {
        let result = Mutex<Result<T, any Error>?>(nil)
    }

    /// Runs `body` in a detached task and blocks this thread until it has finished; its result or error.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let box = Box<T>()
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            box.result.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        guard let result = box.result.withLock({ $0 }) else { throw CLIError.failed("internal error: no result") }
        return try result.get()
    }
}
