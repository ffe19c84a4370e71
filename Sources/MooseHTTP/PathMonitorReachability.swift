#if !os(Linux) && canImport(Network)
// Apple platforms only (Linux's SystemReachability, on netlink, is in Reachability.swift; Linux has no
// Network module, so this file compiles to nothing there).
// Written against Apple's documentation, never compiled (no Apple machine where it was written): see docs/apple.md.
import Dispatch
import Network
import Synchronization

/// Apple platforms: `NWPathMonitor` says when the system's network path changes. Online while the
/// path's status is `.satisfied`, or `.requiresConnection` (no path now, but a new connection —
/// on-demand VPN, cellular waking up — may bring one: a request is not certain to fail); offline
/// while it is `.unsatisfied`. Until `start()` (and the monitor's first answer, which comes at once),
/// the status is `.online`: nothing is held back on a guess.
///
/// A cancelled `NWPathMonitor` cannot be started again, so each `start()` after a `stop()` makes a
/// new one, as the Linux monitor opens a new socket.
///
/// API reference:
/// - https://developer.apple.com/documentation/network/nwpathmonitor
/// - https://developer.apple.com/documentation/network/nwpathmonitor/pathupdatehandler
/// - https://developer.apple.com/documentation/network/nwpathmonitor/start(queue:)
/// - https://developer.apple.com/documentation/network/nwpathmonitor/cancel()
/// - https://developer.apple.com/documentation/network/nwpath/status-swift.enum
public final class SystemReachability: Reachability {
    private let broadcaster = StatusBroadcaster(.online)
    private let monitor = Mutex<NWPathMonitor?>(nil)
    private let queue = DispatchQueue(label: "moose.reachability")

    /// A monitor (call `start()`).
    public init() {}

    deinit { stop() }

    public var status: NetworkStatus { broadcaster.status }
    public func updates() -> AsyncStream<NetworkStatus> { broadcaster.listen() }

    public func start() {
        monitor.withLock { monitor in
            guard monitor == nil else { return }
            let started = NWPathMonitor()
            let broadcaster = self.broadcaster
            started.pathUpdateHandler = { path in broadcaster.publish(Self.status(of: path.status)) }
            started.start(queue: queue)
            monitor = started
        }
    }

    public func stop() {
        // Cancelled under the lock (cancel() does not block): the monitor never leaves the mutex.
        let wasRunning = monitor.withLock { monitor -> Bool in
            guard let running = monitor else { return false }
            running.cancel()
            monitor = nil
            return true
        }
        if wasRunning { broadcaster.finish() }
    }

    /// `NWPath.Status` as online or offline.
    static func status(of status: NWPath.Status) -> NetworkStatus {
        switch status {
        case .satisfied, .requiresConnection: .online
        case .unsatisfied: .offline
        @unknown default: .online
        }
    }
}
#endif
