#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
import MooseJWT

/// The offset between the provider's clock and ours, learned from HTTP `Date` headers, for expiry
/// decisions when the local clock is wrong.
public struct ClockSkew: Sendable {
    /// Server time minus local time, seconds (positive: the server is ahead).
    public let offset: TimeInterval

    /// The offset from one response's `Date` header and the local time it arrived; `nil` without one.
    public init?(response: APIResponse, receivedAt: Date = Date()) {
        guard let header = response.headerFields[.date], let serverDate = HTTPDate.parse(header) else { return nil }
        offset = serverDate.timeIntervalSince(receivedAt)
    }

    /// `true` when the difference exceeds `leeway` (then use `correctedNow` for expiry decisions, and log it).
    public func isSignificant(leeway: TimeInterval) -> Bool { abs(offset) > leeway }

    /// The provider's "now".
    public func correctedNow(_ now: Date = Date()) -> Date { now.addingTimeInterval(offset) }
}
