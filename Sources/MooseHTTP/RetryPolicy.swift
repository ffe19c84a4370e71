#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Logging

/// When and how to retry.
public struct RetryPolicy: Sendable {
    /// How long to wait between attempts.
    public enum Backoff: Sendable {
        /// The same delay every time.
        case constant(TimeInterval)
        /// `base × 2^(attempt-1)`, capped at `maximum`.
        case exponential(base: TimeInterval, maximum: TimeInterval)
    }

    /// Attempts in all, the first included (1: never retry).
    public var maxAttempts: Int
    /// The delay schedule.
    public var backoff: Backoff
    /// Randomise each delay between 50% and 100% (spreads out herds of clients).
    public var jitter: Bool
    /// Statuses worth another try.
    public var retryableStatuses: Set<Int>
    /// Honour the server's `Retry-After` (seconds or an HTTP date), up to `maximumRetryAfter`.
    public var honoursRetryAfter: Bool
    /// The longest `Retry-After` honoured; longer ones fail instead of waiting.
    public var maximumRetryAfter: TimeInterval

    /// A policy: by default three attempts, exponential backoff from 0.5 s with jitter, for
    /// 408/429/500/502/503/504 and transport errors.
    public init(
        maxAttempts: Int = 3, backoff: Backoff = .exponential(base: 0.5, maximum: 8), jitter: Bool = true,
        retryableStatuses: Set<Int> = [408, 429, 500, 502, 503, 504], honoursRetryAfter: Bool = true,
        maximumRetryAfter: TimeInterval = 60
    ) {
        self.maxAttempts = maxAttempts
        self.backoff = backoff
        self.jitter = jitter
        self.retryableStatuses = retryableStatuses
        self.honoursRetryAfter = honoursRetryAfter
        self.maximumRetryAfter = maximumRetryAfter
    }

    /// Never retry.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// The delay before attempt `attempt + 1`.
    public func delay(after attempt: Int) -> TimeInterval {
        var delay: TimeInterval
        switch backoff {
        case .constant(let value): delay = value
        case .exponential(let base, let maximum): delay = min(maximum, base * pow2(attempt - 1))
        }
        if jitter { delay *= Double.random(in: 0.5...1.0) }
        return delay
    }

    private func pow2(_ exponent: Int) -> Double { Double(1 << max(0, min(exponent, 30))) }

    /// `Retry-After` as seconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3). Any
    /// answer is finite and at most one day (`86400`); a value too large to read counts as a day.
    public static func retryAfter(_ value: String?, now: Date = Date()) -> TimeInterval? {
        guard let value = value?.trimmed(), !value.isEmpty else { return nil }
        let bytes = Array(value.utf8)
        if bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            // delta-seconds = 1*DIGIT: long runs of digits are simply "a very long time".
            guard bytes.count <= 9, let seconds = HTTPDate.digits(bytes, count: 1...9) else {
                return Self.maximumRetryAfterValue
            }
            return min(TimeInterval(seconds), Self.maximumRetryAfterValue)
        }
        guard let date = HTTPDate.parse(value) else { return nil }
        let delta = date.timeIntervalSince(now)
        return delta.isFinite ? min(max(0, delta), Self.maximumRetryAfterValue) : nil
    }

    /// The largest delay `retryAfter` reports (one day); `maximumRetryAfter` caps what a retry waits.
    public static let maximumRetryAfterValue: TimeInterval = 86_400
}
