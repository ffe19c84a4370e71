#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether this machine has a network path out (an interface that is up, has a carrier and an
/// address, other than loopback).
public enum NetworkStatus: Sendable, Hashable, CustomStringConvertible {
    /// A path exists: requests may go out.
    case online
    /// No path: every request would fail; a refresh now would be wasted.
    case offline

    public var description: String { self == .online ? "online" : "offline" }
}

/// Watches the network path, in the shape of the reachability services apps already have: start,
/// stop, the current state, and an `AsyncSequence` of changes. The coordinator and the HTTP client's
/// retry consult it, so that offline is its own outcome — no refresh token spent, no retries burned,
/// never "logged out" — and a refresh postponed while offline runs when the network is back.
///
/// ```swift
/// let reachability = SystemReachability()      // netlink on Linux, NWPathMonitor on Apple platforms
/// reachability.start()
/// for await status in reachability.updates() { print(status) }
/// ```
public protocol Reachability: AnyObject, Sendable {
    /// The state now.
    var status: NetworkStatus { get }
    /// `status == .online`.
    var isReachable: Bool { get }
    /// The state now, then every change, until the caller stops iterating or `stop()`.
    func updates() -> AsyncStream<NetworkStatus>
    /// Starts watching (idempotent).
    func start()
    /// Stops watching; streams end.
    func stop()
}

extension Reachability {
    public var isReachable: Bool { status == .online }
}

/// A reachability whose state the app (or a test) sets: for platforms without a monitor, and for tests.
public final class ManualReachability: Reachability {
    private let broadcaster: StatusBroadcaster

    /// Starts in `status`.
    public init(_ status: NetworkStatus = .online) { broadcaster = StatusBroadcaster(status) }

    public var status: NetworkStatus { broadcaster.status }
    public func updates() -> AsyncStream<NetworkStatus> { broadcaster.listen() }
    public func start() {}
    public func stop() { broadcaster.finish() }

    /// Changes the state (listeners hear of a change only).
    public func set(_ status: NetworkStatus) { broadcaster.publish(status) }
}

/// The current status and its listeners.
final class StatusBroadcaster: Sendable {
    private let state:
        Mutex<(status: NetworkStatus, next: Int, listeners: [Int: AsyncStream<NetworkStatus>.Continuation])>

    init(_ status: NetworkStatus) { state = Mutex((status, 0, [:])) }

    var status: NetworkStatus { state.withLock { $0.status } }

    func listen() -> AsyncStream<NetworkStatus> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: NetworkStatus.self, bufferingPolicy: .bufferingNewest(8))
        let id = state.withLock { state in
            state.next += 1
            state.listeners[state.next] = continuation
            continuation.yield(state.status)
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.listeners.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ status: NetworkStatus) {
        let listeners = state.withLock { state -> [AsyncStream<NetworkStatus>.Continuation] in
            guard state.status != status else { return [] }
            state.status = status
            return Array(state.listeners.values)
        }
        for listener in listeners { listener.yield(status) }
    }

    func finish() {
        for listener in state.withLock({ Array($0.listeners.values) }) { listener.finish() }
    }
}

#if os(Linux)
/// `struct sockaddr_nl`, laid out as the kernel reads it.
private struct NetlinkAddress {
    var family: UInt16
    var pad: UInt16
    var pid: UInt32
    var groups: UInt32
}

/// Linux: a netlink route socket subscribed to link, address and route changes (`RTMGRP_LINK`,
/// IPv4/IPv6 address and route groups) wakes a thread that re-reads the interfaces (`getifaddrs`):
/// online when an interface other than loopback is up, has a carrier (`IFF_RUNNING`) and an IPv4
/// or non-link-local IPv6 address. No polling: the kernel says when something changed.
public final class SystemReachability: Reachability {
    private let broadcaster = StatusBroadcaster(SystemReachability.evaluate())
    private let running = Mutex<(socket: Int32, wake: Int32)?>(nil)

    /// A monitor (call `start()`).
    public init() {}

    deinit { stop() }

    public var status: NetworkStatus { broadcaster.status }
    public func updates() -> AsyncStream<NetworkStatus> { broadcaster.listen() }

    public func start() {
        running.withLock { running in
            guard running == nil else { return }
            // AF_NETLINK = 16, NETLINK_ROUTE = 0 (linux/netlink.h, not in the Glibc module).
            let socket = Glibc.socket(16, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socket >= 0 else { return }
            // struct sockaddr_nl { sa_family_t nl_family; unsigned short nl_pad; __u32 nl_pid; __u32 nl_groups; }
            // groups: RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE
            var address = NetlinkAddress(family: 16, pad: 0, pid: 0, groups: 0x1 | 0x10 | 0x40 | 0x100 | 0x400)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(socket, $0, socklen_t(MemoryLayout<NetlinkAddress>.size))
                }
            }
            var pipeEnds: [Int32] = [0, 0]
            guard bound == 0, pipe(&pipeEnds) == 0 else { close(socket); return }
            for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            running = (socket, pipeEnds[1])
            let broadcaster = self.broadcaster
            let wakeRead = pipeEnds[0]
            // One long-lived watcher, blocked in poll(2) until the kernel reports a change.
            DispatchQueue(label: "moose.reachability").async {
                Self.watch(socket: socket, wake: wakeRead, broadcaster: broadcaster)
                close(wakeRead)
                close(socket)
            }
            broadcaster.publish(Self.evaluate()) // a change between init and start
        }
    }

    public func stop() {
        guard
            let ends = running.withLock({ running -> (Int32, Int32)? in
                defer { running = nil }
                return running.map { ($0.socket, $0.wake) }
            })
        else { return }
        var byte: UInt8 = 1
        _ = write(ends.1, &byte, 1)
        close(ends.1)
        broadcaster.finish()
    }

    /// Waits on the netlink socket (and the wake-up pipe); re-evaluates after every burst of messages.
    private static func watch(socket: Int32, wake: Int32, broadcaster: StatusBroadcaster) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var fds = [
                pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake, events: Int16(POLLIN), revents: 0)
            ]
            let ready = poll(&fds, 2, -1)
            if ready < 0 { if errno == EINTR { continue }; return }
            if fds[1].revents != 0 { return }
            // Drain what is there (the contents do not matter: any change means "look again").
            while recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
            broadcaster.publish(evaluate())
        }
    }

    /// Online when a non-loopback interface is up, running and has a usable address.
    static func evaluate() -> NetworkStatus {
        var list: UnsafeMutablePointer<ifaddrs>? = nil
        guard getifaddrs(&list) == 0, let first = list else { return .offline }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            let flags = Int32(bitPattern: entry.pointee.ifa_flags)
            guard flags & Int32(IFF_UP) != 0, flags & Int32(IFF_RUNNING) != 0, flags & Int32(IFF_LOOPBACK) == 0,
                let address = entry.pointee.ifa_addr
            else { continue }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                return .online
            case AF_INET6:
                let isLinkLocal = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer -> Bool in
                    let bytes = withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
                    return bytes[0] == 0xFE && (bytes[1] & 0xC0) == 0x80
                }
                if !isLinkLocal { return .online }
            default:
                continue
            }
        }
        return .offline
    }
}
#endif
// Apple platforms: SystemReachability on NWPathMonitor is in PathMonitorReachability.swift.
