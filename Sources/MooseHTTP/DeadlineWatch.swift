#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The deadlines of every in-flight `APIClient` exchange, watched by one thread that cancels an
/// exchange's task when its deadline passes.
///
/// It replaces a race per request (a task group with a second child sleeping for the timeout):
/// that cost two child tasks, a timer the executor kept for the whole timeout even after the
/// answer came, and two more executor jobs — about a sixth of a loopback request on
/// AsyncHTTPClient (BENCHMARKS.md). Here a request costs one lock to register and one to finish;
/// the thread wakes only when the earliest deadline passes.
///
/// The task registered is the child task that runs the transport (never the caller's, whose
/// cancellation would be permanent). It is cancelled only while registered: the child finishes
/// (deregisters) before it returns, and its `finish` waits while its own cancellation runs, so the
/// task is alive whenever it is cancelled. Cancellation runs outside the lock, so a handler that
/// blocks holds up only its own exchange.
final class DeadlineWatch: @unchecked Sendable {
    // unchecked: every mutable member below is read and written under `mutex` only.

    /// The process's one watch (its thread starts on first use and never ends).
    static let shared = DeadlineWatch()

    private struct Entry {
        let deadline: UInt64
        let id: UInt64
        let target: Target
    }

    /// What a deadline cancels: an exchange's task, or (tests) an action run on the watch thread.
    private enum Target {
        case task(UnsafeCurrentTask)
        case action(@Sendable () -> Void)
    }

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    /// Sorted by deadline, then id (ids grow): the earliest first. Requests of one timeout arrive
    /// in deadline order, so most inserts append.
    private var entries: [Entry] = []
    /// Entries whose deadline passed (their task cancelled), until they finish.
    private var fired: Set<UInt64> = []
    /// Entries being cancelled right now, outside the lock: their `finish` waits for it (the task
    /// must stay alive while it is cancelled), no other entry's does.
    private var cancelling: Set<UInt64> = []
    private let cancelled: UnsafeMutablePointer<pthread_cond_t>
    private var nextID: UInt64 = 1
    private var started = false
    /// The time the thread sleeps until (`UInt64.max`: no deadline, it waits to be signalled; 0: it
    /// is awake, or about to look at `entries`). Never later than the earliest entry's deadline: an
    /// entry that is finished leaves it where it was (the thread then wakes early, finds nothing due
    /// and sleeps again), a new entry due sooner signals the thread.
    private var sleepingUntil: UInt64 = 0

    /// A watch of its own (the process's one is `shared`; tests make others). Its thread, once
    /// started, keeps it alive.
    init() {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        cancelled = .allocate(capacity: 1)
        pthread_cond_init(cancelled, nil)
        condition = .allocate(capacity: 1)
        #if os(Linux) || os(Android)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        #else
        pthread_cond_init(condition, nil)
        #endif
    }

    /// Nanoseconds on the monotonic clock.
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }

    /// What `watch` returns and `finish` takes.
    struct Ticket: Sendable {
        fileprivate let deadline: UInt64
        fileprivate let id: UInt64
    }

    /// The monotonic deadline `seconds` from now (bounded to 1 ms … 1 day).
    static func deadline(after seconds: Double) -> UInt64 {
        let bounded = seconds.isNaN ? 0.001 : max(0.001, min(seconds, 86_400))
        return now() &+ UInt64(bounded * 1e9)
    }

    /// Registers `task` to be cancelled at `deadline` (from `deadline(after:)`; one already past
    /// fires at once).
    func watch(_ task: UnsafeCurrentTask, deadline: UInt64) -> Ticket {
        register(.task(task), deadline: deadline)
    }

    /// Runs `action` on the watch thread at `deadline` unless finished first (the watch's own
    /// tests: its order and timing, free of any task's scheduling).
    func watch(deadline: UInt64, action: @escaping @Sendable () -> Void) -> Ticket {
        register(.action(action), deadline: deadline)
    }

    private func register(_ target: Target, deadline: UInt64) -> Ticket {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if !started {
            started = true
            startThread()
        }
        let id = nextID
        nextID &+= 1
        let entry = Entry(deadline: deadline, id: id, target: target)
        if let last = entries.last, last.deadline > deadline {
            entries.insert(entry, at: insertionIndex(deadline))
        } else {
            entries.append(entry)
        }
        // The thread sleeps until the earliest deadline it knew of: wake it only for one earlier
        // than that. (Each new entry is the earliest when one request is in flight; waking the thread
        // for each cost 2–3 µs a request, up to 30 µs when it was preempted holding the lock.)
        if deadline < sleepingUntil {
            sleepingUntil = 0
            pthread_cond_signal(condition)
        }
        return Ticket(deadline: deadline, id: id)
    }

    /// Deregisters `ticket`; `true` when its deadline had passed (its task was cancelled for it).
    func finish(_ ticket: Ticket) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while cancelling.contains(ticket.id) { pthread_cond_wait(cancelled, mutex) }
        var index = firstIndex(notBefore: ticket.deadline)
        while index < entries.count, entries[index].deadline == ticket.deadline {
            if entries[index].id == ticket.id {
                entries.remove(at: index)
                return false
            }
            index += 1
        }
        return fired.remove(ticket.id) != nil
    }

    /// The first index whose deadline is not earlier than `deadline` (binary search).
    private func firstIndex(notBefore deadline: UInt64) -> Int {
        var low = 0, high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].deadline < deadline { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The first index whose deadline is later than `deadline` (binary search).
    private func insertionIndex(_ deadline: UInt64) -> Int {
        var low = 0, high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].deadline <= deadline { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private func startThread() {
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        // The thread holds this watch (retained, never released: the thread never ends).
        let context = Unmanaged.passRetained(self).toOpaque()
        #if canImport(Darwin)
        _ = pthread_create(
            &thread, &attributes, { Unmanaged<DeadlineWatch>.fromOpaque($0).takeUnretainedValue().run() }, context)
        #else
        _ = pthread_create(
            &thread, &attributes,
            { context in
                guard let context else { return nil }
                Unmanaged<DeadlineWatch>.fromOpaque(context).takeUnretainedValue().run()
            }, context)
        #endif
        pthread_attr_destroy(&attributes)
    }

    /// The thread: cancels each due entry's task, then sleeps until the earliest deadline.
    private func run() -> Never {
        pthread_mutex_lock(mutex)
        while true {
            guard let first = entries.first else {
                sleepingUntil = .max
                pthread_cond_wait(condition, mutex)
                sleepingUntil = 0
                continue
            }
            let now = Self.now()
            if first.deadline <= now {
                var due = 0
                while due < entries.count, entries[due].deadline <= now { due += 1 }
                let firing = Array(entries[0..<due])
                entries.removeFirst(due)
                for entry in firing { cancelling.insert(entry.id) }
                // Cancelled outside the lock: a task's cancellation handlers may block (URLSession's
                // waits on its own queue), and no other exchange may wait for that.
                pthread_mutex_unlock(mutex)
                for entry in firing {
                    switch entry.target {
                    case .task(let task): task.cancel()
                    case .action(let action): action()
                    }
                }
                pthread_mutex_lock(mutex)
                for entry in firing {
                    cancelling.remove(entry.id)
                    fired.insert(entry.id)
                }
                pthread_cond_broadcast(cancelled)
                continue
            }
            sleepingUntil = first.deadline
            #if os(Linux) || os(Android)
            var until = timespec(
                tv_sec: Int(first.deadline / 1_000_000_000), tv_nsec: Int(first.deadline % 1_000_000_000))
            _ = pthread_cond_timedwait(condition, mutex, &until)
            #else
            let wait = first.deadline - now
            var relative = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
            _ = pthread_cond_timedwait_relative_np(condition, mutex, &relative)
            #endif
            sleepingUntil = 0
        }
    }
}
