#if MooseCombine
import Foundation
import MooseCombine
import MooseOAuth
import MooseTestSupport
import OpenCombineShim
import Synchronization
import Testing

/// What one events subscriber saw, as short names.
final class EventLog: Sendable {
    private let events = Mutex<[String]>([])
    func record(_ event: RefreshEvent) {
        let name =
            switch event {
            case .refreshed(let generation, _): "refreshed \(generation)"
            case .refreshFailed: "refreshFailed"
            case .needsReauthentication: "needsReauthentication"
            case .loggedOut: "loggedOut"
            }
        events.withLock { $0.append(name) }
    }
    var names: [String] { events.withLock { $0 } }
}

/// A coordinator over an in-memory session whose refresher mints a new 1-hour token each time.
func mintingCoordinator() async throws -> RefreshCoordinator {
    let storage = InMemorySessionStorage()
    let tokens = TokenSet(accessToken: "at-0", refreshToken: "rt-0", expiresAt: Date().addingTimeInterval(3600))
    try await storage.replace(
        OAuthSession(issuer: "https://id.example", clientID: "app", tokens: tokens), key: "default")
    let minted = Mutex(0)
    return RefreshCoordinator(key: "default", storage: storage) { _ in
        let n = minted.withLock {
            $0 += 1; return $0
        }
        return TokenSet(accessToken: "at-\(n)", refreshToken: "rt-\(n)", expiresAt: Date().addingTimeInterval(3600))
    }
}

@Suite struct EventsPublisherTests {
    /// Issue: one stored publisher subscribed twice split the events between its subscribers (one
    /// `AsyncStream` read by two tasks), and cancelling one ended the other.
    @Test func aStoredPublisherGivesEverySubscriberEveryEventAndCancelsOnlyItsOwn() async throws {
        let coordinator = try await mintingCoordinator()
        let events = coordinator.eventsPublisher // stored once, subscribed twice
        let first = EventLog(), second = EventLog()
        let a = events.sink { first.record($0) }
        let b = events.sink { second.record($0) }
        try await Task.sleep(nanoseconds: 100_000_000) // both listening
        for _ in 0..<4 { try await coordinator.refreshNow() }
        await eventually(10) { first.names.count >= 4 && second.names.count >= 4 }
        let four = ["refreshed 1", "refreshed 2", "refreshed 3", "refreshed 4"]
        #expect(first.names == four)
        #expect(second.names == four)
        a.cancel()
        try await coordinator.refreshNow()
        await eventually(10) { second.names.count >= 5 }
        try await Task.sleep(nanoseconds: 100_000_000)
        #expect(second.names == four + ["refreshed 5"], "cancelling one subscriber ended the other")
        #expect(first.names == four, "a cancelled subscriber got an event")
        withExtendedLifetime(b) {}
    }

    /// Issue: a publisher made before a logout and subscribed after it received the stale `.loggedOut`.
    @Test func aLateSubscriberGetsNothingFromBeforeItSubscribed() async throws {
        let coordinator = try await mintingCoordinator()
        let events = coordinator.eventsPublisher // made before the events happen
        try await coordinator.refreshNow()
        await coordinator.didLogOut()
        try await Task.sleep(nanoseconds: 200_000_000)
        let late = EventLog()
        let subscription = events.sink { late.record($0) }
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(late.names.isEmpty, "a late subscriber got earlier events: \(late.names)")
        await coordinator.didLogOut() // after it subscribed: this one it gets
        await eventually(10) { !late.names.isEmpty }
        try await Task.sleep(nanoseconds: 100_000_000)
        #expect(late.names == ["loggedOut"])
        withExtendedLifetime(subscription) {}
    }

    /// `AsyncStreamPublisher` itself: each subscription calls the factory when it subscribes.
    @Test func theStreamPublisherMakesOneStreamPerSubscription() async throws {
        let made = Mutex(0)
        let continuations = Mutex<[AsyncStream<Int>.Continuation]>([])
        let publisher = AsyncStreamPublisher<Int> {
            made.withLock { $0 += 1 }
            let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
            continuations.withLock { $0.append(continuation) }
            return stream
        }
        #expect(made.withLock { $0 } == 0, "the stream was made before anyone subscribed")
        let first = Mutex<[Int]>([]), second = Mutex<[Int]>([])
        let a = publisher.sink { value in first.withLock { $0.append(value) } }
        let b = publisher.sink { value in second.withLock { $0.append(value) } }
        #expect(made.withLock { $0 } == 2)
        for continuation in continuations.withLock({ $0 }) { continuation.yield(7); continuation.finish() }
        await eventually(10) { first.withLock { $0 } == [7] && second.withLock { $0 } == [7] }
        #expect(first.withLock { $0 } == [7] && second.withLock { $0 } == [7])
        withExtendedLifetime([a, b]) {}
    }
}

@Suite(.serialized)
struct FacadeEventsPublisherTests {
    /// The facade's stored publisher, at the real provider: both subscribers see both refreshes; a
    /// subscriber that came after the logout does not see it.
    @Test func theManagersStoredPublisherReachesEverySubscriberAndNoLateOne() async throws {
        let transport = TokenRequests()
        let (moose, _) = try await loggedInManager(transport)
        let events = moose.eventsPublisher
        let first = EventLog(), second = EventLog()
        let a = events.sink { first.record($0) }
        let b = events.sink { second.record($0) }
        try await Task.sleep(nanoseconds: 100_000_000)
        try await moose.coordinator.refreshNow()
        try await moose.coordinator.refreshNow()
        await eventually(10) { first.names.count >= 2 && second.names.count >= 2 }
        #expect(first.names.count == 2 && first.names == second.names, "\(first.names) / \(second.names)")
        await moose.logout()
        try await Task.sleep(nanoseconds: 200_000_000)
        let late = EventLog()
        let c = events.sink { late.record($0) }
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(late.names.isEmpty, "a subscriber made after the logout got \(late.names)")
        await eventually(10) { first.names.count >= 3 && second.names.count >= 3 }
        #expect(first.names.last == "loggedOut" && second.names.last == "loggedOut")
        withExtendedLifetime([a, b, c]) {}
    }
}
#endif
