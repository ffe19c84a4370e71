#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseJWT

/// What the device authorization endpoint answered (RFC 8628 §3.2): show `userCode` and
/// `verificationURI` to the user.
public struct DeviceAuthorization: Sendable {
    /// The code the client polls with (secret: never shown or logged).
    public let deviceCode: String
    /// The code the user types.
    public let userCode: String
    /// Where the user goes.
    public let verificationURI: URL
    /// The same with the user code filled in, when the server offers it.
    public let verificationURIComplete: URL?
    /// When the codes expire.
    public let expiresAt: Date
    /// The minimum polling interval, seconds (5 when the server says nothing; bounded to 1–60).
    public let interval: TimeInterval
    /// The longest device-code lifetime believed from `expires_in`: one hour.
    public static let maximumLifetime: TimeInterval = 3600
    /// The longest polling interval used, whatever the server says (`interval`, `slow_down`): 60 s.
    public static let maximumInterval: TimeInterval = 60

    /// A device authorization (for tests and for callers that started it elsewhere).
    public init(
        deviceCode: String, userCode: String, verificationURI: URL, verificationURIComplete: URL?,
        expiresAt: Date, interval: TimeInterval
    ) {
        self.deviceCode = deviceCode
        self.userCode = userCode
        self.verificationURI = verificationURI
        self.verificationURIComplete = verificationURIComplete
        self.expiresAt = expiresAt
        self.interval = interval
    }
}
