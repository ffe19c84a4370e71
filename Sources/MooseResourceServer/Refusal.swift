/// Why a request's credentials were refused, and what to answer: the HTTP status, the
/// `WWW-Authenticate` challenges (RFC 6750 §3, RFC 9449 §7.1) and, when the server wants a DPoP nonce,
/// the `DPoP-Nonce` value.
///
/// ```swift
/// do {
///     let principal = try await server.verify(authorizationHeader: auth, dpopHeader: dpop, method: "GET", url: url)
/// } catch {
///     // error is a ResourceServerRefusal
///     response.status = error.status
///     for (name, value) in error.headers { response.headers.append(name, value) }
/// }
/// ```
///
/// `reason` is for logs: it says which check failed and never contains a token or a proof.
public struct ResourceServerRefusal: Error, Sendable, CustomStringConvertible {
    /// What kind of refusal this is; match with `catch ResourceServerRefusal.invalidToken`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The code's stable name, such as `invalid_token`.
        public var description: String { name }

        /// Lets a `catch` clause match on a code.
        public static func ~= (code: Self, error: any Error) -> Bool {
            (error as? ResourceServerRefusal)?.code == code
        }
    }

    /// No credentials at all: 401 with bare challenges, no error code (RFC 6750 §3.1).
    public static let missingCredentials = Code(name: "missing_credentials")
    /// An `Authorization` with another scheme than Bearer or DPoP (`Basic`…): 401 with bare challenges, no
    /// error code — RFC 6750 §3.1's answer to a client that "attempted using an unsupported authentication
    /// method", which starts an OAuth client's login where a 400 would not.
    public static let unsupportedScheme = Code(name: "unsupported_scheme")
    /// A malformed request (Authorization header syntax, several methods, oversized): 400 `invalid_request`.
    public static let invalidRequest = Code(name: "invalid_request")
    /// The access token is malformed, unsigned, expired, for another audience or issuer, or bound to a
    /// key and presented as Bearer: 401 `invalid_token`.
    public static let invalidToken = Code(name: "invalid_token")
    /// The token lacks a scope the request needs: 403 `insufficient_scope` with `scope`.
    public static let insufficientScope = Code(name: "insufficient_scope")
    /// The DPoP proof is missing or failed a check of RFC 9449 §4.3: 401 `invalid_dpop_proof`.
    public static let invalidDPoPProof = Code(name: "invalid_dpop_proof")
    /// The server wants a (fresh) nonce in the proof: 401 `use_dpop_nonce` and a `DPoP-Nonce` header (RFC 9449 §9).
    public static let useDPoPNonce = Code(name: "use_dpop_nonce")
    /// The token could not be checked now (the issuer's keys or the replay store unreachable): 503, no challenge.
    public static let temporarilyUnavailable = Code(name: "temporarily_unavailable")

    /// What kind of refusal this is.
    public let code: Code
    /// The HTTP status to answer with (400, 401, 403 or 503).
    public let status: Int
    /// The challenges to send, one `WWW-Authenticate` field each.
    public let challenges: [ResourceServerChallenge]
    /// A nonce to send as `DPoP-Nonce`, when the server uses nonces.
    public let dpopNonce: String?
    /// Which check failed, for logs; never contains a token or proof.
    public let reason: String
    /// For a `temporarilyUnavailable` refusal because introspection failed: the HTTP status its endpoint
    /// answered with, when that was the fault (`IntrospectionError.status`) — a 4xx is the issuer
    /// refusing this resource server's own client, which waiting does not mend. `nil` otherwise.
    public internal(set) var introspectionStatus: Int? = nil

    /// A refusal (the verifier makes these; public for adapters and tests).
    public init(
        code: Code, status: Int, challenges: [ResourceServerChallenge], dpopNonce: String? = nil, reason: String
    ) {
        self.code = code
        self.status = status
        self.challenges = challenges
        self.dpopNonce = dpopNonce
        self.reason = reason
    }

    /// The `WWW-Authenticate` values, sanitized.
    public var wwwAuthenticate: [String] { challenges.map(\.headerValue) }

    /// Every response header to send: one `WWW-Authenticate` per challenge, then `DPoP-Nonce` if any
    /// (its value sanitized like a challenge parameter), and `Cache-Control: no-store`.
    public var headers: [(name: String, value: String)] {
        var headers = wwwAuthenticate.map { (name: "WWW-Authenticate", value: $0) }
        if let dpopNonce { headers.append((name: "DPoP-Nonce", value: ResourceServerChallenge.quotable(dpopNonce))) }
        headers.append((name: "Cache-Control", value: "no-store"))
        return headers
    }

    /// What to log about this refusal, as structured fields: `refusal.code`, `refusal.status`,
    /// `refusal.reason`, and the request's `http.method` and `http.path` (at most 256 bytes each, controls
    /// replaced). Never a token, a proof or a query (which may carry one): give `path` without its query.
    ///
    /// ```swift
    /// logger.info("access token refused", metadata: refusal.logFields(method: "GET", path: "/items")
    ///     .mapValues { .string($0) })
    /// ```
    public func logFields(method: String, path: String) -> [String: String] {
        func clipped(_ text: Substring) -> String {
            String(
                decoding: text.utf8.prefix(256).map { $0 < 0x20 || $0 == 0x7F ? UInt8(ascii: "?") : $0 }, as: UTF8.self)
        }
        let pathOnly = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return [
            "refusal.code": code.description, "refusal.status": String(status), "refusal.reason": reason,
            "http.method": clipped(method[...]), "http.path": clipped(pathOnly)
        ]
    }

    /// `invalid_token (401): <reason>`.
    public var description: String { "\(code) (\(status)): \(reason)" }
}
