import Foundation
import MooseHTTP
import Testing

/// `APIClient`'s timeout comes from one watch thread (`DeadlineWatch`) that cancels the exchange's
/// child task at its deadline. These drive it with a transport that answers after a set time or
/// never (until cancelled); the real servers' timeouts are in `ClientTests` and the adapters' tests.
struct DeadlineWatchTests {
    /// Answers after `seconds`, or — `nil` — only ends when cancelled.
    struct Slow: HTTPTransport {
        let seconds: Double?
        func send(_ request: APIRequest) async throws -> APIResponse {
            try await Task.sleep(nanoseconds: UInt64((seconds ?? 3600) * 1e9))
            return APIResponse(status: 200, body: Data("late".utf8))
        }
    }

    /// Never answers; notes when (seconds after `started`) its task was cancelled, and for which
    /// timeout. The note is made by the cancellation handler, on the canceller's thread — the watch
    /// thread's own time, whatever the cooperative pool is busy with.
    final class Cancellations: @unchecked Sendable {
        let started = Date()
        private let lock = NSLock()
        private var entries: [(timeout: Double, at: Double)] = []
        private var calls: [Double: Double] = [:]
        func note(_ timeout: Double) { lock.withLock { entries.append((timeout, Date().timeIntervalSince(started))) } }
        /// The exchange with `timeout` is being sent now.
        func called(_ timeout: Double) { lock.withLock { calls[timeout] = Date().timeIntervalSince(started) } }
        func calledAt(_ timeout: Double) -> Double { lock.withLock { calls[timeout] ?? 0 } }
        var all: [(timeout: Double, at: Double)] { lock.withLock { entries } }
    }

    struct Recording: HTTPTransport {
        let cancellations: Cancellations
        func send(_ request: APIRequest) async throws -> APIResponse {
            try await withTaskCancellationHandler {
                try await Task.sleep(nanoseconds: 3_600_000_000_000)
                return APIResponse(status: 200)
            } onCancel: {
                cancellations.note(request.timeout)
            }
        }
    }

    static let context = HTTPMiddlewareContext(isRetryable: false, requiresAuthentication: false)

    static func request(timeout: Double) -> APIRequest {
        APIRequest(url: URL(string: "http://127.0.0.1:9/")!, timeout: timeout)
    }

    /// Deadlines registered out of order (a later request with a shorter timeout) fire in deadline
    /// order, each exchange ending as `timedOut`, none waiting for the others' deadlines.
    @Test func eachExchangeEndsAtItsOwnDeadline() async throws {
        let cancellations = Cancellations()
        let client = APIClient(transport: Recording(cancellations: cancellations), retryPolicy: .none)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for timeout in [1.2, 0.3, 0.7] {
                group.addTask {
                    cancellations.called(timeout)
                    do {
                        _ = try await client.send(Self.request(timeout: timeout), context: Self.context)
                        Issue.record("the \(timeout) s exchange answered")
                    } catch let error as HTTPRequestError {
                        #expect(error.code == HTTPRequestError.timedOut, "\(error)")
                    }
                }
                try await Task.sleep(nanoseconds: 20_000_000)
            }
            try await group.waitForAll()
        }
        let fired = cancellations.all
        #expect(fired.map(\.timeout) == [0.3, 0.7, 1.2], "fired in the order \(fired)")
        for entry in fired {
            let after = entry.at - cancellations.calledAt(entry.timeout)
            #expect(after >= entry.timeout, "the \(entry.timeout) s exchange was cancelled \(after) s after it was sent")
        }
        // The watch woke for the 0.3 s deadline registered after the 1.2 s one (without that wake-up
        // it would fire with the 1.2 s one, at least 0.9 s late). Timed from the call, on the watch
        // thread: a busy cooperative pool delays neither.
        if let first = fired.first {
            let late = first.at - cancellations.calledAt(first.timeout) - first.timeout
            #expect(late < 0.6, "the first deadline fired \(late) s late")
        }
    }

    /// An exchange that answers in time returns its answer; its deadline passing later cancels
    /// nothing (the next exchange on the same client is unaffected).
    @Test func anAnswerInTimeIsKeptAndItsDeadlineForgotten() async throws {
        let client = APIClient(transport: Slow(seconds: 0.05), retryPolicy: .none)
        let first = try await client.send(Self.request(timeout: 1.5), context: Self.context)
        #expect(first.status == 200)
        try await Task.sleep(nanoseconds: 1_700_000_000)
        let second = try await client.send(Self.request(timeout: 5), context: Self.context)
        #expect(second.status == 200 && String(decoding: second.body, as: UTF8.self) == "late")
    }

    /// Cancelling the caller ends the exchange with `CancellationError`, not `timedOut`.
    @Test func theCallersCancellationIsNotATimeout() async throws {
        let client = APIClient(transport: Slow(seconds: nil), retryPolicy: .none)
        let task = Task { try await client.send(Self.request(timeout: 30), context: Self.context) }
        try await Task.sleep(nanoseconds: 100_000_000)
        task.cancel()
        await #expect(throws: CancellationError.self) { _ = try await task.value }
    }

    /// Many exchanges at once, half answering and half timing out: every one gets its own outcome.
    @Test func aThousandExchangesEachGetTheirOwnOutcome() async throws {
        let quick = APIClient(transport: Slow(seconds: 0.01), retryPolicy: .none)
        let stuck = APIClient(transport: Slow(seconds: nil), retryPolicy: .none)
        let outcomes = try await withThrowingTaskGroup(of: (Bool, Bool).self) { group in
            for index in 0..<1000 {
                let answers = index % 2 == 0
                group.addTask {
                    do {
                        _ = try await (answers ? quick : stuck).send(Self.request(timeout: 1.5), context: Self.context)
                        return (answers, true)
                    } catch let error as HTTPRequestError where error.code == HTTPRequestError.timedOut {
                        return (answers, false)
                    }
                }
            }
            var all: [(Bool, Bool)] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.count == 1000)
        #expect(outcomes.allSatisfy { $0.0 == $0.1 }, "\(outcomes.filter { $0.0 != $0.1 }.count) exchanges got the other outcome")
    }
}
