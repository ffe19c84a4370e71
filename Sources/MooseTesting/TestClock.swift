#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization

/// A wall clock tests move by hand, for everything in Moose that takes a `clock` (the coordinator's
/// configuration, `ClaimValidation`, `IDTokenValidator`, `InMemorySessionStorage`) — and a `sleep`
/// (the coordinator's backoff, write retries and lease renewals): a sleeper stays suspended until
/// `advance(by:)` or `set(_:)` moves the clock to its deadline, so a test decides when each wait ends.
///
/// ```swift
/// let clock = TestClock(now: Date(timeIntervalSince1970: 1_800_000_000))
/// var configuration = RefreshCoordinator.Configuration()
/// configuration.clock = clock.read
/// configuration.sleep = clock.sleep(for:)
/// clock.advance(by: 3600)   // every token is now an hour older, every wait of up to an hour is over
/// ```
public final class TestClock: Sendable {
    private struct Sleeper {
        let id: UInt64
        let deadline: Date
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Date
        var sleepers: [Sleeper] = []
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>

    /// A clock reading `now`.
    public init(now: Date = Date(timeIntervalSince1970: 1_800_000_000)) { state = Mutex(State(now: now)) }

    /// The current reading.
    public var now: Date { state.withLock { $0.now } }

    /// A closure reading this clock, for `clock:` parameters.
    public var read: @Sendable () -> Date { { [self] in self.now } }

    /// Moves the clock forward (or back, with a negative interval), and wakes every sleeper whose
    /// deadline it reached — in deadline order, after the clock has moved.
    public func advance(by seconds: TimeInterval) { move { $0.addingTimeInterval(seconds) } }

    /// Sets the clock, and wakes every sleeper whose deadline it reached.
    public func set(_ date: Date) { move { _ in date } }

    /// Suspends until the clock reaches now + `seconds` (at once for zero or less): the test's
    /// `advance(by:)` or `set(_:)` ends the wait, never the passing of real time. Throws
    /// `CancellationError` at once when the calling task is (or gets) cancelled, as `Task.sleep` does.
    /// Pass it as a `sleep` closure: `configuration.sleep = clock.sleep(for:)`.
    public func sleep(for seconds: TimeInterval) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Under the lock: a cancellation handler that ran before this finds no sleeper, but
                // the task's cancelled flag is already set by then.
                let outcome: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    let deadline = state.now.addingTimeInterval(seconds.isNaN ? 0 : seconds)
                    if deadline <= state.now { return .success(()) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index).continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// How many sleepers are waiting for the clock to move: a test waits for the code under test to
    /// have gone to sleep before it advances the clock (and can check that nothing happened before).
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline a sleeper waits for, if any sleeps.
    public var nextDeadline: Date? { state.withLock { $0.sleepers.map(\.deadline).min() } }

    private func move(_ change: (Date) -> Date) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = change(state.now)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}
