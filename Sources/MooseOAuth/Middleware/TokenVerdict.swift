#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
public import HTTPTypes

/// What a resource server's answer says about the access token a request carried (RFC 6750 §3.1).
///
/// ```swift
/// TokenVerdict(status: 401, wwwAuthenticate: [])                                              // .rejected
/// TokenVerdict(status: 200, wwwAuthenticate: [#"Bearer error="invalid_token""#])              // .rejected
/// TokenVerdict(status: 403, wwwAuthenticate: [#"Bearer error="insufficient_scope", scope="admin""#])
///                                                                       // .insufficientScope(scope: "admin")
/// ```
public enum TokenVerdict: Sendable, Hashable {
    /// Nothing in the answer is about the token: pass it on.
    case accepted
    /// A 401, or a `Bearer error="invalid_token"` challenge: this token failed. Refresh (only if it is
    /// still the current one) and send the request once more.
    case rejected
    /// A 403 with `Bearer error="insufficient_scope"`: the token is valid but lacks `scope` (the scope
    /// the server named, if it named one in RFC 6749 scope characters). A refresh cannot help.
    case insufficientScope(scope: String?)
    /// A 401 with `WWW-Authenticate: DPoP error="use_dpop_nonce"` (RFC 9449 §9): the token is fine,
    /// the proof needs the nonce the server sent. Send once more with a new proof — not a refresh.
    case useDPoPNonce

    /// The verdict for a response's status code and its `WWW-Authenticate` values. Total over any
    /// input; the header is parsed only when present (the hot path reads one integer).
    public init(status: Int, wwwAuthenticate: [String]) {
        guard !wwwAuthenticate.isEmpty else { self = status == 401 ? .rejected : .accepted; return }
        let challenges = AuthenticationChallenge.parse(wwwAuthenticate)
        func error(_ challenge: AuthenticationChallenge, is code: String) -> Bool {
            challenge["error"].map { Array($0.utf8) == Array(code.utf8) } == true
        }
        if status == 401, challenges.contains(where: { $0.hasScheme("DPoP") && error($0, is: "use_dpop_nonce") }) {
            self = .useDPoPNonce
            return
        }
        if status == 401 { self = .rejected; return }
        let bearer = challenges.filter { $0.hasScheme("Bearer") || $0.hasScheme("DPoP") }
        if bearer.contains(where: { error($0, is: "invalid_token") }) {
            self = .rejected
        } else if status == 403, let challenge = bearer.first(where: { error($0, is: "insufficient_scope") }) {
            self = .insufficientScope(scope: challenge["scope"].flatMap(Self.checkedScope))
        } else {
            self = .accepted
        }
    }

    /// The verdict for a response head.
    public init(_ response: HTTPResponse) {
        self.init(
            status: response.status.code,
            wwwAuthenticate: response.headerFields.contains(.wwwAuthenticate)
                ? response.headerFields[values: .wwwAuthenticate] : [])
    }

    /// A scope from outside, kept only when it is RFC 6749 §3.3 scope tokens separated by spaces (no
    /// control characters can reach an error message or a terminal) and at most 1,024 bytes.
    static func checkedScope(_ scope: String) -> String? {
        let bytes = scope.utf8
        guard !bytes.isEmpty, bytes.count <= 1024,
            bytes.allSatisfy({ $0 == 0x20 || $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) })
        else { return nil }
        return scope
    }
}
