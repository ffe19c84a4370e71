#if MooseCombine
public import OpenCombineShim

/// A publisher of an async sequence of events that never fails (the coordinator's events): every
/// subscription calls the factory when it subscribes and iterates the stream it gets, alone, in a
/// task of its own — so each subscriber gets every element from the moment it subscribed, and
/// nothing from before. Cancelling the subscription ends its task and only its task. Values arriving
/// while the subscriber has no demand are dropped (events are news, not a queue); `sink` and
/// `assign` ask for everything.
///
/// The factory must make a new stream on each call (an `AsyncStream` hands each element to one
/// reader: one stream shared by two subscriptions would split the elements between them).
public struct AsyncStreamPublisher<Output: Sendable>: Publisher, Sendable {
    public typealias Failure = Never

    private let makeStream: @Sendable () -> AsyncStream<Output>

    /// A publisher whose every subscription iterates a stream of its own, made by `makeStream` at
    /// the moment it subscribes (for example `{ coordinator.events }`, which registers a new listener
    /// on each call).
    public init(_ makeStream: @escaping @Sendable () -> AsyncStream<Output>) { self.makeStream = makeStream }

    public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Never {
        subscriber.receive(
            subscription: StreamSubscription(subscriber: AnySubscriber(subscriber), stream: makeStream()))
    }
}

private final class StreamSubscription<Output: Sendable>: Subscription, Sendable {
    typealias S = AnySubscriber<Output, Never>
    fileprivate struct State {
        var subscriber: S?
        var demand: Subscribers.Demand = .none
        var task: Task<Void, Never>?
        /// This subscription's own stream, until its task takes it (or a cancellation drops it,
        /// which unregisters the listener).
        var stream: AsyncStream<Output>?
    }

    private let state: LockedState<State>

    init(subscriber: S, stream: AsyncStream<Output>) {
        state = LockedState(State(subscriber: subscriber, stream: stream))
    }

    func request(_ demand: Subscribers.Demand) {
        let stream = state.withLock { state -> AsyncStream<Output>? in
            guard state.subscriber != nil else { return nil }
            state.demand += demand
            defer { state.stream = nil }
            return state.task == nil ? state.stream : nil
        }
        guard let stream else { return }
        let task = Task { [self] in
            for await value in stream {
                deliver(value)
                if Task.isCancelled { break }
            }
            finish()
        }
        let cancelled = state.withLock { state -> Bool in
            guard state.subscriber != nil else { return true }
            state.task = task
            return false
        }
        if cancelled { task.cancel() }
    }

    private func deliver(_ value: Output) {
        guard
            let subscriber = state.withLock({ state -> S? in
                guard state.demand > .none, let subscriber = state.subscriber else { return nil }
                state.demand -= 1
                return subscriber
            })
        else { return }
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
            defer { state.subscriber = nil; state.task = nil; state.stream = nil }
            return state.task
        }
        task?.cancel()
    }

    var combineIdentifier: CombineIdentifier { CombineIdentifier(self) }
}
#endif
