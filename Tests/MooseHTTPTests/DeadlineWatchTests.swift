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

    static let context = HTTPMiddlewareContext(isRetryable: false, requiresAuthentication: false)

    static func request(timeout: Double) -> APIRequest {
        APIRequest(url: URL(string: "http://127.0.0.1:9/")!, timeout: timeout)
    }

    /// Deadlines registered out of order (a later request with a shorter timeout) end in deadline
    /// order, each as `timedOut`, none waiting for the others.
    @Test func eachExchangeEndsAtItsOwnDeadline() async throws {
        let client = APIClient(transport: Slow(seconds: nil), retryPolicy: .none)
        let started = Date()
        let ended = try await withThrowingTaskGroup(of: (Double, Double).self) { group in
            for timeout in [1.2, 0.3, 0.7] {
                group.addTask {
                    do {
                        _ = try await client.send(Self.request(timeout: timeout), context: Self.context)
                        Issue.record("the \(timeout) s exchange answered")
                    } catch let error as HTTPRequestError {
                        #expect(error.code == HTTPRequestError.timedOut, "\(error)")
                    }
                    return (timeout, Date().timeIntervalSince(started))
                }
                try await Task.sleep(nanoseconds: 20_000_000)
            }
            var ended: [(Double, Double)] = []
            for try await result in group { ended.append(result) }
            return ended
        }
        #expect(ended.map(\.0) == [0.3, 0.7, 1.2], "ended in the order \(ended)")
        for (timeout, at) in ended { #expect(at >= timeout, "the \(timeout) s exchange ended at \(at) s") }
        // The 0.3 s one did not wait for the 1.2 s deadline (the watch woke for the earlier one).
        // (The suite runs in tools/test's timing run, alone on the machine.)
        #expect((ended.first?.1 ?? 99) < 1.1, "the first exchange ended at \(ended.first?.1 ?? -1) s")
    }

    /// An exchange that answers in time returns its answer; its deadline passing later cancels
    /// nothing (the next exchange on the same client is unaffected).
    @Test func anAnswerInTimeIsKeptAndItsDeadlineForgotten() async throws {
        let client = APIClient(transport: Slow(seconds: 0.05), retryPolicy: .none)
        let first = try await client.send(Self.request(timeout: 0.3), context: Self.context)
        #expect(first.status == 200)
        try await Task.sleep(nanoseconds: 400_000_000)
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
                        _ = try await (answers ? quick : stuck).send(Self.request(timeout: 0.5), context: Self.context)
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
