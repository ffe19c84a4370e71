import Foundation
@testable import MooseHTTP
import Testing

/// `APIClient`'s timeout comes from one watch thread (`DeadlineWatch`) that cancels the exchange's
/// child task at its deadline. The watch's order and timing are tested with actions it runs on its
/// own thread (no task scheduling in the measurement, so a busy machine cannot fake a result); the
/// exchanges with a transport that answers at once or never. The real servers' timeouts are in
/// `ClientTests` and the adapters' tests.
struct DeadlineWatchTests {
    /// What the watch ran, in order, with the time (on the watch thread) after `started`.
    final class Fired: @unchecked Sendable {
        let started = DeadlineWatch.now()
        private let lock = NSLock()
        private var entries: [(label: String, late: Double)] = []
        private var waiters: [CheckedContinuation<Void, Never>] = []
        let expected: Int
        init(expected: Int) { self.expected = expected }

        /// An action for a deadline `seconds` after `started`.
        func action(_ label: String, at seconds: Double) -> @Sendable () -> Void {
            action(label, deadline: deadline(seconds))
        }

        /// An action for the monotonic `deadline`; notes how late (seconds) it ran.
        func action(_ label: String, deadline: UInt64) -> @Sendable () -> Void {
            { [self] in
                let late = (Double(DeadlineWatch.now()) - Double(deadline)) / 1e9
                let done: [CheckedContinuation<Void, Never>] = lock.withLock {
                    entries.append((label, late))
                    guard entries.count == expected else { return [] }
                    defer { waiters.removeAll() }
                    return waiters
                }
                for waiter in done { waiter.resume() }
            }
        }

        func deadline(_ seconds: Double) -> UInt64 { started &+ UInt64(seconds * 1e9) }
        var all: [(label: String, late: Double)] { lock.withLock { entries } }

        func waitForAll() async {
            await withCheckedContinuation { continuation in
                let now: Bool = lock.withLock {
                    if entries.count == expected { return true }
                    waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
    }

    /// Deadlines registered out of order fire in deadline order, and the watch wakes for a deadline
    /// earlier than the one it sleeps towards: without that, "early" would fire with "late", 2.7 s
    /// after its time.
    @Test func deadlinesFireInOrderAndAnEarlierOneWakesTheWatch() async throws {
        let fired = Fired(expected: 3)
        // A watch of its own: the shared one wakes for other tests' deadlines too, which would
        // hide a missing wake-up.
        let watch = DeadlineWatch()
        _ = watch.watch(deadline: fired.deadline(3.0), action: fired.action("late", at: 3.0))
        // Let its thread start and go to sleep towards "late".
        try await Task.sleep(nanoseconds: 150_000_000)
        // The two earlier deadlines count from now. A machine so busy that this task ran too close
        // to "late" (a sanitizer build among hundreds of tests) cannot show the wake-up: nothing to judge.
        let now = DeadlineWatch.now()
        guard now < fired.deadline(1.0) else { return }
        let early = now &+ 400_000_000, middle = now &+ 700_000_000
        _ = watch.watch(deadline: early, action: fired.action("early", deadline: early))
        _ = watch.watch(deadline: middle, action: fired.action("middle", deadline: middle))
        await fired.waitForAll()
        let all = fired.all
        #expect(all.map(\.label) == ["early", "middle", "late"], "fired in the order \(all)")
        for entry in all { #expect(entry.late >= 0, "\(entry.label) fired \(-entry.late) s early") }
        #expect((all.first?.late ?? 99) < 1.0, "the earliest deadline fired \(all.first?.late ?? -1) s late")
    }

    /// A deadline later than the one the watch sleeps towards does not wake it; when that earlier
    /// entry is finished first, the watch wakes at its time, finds nothing due, and still fires the
    /// later one on time (and an entry added while it is awake is seen).
    @Test func aLaterDeadlineFiresOnTimeWhenTheEarlierOneFinished() async throws {
        let fired = Fired(expected: 3)
        let watch = DeadlineWatch()
        let earlier = watch.watch(deadline: fired.deadline(0.3), action: fired.action("earlier", at: 0.3))
        try await Task.sleep(nanoseconds: 50_000_000)
        let now = DeadlineWatch.now()
        guard now < fired.deadline(0.2) else { return } // too busy to tell: see above
        _ = watch.watch(deadline: fired.deadline(0.5), action: fired.action("later", at: 0.5))
        _ = watch.watch(deadline: fired.deadline(0.5), action: fired.action("same", at: 0.5))
        #expect(watch.finish(earlier) == false)
        // Many more, each later than the last and finished at once (a busy client's requests).
        for step in 0..<1_000 {
            let ticket = watch.watch(deadline: fired.deadline(0.6 + Double(step) * 0.001), action: {})
            #expect(watch.finish(ticket) == false)
        }
        _ = watch.watch(deadline: fired.deadline(0.7), action: fired.action("last", at: 0.7))
        await fired.waitForAll()
        let all = fired.all
        #expect(all.map(\.label) == ["later", "same", "last"], "fired in the order \(all)")
        for entry in all {
            #expect(entry.late >= 0, "\(entry.label) fired \(-entry.late) s early")
            #expect(entry.late < 1.0, "\(entry.label) fired \(entry.late) s late")
        }
    }

    /// A finished entry never fires; `finish` says whether it had.
    @Test func aFinishedDeadlineNeverFires() async throws {
        let fired = Fired(expected: 1)
        let watch = DeadlineWatch()
        let forgotten = watch.watch(deadline: fired.deadline(0.2), action: fired.action("forgotten", at: 0.2))
        #expect(watch.finish(forgotten) == false)
        let kept = watch.watch(deadline: fired.deadline(0.4), action: fired.action("kept", at: 0.4))
        await fired.waitForAll()
        #expect(fired.all.map(\.label) == ["kept"])
        #expect(watch.finish(kept) == true)
        #expect(watch.finish(kept) == false, "a ticket reported as fired twice")
    }

    /// Answers at once, or — `nil` — only ends when cancelled.
    struct Transport: HTTPTransport {
        let answers: Bool
        func send(_ request: APIRequest) async throws -> APIResponse {
            if answers { return APIResponse(status: 200, body: Data("ok".utf8)) }
            try await Task.sleep(nanoseconds: 3_600_000_000_000)
            return APIResponse(status: 200)
        }
    }

    static let context = HTTPMiddlewareContext(isRetryable: false, requiresAuthentication: false)

    static func request(timeout: Double) -> APIRequest {
        APIRequest(url: URL(string: "http://127.0.0.1:9/")!, timeout: timeout)
    }

    /// Cancelling the caller ends the exchange with `CancellationError`, not `timedOut`.
    @Test func theCallersCancellationIsNotATimeout() async throws {
        let client = APIClient(transport: Transport(answers: false), retryPolicy: .none)
        let task = Task { try await client.send(Self.request(timeout: 30), context: Self.context) }
        try await Task.sleep(nanoseconds: 100_000_000)
        task.cancel()
        await #expect(throws: CancellationError.self) { _ = try await task.value }
    }

    /// A thousand exchanges at once with two timeouts: those that answer (30 s to do so) get their
    /// answer, those that never answer (0.5 s) end as `timedOut` — none gets another's outcome.
    @Test func aThousandExchangesEachGetTheirOwnOutcome() async throws {
        let answering = APIClient(transport: Transport(answers: true), retryPolicy: .none)
        let stuck = APIClient(transport: Transport(answers: false), retryPolicy: .none)
        let outcomes = try await withThrowingTaskGroup(of: (Bool, Bool).self) { group in
            for index in 0..<1000 {
                let answers = index % 2 == 0
                group.addTask {
                    do {
                        _ = try await (answers ? answering : stuck).send(
                            Self.request(timeout: answers ? 30 : 0.5), context: Self.context)
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
        #expect(
            outcomes.allSatisfy { $0.0 == $0.1 },
            "\(outcomes.filter { $0.0 != $0.1 }.count) exchanges got the other outcome")
    }
}
