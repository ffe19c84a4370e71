#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import HTTPTypes
public import MooseHTTP
import MooseJWT
import MooseCrypto
import Synchronization

/// The DPoP nonces servers handed out (RFC 9449 §8, §9), per origin (scheme, host, port): a proof
/// to that origin carries the last one. Shared by every request in the process, so a token endpoint's
/// or resource server's nonce learnt once serves every session.
public enum DPoPNonces {
    private static let nonces = Mutex<[String: String]>([:])

    /// The nonce last received from `url`'s origin.
    public static func nonce(for url: URL) -> String? {
        guard let origin = origin(url) else { return nil }
        return nonces.withLock { $0[origin] }
    }

    /// Remembers the `DPoP-Nonce` of a response from `url`'s origin, if it carries a well-formed one
    /// (RFC 9449 §8.1: `NQCHAR`, at most 1 KiB here).
    public static func remember(_ response: APIResponse, from url: URL?) {
        guard let url, let nonce = response.headerFields[.dpopNonce] else { return }
        remember(nonce, from: url)
    }

    /// Remembers a `DPoP-Nonce` value from `url`'s origin, if well-formed (NQCHAR, at most 1 KiB).
    public static func remember(_ nonce: String, from url: URL) {
        guard let origin = origin(url), !nonce.isEmpty, nonce.utf8.count <= 1024,
            nonce.utf8.allSatisfy({ $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) })
        else { return }
        nonces.withLock { entries in
            if entries.count > 1024 { entries.removeAll() } // bounded: a process talks to few origins
            entries[origin] = nonce
        }
    }

    static func origin(_ url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        return "\(scheme)://\(host):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    /// `true` when `response` asks for a (new) nonce: 400 `use_dpop_nonce` from a token endpoint
    /// (RFC 9449 §8) or 401 with `WWW-Authenticate: DPoP error="use_dpop_nonce"` from a resource
    /// server (§9), and carries the nonce to use.
    public static func asksForNonce(_ response: APIResponse) -> Bool {
        guard response.headerFields[.dpopNonce] != nil else { return false }
        if response.status.code == 401 {
            return AuthenticationChallenge.parse(response.headerFields[values: .wwwAuthenticate]).contains {
                $0.hasScheme("DPoP") && $0["error"].map { Array($0.utf8) == Array("use_dpop_nonce".utf8) } == true
            }
        }
        guard response.status.code == 400, case .object(let object)? = try? JSONValue(parsing: Array(response.body))
        else { return false }
        return object["error"]?.stringValue.map { Array($0.utf8) == Array("use_dpop_nonce".utf8) } == true
    }
}

extension DPoPNonces {
    /// The one nonce rule of RFC 9449 (§8 at a token endpoint, §9 at a resource server), for every
    /// sender in Moose — OAuth requests, `AccessToken.send`, `TokenAuthorizer` (so `AuthMiddleware`
    /// and `AccessTokenMiddleware`) and MooseMCP's transport: `attempt` sends with a proof made now (carrying the nonce `url`'s
    /// origin gave last); the nonce an answer carries is remembered for that origin; an answer that
    /// asks for a nonce is discarded and the request sent once more — once, never a loop — when the
    /// request can be sent again.
    package nonisolated(nonsending) static func send<Response>(
        to url: URL, canResend: Bool = true, asksForNonce: (Response) -> Bool, nonce: (Response) -> String?,
        discard: (Response) async -> Void = { _ in },
        _ attempt: () async throws -> Response
    ) async throws -> Response {
        // Inline, not a nested function: this runs on the caller's actor (`nonisolated(nonsending)`),
        // so an actor's `attempt` (MooseMCP's transport) is called where it lives.
        let first = try await attempt()
        if let value = nonce(first) { remember(value, from: url) }
        guard canResend, asksForNonce(first) else { return first }
        await discard(first)
        let second = try await attempt()
        if let value = nonce(second) { remember(value, from: url) }
        return second
    }
}
