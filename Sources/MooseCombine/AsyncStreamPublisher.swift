#if MooseCombine
public import OpenCombineShim

/// A publisher over an `AsyncStream` that never fails (the coordinator's events): each subscription
/// iterates the stream in its own task; cancelling the subscription ends the task. Values arriving
/// while the subscriber has no demand are dropped (events are news, not a queue); `sink` and
/// `assign` ask for everything.
public struct AsyncStreamPublisher<Output: Sendable>: Publisher, Sendable {
    public typealias Failure = Never

    private let stream: AsyncStream<Output>

    /// A publisher over `stream` (iterate it from one subscription only: an `AsyncStream` has one consumer).
    public init(_ stream: AsyncStream<Output>) { self.stream = stream }

    public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Never {
        subscriber.receive(subscription: StreamSubscription(subscriber: AnySubscriber(subscriber), stream: stream))
    }
}

private final class StreamSubscription<Output: Sendable>: Subscription, @unchecked Sendable {
    typealias S = AnySubscriber<Output, Never>
    fileprivate struct State {
        var subscriber: S?
        var demand: Subscribers.Demand = .none
        var task: Task<Void, Never>?
    }

    private let state: LockedState<State>
    private let stream: AsyncStream<Output>

    init(subscriber: S, stream: AsyncStream<Output>) {
        state = LockedState(State(subscriber: subscriber))
        self.stream = stream
    }

    func request(_ demand: Subscribers.Demand) {
        let start = state.withLock { state -> Bool in
            guard state.subscriber != nil else { return false }
            state.demand += demand
            return state.task == nil
        }
        guard start else { return }
        let stream = self.stream
        let task = Task { [self] in
            for await value in stream {
                deliver(value)
                if Task.isCancelled { break }
            }
            finish()
        }
        state.withLock { $0.task = task }
    }

    private func deliver(_ value: Output) {
        guard let subscriber = state.withLock({ state -> S? in
            guard state.demand > .none, let subscriber = state.subscriber else { return nil }
            state.demand -= 1
            return subscriber
        }) else { return }
        let more = subscriber.receive(value)
        state.withLock { $0.demand += more }
    }

    private func finish() {
        let subscriber = state.withLock { state -> S? in
            defer { state.subscriber = nil }
            return state.subscriber
        }
        subscriber?.receive(completion: .finished)
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
