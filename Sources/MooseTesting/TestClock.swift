#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization

/// A wall clock tests move by hand, for everything in Moose that takes a `clock` (the coordinator's
/// configuration, `ClaimValidation`, `IDTokenValidator`, `InMemorySessionStorage`).
///
/// ```swift
/// let clock = TestClock(now: Date(timeIntervalSince1970: 1_800_000_000))
/// var configuration = RefreshCoordinator.Configuration()
/// configuration.clock = clock.read
/// clock.advance(by: 3600)   // every token is now an hour older
/// ```
public final class TestClock: Sendable {
    private let current: Mutex<Date>

    /// A clock reading `now`.
    public init(now: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex(now) }

    /// The current reading.
    public var now: Date { current.withLock { $0 } }

    /// A closure reading this clock, for `clock:` parameters.
    public var read: @Sendable () -> Date { { [self] in self.now } }

    /// Moves the clock forward (or back, with a negative interval).
    public func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }

    /// Sets the clock.
    public func set(_ date: Date) { current.withLock { $0 = date } }
}
