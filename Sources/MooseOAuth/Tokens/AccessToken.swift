#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import HTTPTypes

/// An access token as handed out by a `RefreshCoordinator`: its value and the generation it belongs
/// to (so a 401 can say which token failed). `description` shows a fingerprint, never the token.
public struct AccessToken: Sendable, Hashable, CustomStringConvertible {
    /// The token.
    public let value: String
    /// `Bearer`, `DPoP`…
    public let tokenType: String
    /// When it expires, if known.
    public let expiresAt: Date?
    /// Increases every time the coordinator publishes a new token.
    public let generation: Int64
    /// The key a DPoP-bound token must be presented with (RFC 9449 §7), `nil` for bearer tokens.
    public let dpopKey: DPoPKey?

    /// A token (coordinators make these; tests and adapters may too).
    public init(
        value: String, tokenType: String = "Bearer", expiresAt: Date? = nil, generation: Int64 = 0,
        dpopKey: DPoPKey? = nil
    ) {
        self.value = value
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.generation = generation
        self.dpopKey = dpopKey
    }

    /// A coordinator's token for `tokens`.
    init(_ tokens: TokenSet, generation: Int64) {
        self.init(
            value: tokens.accessToken, tokenType: tokens.tokenType, expiresAt: tokens.expiresAt, generation: generation,
            dpopKey: tokens.dpopKey)
    }

    /// `true` for a token the server bound to a DPoP key: it is sent as `Authorization: DPoP …`
    /// with a proof, never as a bearer token.
    public var isDPoPBound: Bool { tokenType.utf8.count == 4 && tokenType.lowercased() == "dpop" }

    /// The header fields that present this token with one request: `Authorization` (checked, see
    /// `checkedAuthorizationHeader()`), and for a DPoP-bound token a fresh `DPoP` proof for this
    /// method and URL (with `ath`, and the nonce the URL's origin gave last).
    ///
    /// - Throws: `OAuthError.unsafeValue` for a token that cannot be a header; `OAuthError.needsLogin`
    ///   for a DPoP-bound token without its key.
    public func authorizationFields(method: HTTPRequest.Method, url: URL) throws -> HTTPFields {
        var fields = HTTPFields()
        fields[.authorization] = try checkedAuthorizationHeader()
        if isDPoPBound {
            guard let dpopKey else {
                throw OAuthError(
                    OAuthError.needsLogin,
                    "the access token is bound to a DPoP key that is not here (RFC 9449): log in again")
            }
            fields[.dpop] = try dpopKey.proof(
                method: method, url: url, accessToken: value, nonce: DPoPNonces.nonce(for: url))
        }
        return fields
    }

    /// Sends `request` presenting this token (`authorizationFields`); for a DPoP-bound token, a
    /// resource server's `use_dpop_nonce` challenge (RFC 9449 §9) is answered once with a new proof
    /// carrying the nonce it sent, and every `DPoP-Nonce` it sends is remembered for its origin.
    public func send(_ request: APIRequest, with send: (APIRequest) async throws -> APIResponse) async throws
        -> APIResponse
    {
        var request = request
        guard request.url != nil else {
            throw OAuthError(OAuthError.invalidConfiguration, "the request has no absolute URL")
        }
        request.headerFields[.authorization] = try checkedAuthorizationHeader()
        guard isDPoPBound else { return try await send(request) }
        guard let dpopKey else {
            throw OAuthError(
                OAuthError.needsLogin,
                "the access token is bound to a DPoP key that is not here (RFC 9449): log in again")
        }
        // The one nonce rule (DPoPKey.send): a proof per attempt, one resend when the server asks for a nonce.
        return try await dpopKey.send(request, accessToken: value, send)
    }

    /// `Bearer <token>` for an `Authorization` header (RFC 6750 §2.1), unchecked: prefer
    /// `checkedAuthorizationHeader()` for tokens that came from a server.
    public var authorizationHeader: String { "\(tokenType) \(value)" }

    /// `Bearer <token>`, after checking that the token is an RFC 6750 `b64token` and the type an
    /// RFC 9110 token — so nothing a provider sent can break out of the header.
    ///
    /// - Throws: `OAuthError.unsafeValue`.
    public func checkedAuthorizationHeader() throws -> String {
        guard TokenCharacters.isB64Token(value), TokenCharacters.isHTTPToken(tokenType) else {
            throw OAuthError(
                OAuthError.unsafeValue,
                "the access token (or its type) has characters outside RFC 6750's b64token set; it is not sent as a header"
            )
        }
        return authorizationHeader
    }

    /// Fingerprint and generation only.
    public var description: String { "AccessToken(#\(TokenSet.fingerprint(value)), generation \(generation))" }
}
