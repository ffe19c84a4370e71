#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Which URLs may carry OAuth traffic: `https`, or plain `http` only to this machine (RFC 8252 §8.3,
/// RFC 6749 §3.1 and §10.9; OAuth 2.1 §1.5). Codes, refresh tokens and client secrets must never
/// cross a network in clear text.
///
/// ```swift
/// TransportSecurity.permits(URL(string: "https://id.example.com/token")!)   // true
/// TransportSecurity.permits(URL(string: "http://127.0.0.1:8765/token")!)    // true (loopback)
/// TransportSecurity.permits(URL(string: "http://id.example.com/token")!)    // false
/// ```
public enum TransportSecurity {
    /// `true` for `https` URLs with a host, and for `http` URLs whose host is a loopback address
    /// (`127.0.0.0/8`, `::1`, or `localhost`).
    public static func permits(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else { return false }
        if scheme == "https" { return true }
        return scheme == "http" && isLoopback(host: host)
    }

    /// `true` when `host` names this machine: an IPv4 address in `127.0.0.0/8`, the IPv6 loopback
    /// `::1` (bracketed or not), or `localhost` (any case, optionally with a trailing dot).
    public static func isLoopback(host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name = String(name.dropLast()) }
        if name == "localhost" || name == "::1" || name == "0:0:0:0:0:0:0:1" { return true }
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets[0] == "127" else { return false }
        return octets.allSatisfy { octet in
            !octet.isEmpty && octet.count <= 3 && octet.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
                && Int(octet).map { $0 <= 255 } == true
        }
    }
}
