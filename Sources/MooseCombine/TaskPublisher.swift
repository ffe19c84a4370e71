#if MooseCombine
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import OpenCombineShim

/// A publisher over one async call: each subscription runs `operation` in its own `Task` when it
/// first gets demand, and delivers its value then finishes, or fails with its error. Cancelling the
/// subscription cancels that task only — so a subscriber that leaves while a shared refresh runs
/// leaves alone, and the refresh goes on for the others (`RefreshCoordinator` waiters are
/// cancellable one by one).
///
/// MooseCombine's publishers are all this one type over Moose's async API: never a second
/// implementation of it.
///
/// ```swift
/// TaskPublisher { try await coordinator.accessToken() }
///     .sink(receiveCompletion: { _ in }, receiveValue: { token in … })
/// ```
public struct TaskPublisher<Output: Sendable>: Publisher, Sendable {
    public typealias Failure = any Error

    private let operation: @Sendable () async throws -> Output

    /// A publisher running `operation` once per subscription.
    public init(_ operation: @escaping @Sendable () async throws -> Output) {
        self.operation = operation
    }

    public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == any Error {
        subscriber.receive(subscription: TaskSubscription(subscriber: AnySubscriber(subscriber), operation: operation))
    }
}

/// One subscription: starts the task on the first demand, forwards its outcome once.
private final class TaskSubscription<Output: Sendable>: Subscription, Sendable {
    typealias S = AnySubscriber<Output, any Error>
    // The subscriber and the task, behind one lock (subscribers are not Sendable; every access is locked).
    fileprivate struct State {
        var subscriber: S?
        var task: Task<Void, Never>?
        var started = false
    }

    private let state: LockedState<State>
    private let operation: @Sendable () async throws -> Output

    init(subscriber: S, operation: @escaping @Sendable () async throws -> Output) {
        state = LockedState(State(subscriber: subscriber))
        self.operation = operation
    }

    func request(_ demand: Subscribers.Demand) {
        guard demand > .none else { return }
        let start = state.withLock { state -> Bool in
            guard !state.started, state.subscriber != nil else { return false }
            state.started = true
            return true
        }
        guard start else { return }
        let operation = self.operation
        let task = Task { [self] in
            let result: Result<Output, any Error>
            do { result = .success(try await operation()) } catch { result = .failure(error) }
            finish(with: result)
        }
        state.withLock { $0.task = task }
    }

    private func finish(with result: Result<Output, any Error>) {
        guard
            let subscriber = state.withLock({ state -> S? in
                defer { state.subscriber = nil; state.task = nil }
                return state.subscriber
            })
        else { return } // cancelled meanwhile: nothing is delivered
        switch result {
        case .success(let value):
            _ = subscriber.receive(value)
            subscriber.receive(completion: .finished)
        case .failure(let error):
            subscriber.receive(completion: .failure(error))
        }
    }

    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            defer { state.subscriber = nil; state.task = nil }
            return state.task
        }
        task?.cancel()
    }

    var combineIdentifier: CombineIdentifier { CombineIdentifier(self) }
}
#endif
